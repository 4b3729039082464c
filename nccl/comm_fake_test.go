//go:build linux

package nccl_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/nccl"
)

// Tests of communicators and their operations against fakenccl and
// fakecuda (each in a child process): the fake runs every operation as a
// host function on its stream, checks the buffers when it runs, and counts
// operations that ran after their communicator was destroyed.

// rank is one rank of a test's communicator: its stream and Comm.
type rank struct {
	s *driver.Stream
	c *nccl.Comm
}

// fakeCtx is device 0's primary context, closed when t ends.
func fakeCtx(t *testing.T) *driver.Context {
	t.Helper()
	dev, err := driver.DeviceByOrdinal(0)
	require.NoError(t, err)
	ctx, err := dev.PrimaryContext()
	require.NoError(t, err)
	t.Cleanup(func() { _ = ctx.Close() })
	return ctx
}

// fakeRanks makes a communicator of n ranks in this process (InitRank
// from n goroutines, all on the fake's one device), each with a stream of
// its own; everything is closed when t ends, and then no bad use may have
// been counted.
func fakeRanks(t *testing.T, n int, cfg *nccl.Config) (*driver.Context, []rank) {
	t.Helper()
	ctx := fakeCtx(t)
	id, err := nccl.NewUniqueID()
	require.NoError(t, err)
	rs := make([]rank, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs[i].c, errs[i] = nccl.InitRank(context.Background(), ctx, id, n, i, cfg)
		}()
	}
	wg.Wait()
	for i := range rs {
		require.NoError(t, errs[i], "rank %d", i)
		rs[i].s, err = ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		for _, r := range rs {
			assert.NoError(t, r.c.Close())
			assert.NoError(t, r.s.Close())
		}
		waitNoComms(t)
		assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
		faketest.NoBadUses(t)
	})
	return ctx, rs
}

// upload is a buffer of ctx holding v.
func upload[T any](t *testing.T, s *driver.Stream, v []T) *driver.Buffer[T] {
	t.Helper()
	b, err := driver.AllocCopy(s, v)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// zeros is a buffer of n zero elements.
func zeros[T any](t *testing.T, s *driver.Stream, n int) *driver.Buffer[T] {
	t.Helper()
	b, err := driver.AllocZeroed[T](s, n)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func download[T any](t *testing.T, s *driver.Stream, b *driver.Buffer[T]) []T {
	t.Helper()
	v, err := b.ToHost(s)
	require.NoError(t, err)
	return v
}

// seq is n values from v, v+1, ...
func seq[T ~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v + T(i)
	}
	return out
}

// gate holds s until open is called: work queued behind it waits.
func gate(t *testing.T, s *driver.Stream, slot uintptr) (open func()) {
	t.Helper()
	faketest.Call(t, "fake_close_gate", slot)
	require.NoError(t, s.Raw(func(h uintptr) error {
		return cu.LaunchHostFunc(cu.CUstream(h), cu.CUhostFn(faketest.Sym(t, "fake_gate_fn")), slot)
	}))
	var once sync.Once
	open = func() { once.Do(func() { faketest.Call(t, "fake_open_gate", slot) }) }
	t.Cleanup(open)
	return open
}

func TestCommRankSizeDeviceFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	ctx, rs := fakeRanks(t, 3, nil)
	for i, r := range rs {
		assert.Equal(t, i, r.c.Rank())
		assert.Equal(t, 3, r.c.Size())
		assert.Equal(t, i, r.c.Device(), "fakenccl: one device per rank")
		assert.Same(t, ctx, r.c.Context())
		assert.NoError(t, r.c.Err())
	}
}

// allReduceCase checks an all-reduce of 2 ranks for element type T.
func allReduceCase[T ~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64](t *testing.T, rs []rank) {
	const n = 37
	a := upload(t, rs[0].s, seq[T](1, n))
	b := upload(t, rs[1].s, seq[T](3, n))
	outs := []*driver.Buffer[T]{zeros[T](t, rs[0].s, n), b} // rank 1 in place
	require.NoError(t, nccl.Group(func() error {
		if err := nccl.AllReduce(rs[0].c, rs[0].s, a, outs[0], nccl.Sum); err != nil {
			return err
		}
		return nccl.AllReduce(rs[1].c, rs[1].s, b, outs[1], nccl.Sum)
	}))
	want := make([]T, n)
	for i := range want {
		want[i] = T(1+i) + T(3+i)
	}
	for r := range rs {
		assert.Equal(t, want, download(t, rs[r].s, outs[r]), "rank %d", r)
	}
}

// TestAllReduceEveryTypeFromFake: every element type NCCL reduces, in
// place and not.
func TestAllReduceEveryTypeFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 2, nil)
	type celsius float32
	allReduceCase[int8](t, rs)
	allReduceCase[uint8](t, rs)
	allReduceCase[int32](t, rs)
	allReduceCase[uint32](t, rs)
	allReduceCase[int64](t, rs)
	allReduceCase[uint64](t, rs)
	allReduceCase[float32](t, rs)
	allReduceCase[float64](t, rs)
	allReduceCase[celsius](t, rs)
}

// TestCollectivesFromFake: broadcast, reduce, all-gather, reduce-scatter
// and the reductions other than Sum, over 2 ranks.
func TestCollectivesFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 2, nil)
	s0, s1 := rs[0].s, rs[1].s
	both := func(f0, f1 func() error) {
		t.Helper()
		require.NoError(t, nccl.Group(func() error {
			if err := f0(); err != nil {
				return err
			}
			return f1()
		}))
	}

	// Broadcast from rank 1; rank 0 passes no send buffer.
	src := upload(t, s1, seq[int64](100, 8))
	d0, d1 := zeros[int64](t, s0, 8), zeros[int64](t, s1, 8)
	both(func() error { return nccl.Broadcast(rs[0].c, s0, nil, d0, 1) },
		func() error { return nccl.Broadcast(rs[1].c, s1, src, d1, 1) })
	assert.Equal(t, seq[int64](100, 8), download(t, s0, d0))
	assert.Equal(t, seq[int64](100, 8), download(t, s1, d1))

	// Reduce (Max) to rank 0; rank 1 passes no recv buffer.
	x0 := upload(t, s0, []float64{1, 9, 3})
	x1 := upload(t, s1, []float64{4, 2, 8})
	r0 := zeros[float64](t, s0, 3)
	both(func() error { return nccl.Reduce(rs[0].c, s0, x0, r0, nccl.Max, 0) },
		func() error { return nccl.Reduce(rs[1].c, s1, x1, nil, nccl.Max, 0) })
	assert.Equal(t, []float64{4, 9, 8}, download(t, s0, r0))

	// All-gather: rank order.
	g0, g1 := zeros[uint32](t, s0, 6), zeros[uint32](t, s1, 6)
	both(func() error { return nccl.AllGather(rs[0].c, s0, upload(t, s0, []uint32{1, 2, 3}), g0) },
		func() error { return nccl.AllGather(rs[1].c, s1, upload(t, s1, []uint32{4, 5, 6}), g1) })
	assert.Equal(t, []uint32{1, 2, 3, 4, 5, 6}, download(t, s0, g0))
	assert.Equal(t, []uint32{1, 2, 3, 4, 5, 6}, download(t, s1, g1))

	// Reduce-scatter (Prod): rank r gets block r.
	p0, p1 := zeros[int32](t, s0, 2), zeros[int32](t, s1, 2)
	both(func() error {
		return nccl.ReduceScatter(rs[0].c, s0, upload(t, s0, []int32{1, 2, 3, 4}), p0, nccl.Prod)
	},
		func() error {
			return nccl.ReduceScatter(rs[1].c, s1, upload(t, s1, []int32{5, 6, 7, 8}), p1, nccl.Prod)
		})
	assert.Equal(t, []int32{5, 12}, download(t, s0, p0))
	assert.Equal(t, []int32{21, 32}, download(t, s1, p1))

	// Min and Avg.
	m0, m1 := upload(t, s0, []float32{1, 8}), upload(t, s1, []float32{3, 2})
	both(func() error { return nccl.AllReduce(rs[0].c, s0, m0, m0, nccl.Min) },
		func() error { return nccl.AllReduce(rs[1].c, s1, m1, m1, nccl.Min) })
	assert.Equal(t, []float32{1, 2}, download(t, s0, m0))
	v0, v1 := upload(t, s0, []float32{1, 8}), upload(t, s1, []float32{3, 2})
	both(func() error { return nccl.AllReduce(rs[0].c, s0, v0, v0, nccl.Avg) },
		func() error { return nccl.AllReduce(rs[1].c, s1, v1, v1, nccl.Avg) })
	assert.Equal(t, []float32{2, 5}, download(t, s1, v1))
}

// TestSendRecvFromFake: each rank sends to the other and receives, in one
// group.
func TestSendRecvFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 2, nil)
	out := []*driver.Buffer[uint8]{upload(t, rs[0].s, seq[uint8](10, 5)), upload(t, rs[1].s, seq[uint8](50, 5))}
	in := []*driver.Buffer[uint8]{zeros[uint8](t, rs[0].s, 5), zeros[uint8](t, rs[1].s, 5)}
	require.NoError(t, nccl.Group(func() error {
		for r := range rs {
			if err := nccl.Send(rs[r].c, rs[r].s, out[r], 1-r); err != nil {
				return err
			}
			if err := nccl.Recv(rs[r].c, rs[r].s, in[r], 1-r); err != nil {
				return err
			}
		}
		return nil
	}))
	assert.Equal(t, seq[uint8](50, 5), download(t, rs[0].s, in[0]))
	assert.Equal(t, seq[uint8](10, 5), download(t, rs[1].s, in[1]))
}
