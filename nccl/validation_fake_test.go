//go:build linux

package nccl_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/nccl"
)

// TestOperationArgumentsFromFake: every refused argument is an error
// matching ErrInvalidArgument (or ErrNilStream, ErrClosed), and nothing is
// queued.
func TestOperationArgumentsFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	ctx, rs := fakeRanks(t, 2, nil)
	c, s := rs[0].c, rs[0].s
	b4 := zeros[float32](t, s, 4)
	b8 := zeros[float32](t, s, 8)
	closed := zeros[float32](t, s, 4)
	require.NoError(t, closed.Close())
	closedStream, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	require.NoError(t, closedStream.Close())

	// Memory and a stream of another context of the device.
	dev, err := driver.DeviceByOrdinal(0)
	require.NoError(t, err)
	other, err := dev.NewContext(0)
	require.NoError(t, err)
	defer other.Close()
	foreign, err := driver.Alloc[float32](other, 4)
	require.NoError(t, err)
	defer foreign.Close()
	foreignStream, err := other.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer foreignStream.Close()

	before := faketest.NCCL(t, "fake_nccl_ops_run")
	invalid := map[string]error{
		"AllReduce lengths":        nccl.AllReduce(c, s, b4, b8, nccl.Sum),
		"AllReduce nil send":       nccl.AllReduce(c, s, nil, b4, nccl.Sum),
		"AllReduce nil recv":       nccl.AllReduce(c, s, b4, nil, nccl.Sum),
		"AllReduce op":             nccl.AllReduce(c, s, b4, b4, nccl.Op(9)),
		"AllReduce int type":       nccl.AllReduce(c, s, zeros[int](t, s, 4), zeros[int](t, s, 4), nccl.Sum),
		"AllReduce foreign memory": nccl.AllReduce(c, s, foreign, b4, nccl.Sum),
		"AllReduce foreign stream": nccl.AllReduce(c, foreignStream, b4, b4, nccl.Sum),
		"Broadcast root":           nccl.Broadcast(c, s, b4, b4, 2),
		"Broadcast negative root":  nccl.Broadcast(c, s, b4, b4, -1),
		"Broadcast root no send":   nccl.Broadcast(c, s, nil, b4, 0),
		"Broadcast lengths":        nccl.Broadcast(c, s, b8, b4, 0),
		"Broadcast nil recv":       nccl.Broadcast(c, s, b4, nil, 1),
		"Reduce root no recv":      nccl.Reduce(c, s, b4, nil, nccl.Sum, 0),
		"Reduce nil send":          nccl.Reduce(c, s, nil, b4, nccl.Sum, 1),
		"Reduce lengths":           nccl.Reduce(c, s, b4, b8, nccl.Max, 0),
		"AllGather lengths":        nccl.AllGather(c, s, b4, b4),
		"ReduceScatter lengths":    nccl.ReduceScatter(c, s, b4, b4, nccl.Sum),
		"Send peer":                nccl.Send(c, s, b4, 5),
		"Recv peer":                nccl.Recv(c, s, b4, -1),
		"Send nil":                 nccl.Send[float32](c, s, nil, 1),
	}
	for name, err := range invalid {
		assert.ErrorIs(t, err, nccl.ErrInvalidArgument, name)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, name)
	}
	assert.ErrorIs(t, nccl.AllReduce(c, nil, b4, b4, nccl.Sum), driver.ErrNilStream)
	assert.ErrorIs(t, nccl.AllReduce(c, s, closed, b4, nccl.Sum), driver.ErrClosed)
	assert.ErrorIs(t, nccl.AllReduce(c, closedStream, b4, b4, nccl.Sum), driver.ErrClosed)
	assert.Equal(t, before, faketest.NCCL(t, "fake_nccl_ops_run"), "nothing was queued")

	// A stream of the same context other than the rank's own is fine: the
	// operation runs in that stream's order. (Checked with rank 1 too.)
	s2, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s2.Close()
	x0, x1 := upload(t, s2, []float32{1, 2, 3, 4}), upload(t, rs[1].s, []float32{1, 1, 1, 1})
	require.NoError(t, nccl.Group(func() error {
		return errors.Join(nccl.AllReduce(c, s2, x0, x0, nccl.Sum), nccl.AllReduce(rs[1].c, rs[1].s, x1, x1, nccl.Sum))
	}))
	assert.Equal(t, []float32{2, 3, 4, 5}, download(t, s2, x0))
}

// TestInitArgumentsFromFake: InitRank refuses bad ranks, a context other
// than a primary one, a bad Config; InitAll two contexts of one device.
func TestInitArgumentsFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	ctx := fakeCtx(t)
	id, err := nccl.NewUniqueID()
	require.NoError(t, err)
	bg := context.Background()
	for name, f := range map[string]func() error{
		"rank too big": func() error { _, err := nccl.InitRank(bg, ctx, id, 2, 2, nil); return err },
		"no ranks":     func() error { _, err := nccl.InitRank(bg, ctx, id, 0, 0, nil); return err },
		"MaxCTAs":      func() error { _, err := nccl.InitRank(bg, ctx, id, 1, 0, &nccl.Config{MaxCTAs: -1}); return err },
		"Min > Max": func() error {
			_, err := nccl.InitRank(bg, ctx, id, 1, 0, &nccl.Config{MinCTAs: 4, MaxCTAs: 2})
			return err
		},
		"NUL":     func() error { _, err := nccl.InitRank(bg, ctx, id, 1, 0, &nccl.Config{NetName: "a\x00b"}); return err },
		"timeout": func() error { _, err := nccl.InitRank(bg, ctx, id, 1, 0, &nccl.Config{AbortTimeout: -1}); return err },
		"nil ctx": func() error {
			//lint:ignore SA1012 a nil context is what is tested
			_, err := nccl.InitRank(nil, ctx, id, 1, 0, nil)
			return err
		},
		"dup devs": func() error { _, err := nccl.InitAll(ctx, ctx); return err },
	} {
		assert.ErrorIs(t, f(), nccl.ErrInvalidArgument, name)
	}
	dev, err := driver.DeviceByOrdinal(0)
	require.NoError(t, err)
	other, err := dev.NewContext(0)
	require.NoError(t, err)
	defer other.Close()
	_, err = nccl.InitRank(bg, other, id, 1, 0, nil)
	assert.ErrorIs(t, err, nccl.ErrInvalidArgument)
	assert.ErrorContains(t, err, "primary context")
	done, cancel := context.WithCancel(bg)
	cancel()
	_, err = nccl.InitRank(done, ctx, id, 1, 0, nil)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_live_comms"))
}

// TestInitAllFromFake: one process, one rank per context (the fake has one
// device: one rank).
func TestInitAllFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	ctx := fakeCtx(t)
	comms, err := nccl.InitAll(ctx)
	require.NoError(t, err)
	require.Len(t, comms, 1)
	assert.Equal(t, 0, comms[0].Rank())
	assert.Equal(t, 1, comms[0].Size())
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s.Close()
	b := upload(t, s, []int32{7, 8})
	require.NoError(t, nccl.AllReduce(comms[0], s, b, b, nccl.Sum))
	assert.Equal(t, []int32{7, 8}, download(t, s, b))
	require.NoError(t, comms[0].Close())
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_live_comms"), "its stream was idle: destroyed in Close")
}

// TestNonBlockingFromFake: a non-blocking communicator's creation polls
// NCCL until every rank joined, and gives up (aborting) when its Go context
// ends first; its operations work as a blocking one's.
func TestNonBlockingFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 2, &nccl.Config{NonBlocking: true, Name: "test", NetName: "Socket", MinCTAs: 1, MaxCTAs: 4})
	x0, x1 := upload(t, rs[0].s, []uint64{1, 2}), upload(t, rs[1].s, []uint64{10, 20})
	require.NoError(t, nccl.Group(func() error {
		return errors.Join(nccl.AllReduce(rs[0].c, rs[0].s, x0, x0, nccl.Sum), nccl.AllReduce(rs[1].c, rs[1].s, x1, x1, nccl.Sum))
	}))
	assert.Equal(t, []uint64{11, 22}, download(t, rs[1].s, x1))

	// Rank 1 of a new communicator never joins.
	id, err := nccl.NewUniqueID()
	require.NoError(t, err)
	gctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = nccl.InitRank(gctx, rs[0].c.Context(), id, 2, 0, &nccl.Config{NonBlocking: true})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestSplitFromFake: both ranks in one color with reversed keys swap
// ranks; NoColor gives no communicator.
func TestSplitFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 2, nil)
	subs := make([]*nccl.Comm, 2)
	errs := make([]error, 2)
	done := make(chan int, 2)
	for r := range rs {
		go func() {
			subs[r], errs[r] = rs[r].c.Split(0, 1-r, nil)
			done <- r
		}()
	}
	<-done
	<-done
	for r := range rs {
		require.NoError(t, errs[r])
		assert.Equal(t, 1-r, subs[r].Rank())
		assert.Equal(t, 2, subs[r].Size())
		sub := subs[r]
		t.Cleanup(func() { assert.NoError(t, sub.Close()) })
	}
	x0, x1 := upload(t, rs[0].s, []float64{1}), upload(t, rs[1].s, []float64{2})
	require.NoError(t, nccl.Group(func() error {
		return errors.Join(nccl.Broadcast(subs[0], rs[0].s, nil, x0, 0), nccl.Broadcast(subs[1], rs[1].s, x1, x1, 0))
	}))
	assert.Equal(t, []float64{2}, download(t, rs[0].s, x0), "new rank 0 is old rank 1")
	for r := range rs {
		go func() {
			subs[r], errs[r] = rs[r].c.Split(nccl.NoColor, 0, nil)
			done <- r
		}()
	}
	<-done
	<-done
	for r := range rs {
		assert.NoError(t, errs[r])
		assert.Nil(t, subs[r])
	}
	_, err := rs[0].c.Split(-2, 0, nil)
	assert.ErrorIs(t, err, nccl.ErrInvalidArgument)
}

// TestGroupEndsOnErrorAndPanicFromFake: Group always ends NCCL's group:
// after f's error, and after a panic (which goes on); groups nest.
func TestGroupEndsOnErrorAndPanicFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 1, nil)
	c, s := rs[0].c, rs[0].s
	b := upload(t, s, []int32{3})
	boom := errors.New("boom")
	assert.ErrorIs(t, nccl.Group(func() error { return boom }), boom)
	assert.PanicsWithValue(t, "p", func() {
		_ = nccl.Group(func() error {
			if err := nccl.AllReduce(c, s, b, b, nccl.Sum); err != nil {
				return err
			}
			panic("p")
		})
	})
	require.NoError(t, nccl.Group(func() error {
		return nccl.Group(func() error { return nccl.AllReduce(c, s, b, b, nccl.Sum) })
	}))
	require.NoError(t, nccl.AllReduce(c, s, b, b, nccl.Sum), "no group left open")
	require.NoError(t, s.Synchronize())
	assert.EqualValues(t, 3, faketest.NCCL(t, "fake_nccl_ops_run"))
	// Another goroutine's operation waits for the group to end.
	started, release := make(chan struct{}), make(chan struct{})
	// The group holds the device of the operations it queued.
	done := make(chan error, 1)
	go func() {
		done <- nccl.Group(func() error {
			if err := nccl.AllReduce(c, s, b, b, nccl.Sum); err != nil {
				return err
			}
			close(started)
			<-release
			return nil
		})
	}()
	<-started
	other := make(chan error, 1)
	go func() { other <- nccl.AllReduce(c, s, b, b, nccl.Sum) }()
	select {
	case <-other:
		t.Fatal("an operation on the group's device ran inside another goroutine's group")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	require.NoError(t, <-done)
	require.NoError(t, <-other)
	require.NoError(t, s.Synchronize())
}

// TestGroupHoldsOnlyItsDevicesFromFake: while a Group on one goroutine
// holds the device of rank 0's operation, another goroutine queues rank
// 1's operation on its own device at once (one goroutine per GPU never
// waits for another's group); both meet once the group ends.
func TestGroupHoldsOnlyItsDevicesFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 2, nil)
	x0, x1 := upload(t, rs[0].s, []int32{1, 2}), upload(t, rs[1].s, []int32{10, 20})
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- nccl.Group(func() error {
			if err := nccl.AllReduce(rs[0].c, rs[0].s, x0, x0, nccl.Sum); err != nil {
				return err
			}
			close(started)
			<-release
			return nil
		})
	}()
	<-started
	other := make(chan error, 1)
	go func() { other <- nccl.AllReduce(rs[1].c, rs[1].s, x1, x1, nccl.Sum) }()
	select {
	case err := <-other:
		require.NoError(t, err, "rank 1's device is not the group's")
	case <-time.After(30 * time.Second):
		t.Fatal("an operation on another device waited for the group")
	}
	close(release)
	require.NoError(t, <-done)
	assert.Equal(t, []int32{11, 22}, download(t, rs[0].s, x0))
	assert.Equal(t, []int32{11, 22}, download(t, rs[1].s, x1))
}

// TestAllReduceAllocatesNothingFromFake: queuing an all-reduce allocates
// nothing in Go.
func TestAllReduceAllocatesNothingFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 1, nil)
	c, s := rs[0].c, rs[0].s
	b := upload(t, s, make([]float32, 256))
	require.NoError(t, nccl.AllReduce(c, s, b, b, nccl.Sum))
	allocs := testing.AllocsPerRun(200, func() {
		if err := nccl.AllReduce(c, s, b, b, nccl.Sum); err != nil {
			t.Fatal(err)
		}
	})
	if !gputest.RaceEnabled { // sync.Pool drops frames at random under -race
		assert.Zero(t, allocs)
	}
	require.NoError(t, s.Synchronize())
}

// TestGroupAllocatesNothingFromFake: a Group of all-reduces on every rank,
// run in a loop (one process driving several GPUs), allocates nothing in Go
// once warm.
func TestGroupAllocatesNothingFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 2, nil)
	bufs := make([]*driver.Buffer[float32], len(rs))
	for i, r := range rs {
		bufs[i] = upload(t, r.s, make([]float32, 256))
	}
	run := func() {
		if err := nccl.Group(func() error {
			for i, r := range rs {
				if err := nccl.AllReduce(r.c, r.s, bufs[i], bufs[i], nccl.Sum); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	run()
	run()
	allocs := testing.AllocsPerRun(200, run)
	if !gputest.RaceEnabled { // sync.Pool drops frames at random under -race
		assert.Zero(t, allocs)
	}
	for _, r := range rs {
		require.NoError(t, r.s.Synchronize())
	}
}
