package tables_test

import (
	"fmt"

	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/tables"
	"github.com/purecuda/cuda/lifetime"
)

// A graph's owner table: a kernel node names a buffer, a memcpy node a pinned
// Go slice. Destroying a node drops its owners; the graph's user-object
// destructor (here invoked by hand, as CUDA would from its own thread)
// only queues the table's release.
func Example() {
	var buf lifetime.Object
	buf.Init(func() error { fmt.Println("cuMemFree"); return nil })

	tab := tables.New()
	const kernelNode, copyNode = 1, 2
	ref, _ := buf.Hold()
	_ = tab.Add(kernelNode, ref)
	_ = tab.Add(copyNode, release.PinSlice(make([]float32, 256)))
	_ = buf.Close() // the user is done with the buffer; the graph is not
	fmt.Println("owners:", tab.Len(), "buffer destroyed:", buf.Destroyed())

	_ = tab.Drop(copyNode) // the memcpy node was removed: unpin its slice
	fmt.Println("owners:", tab.Len())

	id, _ := tab.DestructorID() // userData for cuUserObjectCreate with HostFn
	hostfn.Invoke(id)           // CUDA: the graph and its executables are gone
	lifetime.Flush()
	fmt.Println("table released:", tab.Released(), "buffer destroyed:", buf.Destroyed())
	// Output:
	// owners: 2 buffer destroyed: false
	// owners: 1
	// cuMemFree
	// table released: true buffer destroyed: true
}
