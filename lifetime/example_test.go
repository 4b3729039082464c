package lifetime_test

import (
	"fmt"
	"runtime"

	"github.com/purecuda/cuda/lifetime"
)

// A stream-like object: the CUDA handle is destroyed only when the owner has
// closed it and the last call in flight has finished.
type stream struct {
	obj lifetime.Object
}

func newStream() *stream {
	s := &stream{}
	s.obj.Init(func() error {
		fmt.Println("cuStreamDestroy")
		return nil
	})
	return s
}

// launch is a method that hands the stream to CUDA: it holds a reference for
// the duration of the call (I4).
func (s *stream) launch(during func()) error {
	if !s.obj.Acquire() {
		return fmt.Errorf("stream is closed")
	}
	defer s.obj.Release()
	fmt.Println("cuLaunchKernel")
	during() // e.g. another goroutine closes the stream meanwhile
	return nil
}

// Close racing a call in flight: Close returns at once, the call goes on with
// a live stream, and the stream is destroyed when the call drops its
// reference. Later calls are refused.
func ExampleObject() {
	s := newStream()
	_ = s.launch(func() {
		fmt.Println("Close:", s.obj.Close())
		fmt.Println("destroyed during the call:", s.obj.Destroyed())
	})
	fmt.Println("destroyed after the call:", s.obj.Destroyed())
	fmt.Println(s.launch(func() {}))
	// Output:
	// cuLaunchKernel
	// Close: <nil>
	// destroyed during the call: false
	// cuStreamDestroy
	// destroyed after the call: true
	// stream is closed
}

// A graph's owner table: a kernel node names a buffer, a memcpy node a pinned
// Go slice. Destroying a node drops its owners; the graph's user-object
// destructor (here invoked by hand, as CUDA would from its own thread)
// only queues the table's release.
func ExampleTable() {
	var buf lifetime.Object
	buf.Init(func() error { fmt.Println("cuMemFree"); return nil })

	tab := lifetime.NewTable()
	const kernelNode, copyNode = 1, 2
	ref, _ := buf.Ref()
	_ = tab.Add(kernelNode, ref)
	_ = tab.Add(copyNode, lifetime.PinSlice(make([]float32, 256)))
	_ = buf.Close() // the user is done with the buffer; the graph is not
	fmt.Println("owners:", tab.Len(), "buffer destroyed:", buf.Destroyed())

	_ = tab.Drop(copyNode) // the memcpy node was removed: unpin its slice
	fmt.Println("owners:", tab.Len())

	id, _ := tab.DestructorID() // userData for cuUserObjectCreate with HostFn
	lifetime.Invoke(id)         // CUDA: the graph and its executables are gone
	lifetime.Flush()
	fmt.Println("table released:", tab.Released(), "buffer destroyed:", buf.Destroyed())
	// Output:
	// owners: 2 buffer destroyed: false
	// owners: 1
	// cuMemFree
	// table released: true buffer destroyed: true
}

// A cleanup must not block and must not call CUDA itself: it hands the
// release to the queue, which runs it on a goroutine of ours.
func ExampleDefer() {
	type buffer struct{ _ [64]byte }
	done := make(chan struct{})
	b := &buffer{}
	runtime.AddCleanup(b, func(ptr uintptr) {
		lifetime.Defer(lifetime.OwnerFunc(func() error {
			fmt.Println("cuMemFree, from the release queue")
			close(done)
			return nil
		}))
	}, uintptr(0xd000))
	b = nil
	for {
		runtime.GC()
		select {
		case <-done:
			lifetime.Flush()
			fmt.Println("queued:", lifetime.ReadStats().Queued)
			return
		default:
			runtime.Gosched()
		}
	}
	// Output:
	// cuMemFree, from the release queue
	// queued: 0
}

// A Sink tells a host function's runtime.Goexit (t.FailNow) from a panic.
func ExampleGoexited() {
	sink := &recordingSink{}
	lifetime.Invoke(lifetime.Register(lifetime.Callback{
		Fn:   func() { runtime.Goexit() },
		Once: true,
		Sink: sink,
	}))
	vals, _ := sink.got()
	_, goexit := vals[0].(*lifetime.Goexited)
	fmt.Println("Goexit:", goexit)
	// Output: Goexit: true
}
