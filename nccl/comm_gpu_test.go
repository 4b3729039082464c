//go:build linux

package nccl_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/lifetime"
	"github.com/purecuda/cuda/nccl"
	"github.com/purecuda/cuda/nvrtc"
)

// GPU tests of communicators: one process, every GPU (InitAll). Each
// skips without a GPU, and fails without NCCL under PURECUDA_REQUIRE_GPU.

// gpuRank is one GPU's rank: its primary context, stream and Comm.
type gpuRank struct {
	ctx *driver.Context
	s   *driver.Stream
	c   *nccl.Comm
}

// gpuRanks makes one rank per visible GPU with InitAll; all is closed
// when t ends, and then the device memory is back where it was.
func gpuRanks(t *testing.T) []gpuRank {
	t.Helper()
	gputest.Require(t)
	if _, _, _, err := nccl.Version(); err != nil {
		if gputest.Required() {
			t.Fatalf("PURECUDA_REQUIRE_GPU is set and NCCL is not usable: %v", err)
		}
		t.Skip(err)
	}
	n, err := driver.DeviceCount()
	require.NoError(t, err)
	rs := make([]gpuRank, n)
	ctxs := make([]*driver.Context, n)
	for i := range rs {
		dev, err := driver.DeviceByOrdinal(i)
		require.NoError(t, err)
		rs[i].ctx, err = dev.PrimaryContext()
		require.NoError(t, err)
		ctxs[i] = rs[i].ctx
		rs[i].s, err = rs[i].ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
	}
	warmNCCL(t, ctxs)
	free := make([]int, n)
	for i := range rs {
		free[i], _, err = rs[i].ctx.MemGetInfo()
		require.NoError(t, err)
	}
	comms, err := nccl.InitAll(ctxs...)
	require.NoError(t, err)
	for i := range rs {
		rs[i].c = comms[i]
	}
	t.Cleanup(func() {
		for _, r := range rs {
			assert.NoError(t, r.c.Close())
		}
		for _, r := range rs {
			assert.NoError(t, r.s.Close())
		}
		lifetime.Flush()
		for i, r := range rs {
			// A communicator still used by queued work (a captured
			// graph's) is destroyed once that work is done, off the
			// caller's goroutine: wait for its memory.
			memoryBack(t, r.ctx, free[i], fmt.Sprintf("device %d", i))
			assert.NoError(t, r.ctx.Close())
		}
	})
	return rs
}

// warmed is set once the process's first communicators are gone.
var warmed bool

// warmNCCL makes and closes one set of communicators, once per process,
// with an all-reduce on each: the first communicator of a process leaves
// NCCL's code loaded into each context (about 400-460 MiB of device memory
// on an H200 with NCCL 2.28), which later ones reuse, so leak checks
// measure from after it.
func warmNCCL(t *testing.T, ctxs []*driver.Context) {
	t.Helper()
	if warmed {
		return
	}
	comms, err := nccl.InitAll(ctxs...)
	require.NoError(t, err)
	streams := make([]*driver.Stream, len(ctxs))
	bufs := make([]*driver.Buffer[float32], len(ctxs))
	for i, c := range ctxs {
		streams[i], err = c.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		bufs[i], err = driver.AllocZeroed[float32](streams[i], 1024)
		require.NoError(t, err)
	}
	require.NoError(t, nccl.Group(func() error {
		for i, c := range comms {
			if err := nccl.AllReduce(c, streams[i], bufs[i], bufs[i], nccl.Sum); err != nil {
				return err
			}
		}
		return nil
	}))
	// Every other kind of operation the tests use, once: on one GPU NCCL
	// 2.28 left about 250 MiB more loaded after the first broadcast,
	// reduce, all-gather, reduce-scatter and send/recv of a process (H200).
	k := len(ctxs)
	big := make([]*driver.Buffer[int64], k)
	for i := range ctxs {
		big[i], err = driver.AllocZeroed[int64](streams[i], 1024*k)
		require.NoError(t, err)
	}
	for _, op := range []func(i int, c *nccl.Comm) error{
		func(i int, c *nccl.Comm) error { return nccl.Broadcast(c, streams[i], big[i], big[i], 0) },
		func(i int, c *nccl.Comm) error {
			return nccl.Reduce(c, streams[i], big[i], big[i], nccl.Max, 0)
		},
		func(i int, c *nccl.Comm) error {
			src, err := big[i].Slice(0, 1024)
			if err != nil {
				return err
			}
			defer src.Close()
			return nccl.AllGather(c, streams[i], src, big[i])
		},
		func(i int, c *nccl.Comm) error {
			dst, err := big[i].Slice(0, 1024)
			if err != nil {
				return err
			}
			defer dst.Close()
			return nccl.ReduceScatter(c, streams[i], big[i], dst, nccl.Sum)
		},
		func(i int, c *nccl.Comm) error {
			src, err := big[i].Slice(0, 512)
			if err != nil {
				return err
			}
			defer src.Close()
			dst, err := big[i].Slice(512, 1024)
			if err != nil {
				return err
			}
			defer dst.Close()
			return errors.Join(nccl.Send(c, streams[i], src, (i+1)%k), nccl.Recv(c, streams[i], dst, (i+k-1)%k))
		},
	} {
		require.NoError(t, nccl.Group(func() error {
			for i, c := range comms {
				if err := op(i, c); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	for i := range ctxs {
		require.NoError(t, streams[i].Synchronize())
		require.NoError(t, big[i].Close())
		require.NoError(t, bufs[i].Close())
		require.NoError(t, streams[i].Close())
		require.NoError(t, comms[i].Close())
	}
	lifetime.Flush()
	warmed = true
}

// memoryBack waits up to 30 s for c's device to have free0 bytes free
// again, within 64 MiB (kernels of NCCL's first used for a type or
// operation stay loaded), and fails t otherwise.
func memoryBack(t *testing.T, c *driver.Context, free0 int, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		lifetime.Flush()
		free, _, err := c.MemGetInfo()
		if !assert.NoError(t, err) {
			return
		}
		if free >= free0-64<<20 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s's free memory: %d bytes, %d before (%d MiB missing)", what, free, free0, (free0-free)>>20)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// group queues f(i) for every rank in one NCCL group.
func group(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	require.NoError(t, nccl.Group(func() error {
		var errs []error
		for i := 0; i < n; i++ {
			errs = append(errs, f(i))
		}
		return errors.Join(errs...)
	}))
}

func gpuAllReduce[T ~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64](t *testing.T, rs []gpuRank, n int) {
	sends := make([]*driver.Buffer[T], len(rs))
	recvs := make([]*driver.Buffer[T], len(rs))
	for i, r := range rs {
		v := make([]T, n)
		for j := range v {
			v[j] = T(i + j%50)
		}
		var err error
		sends[i], err = driver.AllocCopy(r.s, v)
		require.NoError(t, err)
		recvs[i], err = driver.AllocZeroed[T](r.s, n)
		require.NoError(t, err)
	}
	group(t, len(rs), func(i int) error { return nccl.AllReduce(rs[i].c, rs[i].s, sends[i], recvs[i], nccl.Sum) })
	k := len(rs)
	for i, r := range rs {
		got, err := recvs[i].ToHost(r.s)
		require.NoError(t, err)
		for j, x := range got {
			if want := T(k*(j%50) + k*(k-1)/2); x != want {
				t.Fatalf("%T rank %d element %d: %v, want %v", x, i, j, x, want)
			}
		}
		require.NoError(t, sends[i].Close())
		require.NoError(t, recvs[i].Close())
	}
}

// TestAllReduceEveryTypeOnGPUs: an exact all-reduce of every type over
// every GPU, with a count that is no multiple of anything.
func TestAllReduceEveryTypeOnGPUs(t *testing.T) {
	rs := gpuRanks(t)
	const n = 1<<20 + 3
	gpuAllReduce[int8](t, rs, n)
	gpuAllReduce[uint8](t, rs, n)
	gpuAllReduce[int32](t, rs, n)
	gpuAllReduce[uint32](t, rs, n)
	gpuAllReduce[int64](t, rs, n)
	gpuAllReduce[uint64](t, rs, n)
	gpuAllReduce[float32](t, rs, n)
	gpuAllReduce[float64](t, rs, n)
}

// TestCollectivesOnGPUs: broadcast, reduce, all-gather, reduce-scatter and
// send/recv in a ring, exact.
func TestCollectivesOnGPUs(t *testing.T) {
	rs := gpuRanks(t)
	k, n := len(rs), 4099
	alloc := func(i, m int, f func(j int) int64) *driver.Buffer[int64] {
		v := make([]int64, m)
		for j := range v {
			v[j] = f(j)
		}
		b, err := driver.AllocCopy(rs[i].s, v)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	check := func(what string, i int, b *driver.Buffer[int64], want func(j int) int64) {
		t.Helper()
		got, err := b.ToHost(rs[i].s)
		require.NoError(t, err)
		for j, x := range got {
			if x != want(j) {
				t.Fatalf("%s: rank %d element %d: %d, want %d", what, i, j, x, want(j))
			}
		}
	}
	zero := func(int) int64 { return 0 }
	root := k - 1

	bufs := make([]*driver.Buffer[int64], k)
	for i := range rs {
		bufs[i] = alloc(i, n, func(j int) int64 { return int64(100*i + j) })
	}
	group(t, k, func(i int) error { return nccl.Broadcast(rs[i].c, rs[i].s, bufs[i], bufs[i], root) })
	for i := range rs {
		check("Broadcast", i, bufs[i], func(j int) int64 { return int64(100*root + j) })
	}

	sends := make([]*driver.Buffer[int64], k)
	for i := range rs {
		sends[i] = alloc(i, n, func(j int) int64 { return int64(i*j + 1) })
	}
	out := alloc(root, n, zero)
	group(t, k, func(i int) error {
		var recv *driver.Buffer[int64]
		if i == root {
			recv = out
		}
		return nccl.Reduce(rs[i].c, rs[i].s, sends[i], recv, nccl.Max, root)
	})
	check("Reduce", root, out, func(j int) int64 { return int64((k-1)*j + 1) })

	gathered := make([]*driver.Buffer[int64], k)
	for i := range rs {
		gathered[i] = alloc(i, k*n, zero)
	}
	group(t, k, func(i int) error { return nccl.AllGather(rs[i].c, rs[i].s, sends[i], gathered[i]) })
	for i := range rs {
		check("AllGather", i, gathered[i], func(j int) int64 { return int64((j/n)*(j%n) + 1) })
	}

	scattered := make([]*driver.Buffer[int64], k)
	for i := range rs {
		scattered[i] = alloc(i, n, zero)
	}
	group(t, k, func(i int) error { return nccl.ReduceScatter(rs[i].c, rs[i].s, gathered[i], scattered[i], nccl.Sum) })
	for i := range rs {
		check("ReduceScatter", i, scattered[i], func(j int) int64 { return int64(k) * int64(i*j+1) })
	}

	// A ring: rank i sends to i+1 and receives from i-1.
	ring := make([]*driver.Buffer[int64], k)
	for i := range rs {
		ring[i] = alloc(i, n, zero)
	}
	group(t, k, func(i int) error {
		return errors.Join(nccl.Send(rs[i].c, rs[i].s, sends[i], (i+1)%k), nccl.Recv(rs[i].c, rs[i].s, ring[i], (i+k-1)%k))
	})
	for i := range rs {
		from := (i + k - 1) % k
		check("Send/Recv", i, ring[i], func(j int) int64 { return int64(from*j + 1) })
	}
}

const plusOne = `extern "C" __global__ void plus_one(float *x, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}`

// TestCapturedAllReduceAndKernelOnGPUs: every rank's stream captures an
// all-reduce (grouped) and then a kernel; the buffers and communicators
// are closed before the replays, which the graphs' holds keep working;
// 1000 replays, checked along the way and at the end.
func TestCapturedAllReduceAndKernelOnGPUs(t *testing.T) {
	rs := gpuRanks(t)
	const n = 1 << 16
	k := len(rs)
	fns := make([]*driver.Function, k)
	sends := make([]*driver.Buffer[float32], k)
	recvs := make([]*driver.Buffer[float32], k)
	for i, r := range rs {
		mod, _, err := r.ctx.CompileModule(plusOne, nvrtc.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = mod.Close() })
		fns[i], err = mod.Function("plus_one")
		require.NoError(t, err)
		v := make([]float32, n)
		for j := range v {
			v[j] = float32(i + j%100)
		}
		sends[i], err = driver.AllocCopy(r.s, v)
		require.NoError(t, err)
		recvs[i], err = driver.AllocZeroed[float32](r.s, n)
		require.NoError(t, err)
	}
	// A first all-reduce connects the ranks outside the capture.
	group(t, k, func(i int) error { return nccl.AllReduce(rs[i].c, rs[i].s, sends[i], recvs[i], nccl.Sum) })
	caps := make([]*graph.StreamCapture, k)
	for i, r := range rs {
		var err error
		caps[i], err = graph.BeginCapture(r.s, graph.CaptureRelaxed)
		require.NoError(t, err)
		defer caps[i].Abort()
	}
	group(t, k, func(i int) error { return nccl.AllReduce(rs[i].c, rs[i].s, sends[i], recvs[i], nccl.Sum) })
	execs := make([]*graph.Exec, k)
	for i, r := range rs {
		require.NoError(t, r.s.Launch(fns[i], driver.Grid((n+255)/256), driver.Block(256), recvs[i], uint32(n)))
		g, err := caps[i].End()
		require.NoError(t, err)
		execs[i], err = g.Instantiate()
		require.NoError(t, err)
		require.NoError(t, g.Close())
		t.Cleanup(func() { _ = execs[i].Close() })
	}
	outs := make([]*driver.Buffer[float32], k)
	for i := range rs {
		outs[i] = recvs[i]
		require.NoError(t, sends[i].Close())
	}
	want := func(j int) float32 { return float32(k*(j%100)+k*(k-1)/2) + 1 }
	for it := 0; it < 1000; it++ {
		for i, r := range rs {
			require.NoError(t, execs[i].Launch(r.s))
		}
		if it%100 == 99 {
			for i, r := range rs {
				got, err := outs[i].ToHost(r.s)
				require.NoError(t, err)
				for j, x := range got {
					if x != want(j) {
						t.Fatalf("replay %d rank %d element %d: %v, want %v", it, i, j, x, want(j))
					}
				}
			}
		}
	}
	for i := range rs {
		require.NoError(t, outs[i].Close())
	}
}

// TestWaitAndAbortOnGPU: Wait returns once the stream is idle; Abort ends
// the communicator, whose later calls match ErrAborted.
func TestWaitAndAbortOnGPU(t *testing.T) {
	rs := gpuRanks(t)
	bufs := make([]*driver.Buffer[float32], len(rs))
	for i, r := range rs {
		var err error
		bufs[i], err = driver.AllocZeroed[float32](r.s, 1024)
		require.NoError(t, err)
		defer bufs[i].Close()
	}
	group(t, len(rs), func(i int) error { return nccl.AllReduce(rs[i].c, rs[i].s, bufs[i], bufs[i], nccl.Sum) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range rs {
		require.NoError(t, r.c.Wait(ctx, r.s))
		require.NoError(t, r.c.Err())
	}
	for _, r := range rs {
		require.NoError(t, r.c.Abort())
		assert.ErrorIs(t, r.c.Err(), nccl.ErrAborted)
	}
	assert.ErrorIs(t, nccl.AllReduce(rs[0].c, rs[0].s, bufs[0], bufs[0], nccl.Sum), nccl.ErrAborted)
}
