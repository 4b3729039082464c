package driver

import (
	"github.com/purecuda/cuda/internal/seam"
)

// Another library's releases that wait for the device (seam.Synchronizing).

func init() {
	seam.Synchronizing = func(ctx any, retry, call func() error) (bool, error) {
		c, _ := ctx.(*Context)
		if c == nil || retry == nil || call == nil {
			return true, invalid("seam.Synchronizing", "nil context or function")
		}
		return drainThenUnlessCaptured(c, retry, call)
	}
}
