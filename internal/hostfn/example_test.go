package hostfn_test

import (
	"fmt"
	"runtime"

	"github.com/purecuda/cuda/internal/hostfn"
)

// A Sink tells a host function's runtime.Goexit (t.FailNow) from a panic.
func ExampleGoexited() {
	sink := &recordingSink{}
	hostfn.Invoke(hostfn.Register(hostfn.Callback{
		Fn:   func() { runtime.Goexit() },
		Once: true,
		Sink: sink,
	}))
	vals, _ := sink.got()
	_, goexit := vals[0].(*hostfn.Goexited)
	fmt.Println("Goexit:", goexit)
	// Output: Goexit: true
}
