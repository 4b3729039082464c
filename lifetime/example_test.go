package lifetime_test

import (
	"fmt"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
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

// A resource purecuda does not manage — memory another library allocated,
// a cuBLAS workspace — that a graph node names: the user counts it with an
// Object, and hands the node a Ref. The graph releases the Ref once the
// graph, its clones and executables are gone; the resource is freed when
// its owner has closed it too.
func ExampleRef() {
	var workspace lifetime.Object
	addr, size := driver.DevicePtr(0x7f00_0000_0000), 1<<20 // from the other library
	workspace.Init(func() error {
		fmt.Println("the other library frees the workspace")
		return nil
	})
	ref, ok := workspace.Hold()
	if !ok {
		return
	}
	var g *graph.Graph // made with graph.New
	_, err := g.Memset(graph.RawDevice(addr, size, ref), 0, 4)
	fmt.Println(err != nil) // g is nil here: the add fails, and still releases ref
	_ = workspace.Close()
	// Output:
	// true
	// the other library frees the workspace
}
