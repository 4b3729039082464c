package graph

import (
	"fmt"
	"runtime"
)

// osThread runs functions on one OS thread, for the calls CUDA wants on the
// thread that began a global or thread-local capture.
type osThread struct{ work chan func() }

func newOSThread() *osThread {
	t := &osThread{work: make(chan func())}
	go t.loop()
	return t
}

func (t *osThread) loop() {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	for f := range t.work {
		f()
	}
}

// do runs f on the thread and returns its error; a panic in f becomes an
// error.
func (t *osThread) do(f func() error) (err error) {
	done := make(chan struct{})
	t.work <- func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("graph: capture thread: panic: %v", p)
			}
		}()
		err = f()
	}
	<-done
	return err
}

func (t *osThread) stop() { close(t.work) }
