package hostfn_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/internal/hostfn"
)

// heldOwner counts its releases and whether each ran inside the callback's
// scope (where a last release must queue its destroy).
type heldOwner struct{ released, inside *int }

func (h heldOwner) Release() error {
	*h.released++
	if hostfn.InCallback() {
		*h.inside++
	}
	return nil
}

// A Once callback's Held is released once, inside the callback's scope,
// after Fn ran, panicked or called Goexit, or after Cancel (with or without
// OnCancel); a callback that runs more than once releases nothing.
func TestCallbackHeldReleasedOnce(t *testing.T) {
	cases := map[string]struct {
		fn     func()
		cancel bool
		onCan  func()
		once   bool
		want   int
	}{
		"ran":                 {fn: func() {}, once: true, want: 1},
		"panicked":            {fn: func() { panic("x") }, once: true, want: 1},
		"Goexit":              {fn: runtime.Goexit, once: true, want: 1},
		"cancelled":           {fn: func() {}, cancel: true, once: true, want: 1},
		"cancelled, OnCancel": {fn: func() {}, cancel: true, onCan: func() {}, once: true, want: 1},
		"runs more than once": {fn: func() {}, once: false, want: 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var released, inside int
			id := hostfn.Register(hostfn.Callback{Fn: c.fn, Once: c.once, OnCancel: c.onCan, Held: heldOwner{&released, &inside}})
			if c.cancel {
				assert.True(t, hostfn.Cancel(id))
			} else {
				hostfn.Invoke(id)
				hostfn.Invoke(id)
			}
			if !c.once {
				hostfn.Unregister(id)
			}
			assert.Equal(t, c.want, released, "releases")
			assert.Equal(t, c.want, inside, "releases inside the callback's scope")
		})
	}
}
