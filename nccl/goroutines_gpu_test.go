//go:build linux

package nccl_test

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/nccl"
)

// TestGoroutinePerGPUOnGPUs: one process, one goroutine per GPU, each
// making its rank with InitRank and all-reducing on its own communicator
// without Group (as a thread per GPU does in C). NCCL sets up its
// connections to the peers inside the first collective's call, waiting
// there for the peers' first collectives; this package queues the
// operations of each device one at a time, and of different devices in
// parallel, so the goroutines meet there (with one lock for the whole
// process, the first call would hold it while NCCL waits, and the other
// goroutine would never get in). The body runs in a child process with a
// time limit, so a deadlock fails the test instead of hanging it.
func TestGoroutinePerGPUOnGPUs(t *testing.T) {
	if os.Getenv(childEnv) != t.Name() {
		gputest.Require(t)
		if n, err := driver.DeviceCount(); err != nil || n < 2 {
			t.Skipf("needs two GPUs; this machine has %d (%v)", n, err)
		}
		if _, _, _, err := nccl.Version(); err != nil {
			if gputest.Required() {
				t.Fatalf("PURECUDA_REQUIRE_GPU is set and NCCL is not usable: %v", err)
			}
			t.Skip(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v", "-test.timeout=90s")
		cmd.Env = append(os.Environ(), childEnv+"="+t.Name(), "NCCL_NVLS_ENABLE=0")
		out, err := cmd.CombinedOutput()
		if assert.NoError(t, err, "the child (a deadlock shows as its timeout):\n%s", out) {
			assert.Contains(t, string(out), "--- PASS: "+t.Name(), "the child ran:\n%s", out)
		}
		t.Logf("child:\n%s", out)
		return
	}
	id, err := nccl.NewUniqueID()
	require.NoError(t, err)
	const n = 1 << 20
	results := make([][]float32, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = func() error {
				dev, err := driver.DeviceByOrdinal(r)
				if err != nil {
					return err
				}
				ctx, err := dev.PrimaryContext()
				if err != nil {
					return err
				}
				defer ctx.Close()
				c, err := nccl.InitRank(context.Background(), ctx, id, 2, r, nil)
				if err != nil {
					return err
				}
				defer c.Close()
				s, err := ctx.NewStream(driver.StreamNonBlocking)
				if err != nil {
					return err
				}
				defer s.Close()
				v := make([]float32, n)
				for i := range v {
					v[i] = float32(r + 1)
				}
				b, err := driver.AllocCopy(s, v)
				if err != nil {
					return err
				}
				defer b.Close()
				for range 3 {
					if err := nccl.AllReduce(c, s, b, b, nccl.Sum); err != nil {
						return err
					}
				}
				wctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				if err := c.Wait(wctx, s); err != nil {
					return err
				}
				results[r], err = b.ToHost(s)
				return err
			}()
		}()
	}
	wg.Wait()
	for r := range 2 {
		require.NoError(t, errs[r], "rank %d", r)
		// 1+2 = 3, then 6, then 12.
		assert.Equal(t, float32(12), results[r][0], "rank %d", r)
		assert.Equal(t, float32(12), results[r][n-1], "rank %d", r)
	}
}
