package release_test

import (
	"fmt"
	"runtime"

	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/lifetime"
)

// A cleanup must not block and must not call CUDA itself: it hands the
// release to the queue, which runs it on a goroutine of ours.
func ExampleDefer() {
	type buffer struct{ _ [64]byte }
	done := make(chan struct{})
	b := &buffer{}
	runtime.AddCleanup(b, func(ptr uintptr) {
		release.Defer(lifetime.OwnerFunc(func() error {
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
