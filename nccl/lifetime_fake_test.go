//go:build linux

package nccl_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
	"github.com/purecuda/cuda/nccl"
)

// TestOperandsHeldUntilRunFromFake: buffers and communicators closed right
// after an all-reduce is queued (behind a gate, so it has not run) stay
// allocated until it has run: the fake checks both buffers when the
// operation runs and counts an operation of a destroyed communicator. One
// rank's buffers are allocated in stream order on another stream, whose
// free must wait for the all-reduce's stream.
func TestOperandsHeldUntilRunFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	ctx, rs := fakeRanks(t, 2, nil)
	other, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer other.Close()
	a0, err := driver.AllocCopy(rs[0].s, seq[float32](1, 64))
	require.NoError(t, err)
	r0, err := driver.Alloc[float32](ctx, 64)
	require.NoError(t, err)
	a1, err := driver.AllocAsync[float32](other, 64) // stream-ordered, on another stream
	require.NoError(t, err)
	require.NoError(t, a1.CopyFromHost(other, seq[float32](2, 64)))
	r1, err := driver.AllocAsync[float32](other, 64)
	require.NoError(t, err)
	require.NoError(t, other.Synchronize())

	open0, open1 := gate(t, rs[0].s, 11), gate(t, rs[1].s, 12)
	before := faketest.NCCL(t, "fake_nccl_ops_run")
	require.NoError(t, nccl.Group(func() error {
		if err := nccl.AllReduce(rs[0].c, rs[0].s, a0, r0, nccl.Sum); err != nil {
			return err
		}
		return nccl.AllReduce(rs[1].c, rs[1].s, a1, r1, nccl.Sum)
	}))
	// Closing them all: the plain buffers' frees wait for the operations
	// (their context's work), so the closes run on another goroutine
	// until the gates open; the communicators retire once their streams
	// have run the operations.
	closed := make(chan error, 1)
	go func() {
		closed <- errors.Join(a0.Close(), r0.Close(), a1.Close(), r1.Close(), rs[0].c.Close(), rs[1].c.Close())
	}()
	var closeErr error
	got := false
	select {
	case closeErr = <-closed:
		got = true
	case <-time.After(50 * time.Millisecond):
	}
	assert.Equal(t, before, faketest.NCCL(t, "fake_nccl_ops_run"), "the gates hold the operations")
	assert.EqualValues(t, 2, faketest.NCCL(t, "fake_nccl_live_comms"), "the communicators wait for their operations")
	open0()
	open1()
	require.NoError(t, rs[0].s.Synchronize())
	require.NoError(t, rs[1].s.Synchronize())
	require.NoError(t, other.Synchronize())
	if !got {
		select {
		case closeErr = <-closed:
		case <-time.After(30 * time.Second):
			t.Fatal("closing never returned")
		}
	}
	require.NoError(t, closeErr)
	waitNoComms(t)
	lifetime.Flush()
	assert.Equal(t, before+2, faketest.NCCL(t, "fake_nccl_ops_run"))
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
	faketest.NoBadUses(t)
}

// TestCapturedAllReduceFromFake: an all-reduce captured into a graph is
// held by it (buffers and communicator closed before the replays), and the
// two ranks' executables replay it 1000 times, exactly; the communicator is
// destroyed once the graphs are.
func TestCapturedAllReduceFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 2, nil)
	const n = 16
	var execs [2]*graph.Exec
	var outs [2]*driver.Buffer[int32]
	for r := range rs {
		send, err := driver.AllocCopy(rs[r].s, seq[int32](int32(10*r), n))
		require.NoError(t, err)
		recv, err := driver.AllocZeroed[int32](rs[r].s, n)
		require.NoError(t, err)
		g, err := graph.Capture(rs[r].s, graph.CaptureRelaxed, func(s *driver.Stream) error {
			return nccl.AllReduce(rs[r].c, s, send, recv, nccl.Sum)
		})
		require.NoError(t, err)
		execs[r], err = g.Instantiate()
		require.NoError(t, err)
		require.NoError(t, g.Close())
		require.NoError(t, send.Close())
		outs[r] = recv
	}
	assert.EqualValues(t, 2, faketest.NCCL(t, "fake_nccl_live_comms"))
	for r := range rs {
		require.NoError(t, rs[r].c.Close()) // the executables hold them
	}
	assert.EqualValues(t, 2, faketest.NCCL(t, "fake_nccl_live_comms"), "held by the captured graphs")
	before := faketest.NCCL(t, "fake_nccl_ops_run")
	want := make([]int32, n)
	for i := range want {
		want[i] = int32(i) + int32(10+i)
	}
	for i := 0; i < 1000; i++ {
		for r := range rs {
			require.NoError(t, execs[r].Launch(rs[r].s))
		}
		if i%250 == 0 || i == 999 {
			for r := range rs {
				require.NoError(t, outs[r].Memset32(rs[r].s, 0)) // each replay must write it again
			}
			for r := range rs {
				require.NoError(t, execs[r].Launch(rs[r].s))
			}
			for r := range rs {
				assert.Equal(t, want, download(t, rs[r].s, outs[r]), "replay %d, rank %d", i, r)
			}
		}
	}
	for r := range rs {
		require.NoError(t, rs[r].s.Synchronize())
	}
	assert.Equal(t, before+2*1005, faketest.NCCL(t, "fake_nccl_ops_run"))
	for r := range rs {
		require.NoError(t, execs[r].Close())
		require.NoError(t, outs[r].Close())
	}
	// The executables' references go once their streams have passed
	// their last launch, which a worker waits for.
	waitNoComms(t)
}

// TestWatchdogAbortsAFailedCommFromFake: rank 1 never joins rank 0's
// all-reduce, whose kernel would wait for good; NCCL then reports an
// asynchronous error on rank 0 (fake_nccl_fail_rank), the watchdog aborts
// the communicator, and Wait and every later call return the error.
func TestWatchdogAbortsAFailedCommFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	ctx, rs := fakeRanks(t, 2, nil)
	b, err := driver.Alloc[float32](ctx, 8)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, nccl.AllReduce(rs[0].c, rs[0].s, b, b, nccl.Sum))
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	err = rs[0].c.Wait(wctx, rs[0].s)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "rank 1 never came")

	start := time.Now()
	faketest.NCCL(t, "fake_nccl_fail_rank", 0, uintptr(nccl.ErrRemote))
	wctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = rs[0].c.Wait(wctx, rs[0].s)
	require.ErrorIs(t, err, nccl.ErrRemote)
	assert.Less(t, time.Since(start), 20*time.Second)
	require.NoError(t, rs[0].s.Synchronize(), "the aborted kernel ended")
	assert.ErrorIs(t, rs[0].c.Err(), nccl.ErrRemote)
	assert.ErrorIs(t, nccl.AllReduce(rs[0].c, rs[0].s, b, b, nccl.Sum), nccl.ErrRemote)
	assert.NoError(t, rs[0].c.Abort(), "aborted already")
	assert.EqualValues(t, 1, faketest.NCCL(t, "fake_nccl_live_comms"), "rank 1 lives on")
}

// TestWatchdogSeesFailureWithoutWaitFromFake: nobody calls Wait or Err;
// the watchdog alone aborts the failed communicator, which ends its
// kernel, so Synchronize returns.
func TestWatchdogSeesFailureWithoutWaitFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	ctx, rs := fakeRanks(t, 2, nil)
	b, err := driver.Alloc[int64](ctx, 8)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, nccl.AllReduce(rs[1].c, rs[1].s, b, b, nccl.Sum))
	faketest.NCCL(t, "fake_nccl_fail_rank", 1, uintptr(nccl.ErrSystem))
	done := make(chan error, 1)
	go func() { done <- rs[1].s.Synchronize() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the watchdog did not abort the failed communicator")
	}
	assert.ErrorIs(t, rs[1].c.Err(), nccl.ErrSystem)
}

// TestAbortFromFake: Abort ends a communicator whose operation waits for a
// peer; later calls match ErrAborted; Abort again is nil.
func TestAbortFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	ctx, rs := fakeRanks(t, 2, nil)
	b, err := driver.Alloc[uint8](ctx, 8)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, nccl.Broadcast(rs[0].c, rs[0].s, b, b, 0))
	require.NoError(t, rs[0].c.Abort())
	require.NoError(t, rs[0].s.Synchronize())
	assert.ErrorIs(t, rs[0].c.Err(), nccl.ErrAborted)
	assert.ErrorIs(t, nccl.Broadcast(rs[0].c, rs[0].s, b, b, 0), nccl.ErrAborted)
	assert.ErrorIs(t, rs[0].c.Wait(context.Background(), rs[0].s), nccl.ErrAborted)
	assert.NoError(t, rs[0].c.Abort())
	require.NoError(t, rs[1].c.Abort())
}

// TestCommDroppedFromFake: a Comm dropped without Close is finalized and
// destroyed by its cleanup.
func TestCommDroppedFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	ctx := fakeCtx(t)
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s.Close()
	objects := lifetime.ReadStats().Objects
	func() {
		id, err := nccl.NewUniqueID()
		require.NoError(t, err)
		c, err := nccl.InitRank(context.Background(), ctx, id, 1, 0, nil)
		require.NoError(t, err)
		b, err := driver.Alloc[float64](ctx, 4)
		require.NoError(t, err)
		require.NoError(t, nccl.AllReduce(c, s, b, b, nccl.Sum))
		require.NoError(t, b.Close())
	}()
	require.EqualValues(t, 1, faketest.NCCL(t, "fake_nccl_live_comms"))
	deadline := time.Now().Add(20 * time.Second)
	for faketest.NCCL(t, "fake_nccl_live_comms") != 0 && time.Now().Before(deadline) {
		runtime.GC()
		lifetime.Flush()
		time.Sleep(time.Millisecond)
	}
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_live_comms"), "the dropped communicator was not destroyed")
	assert.Equal(t, objects, lifetime.ReadStats().Objects)
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
}

// commCalls are every method of *Comm and every operation, each called
// on a one-rank communicator c with stream s and buffer b; the close race
// runs them all, and TestCommCallsCoverTheAPI checks that none is missing.
var commCalls = map[string]func(c *nccl.Comm, s *driver.Stream, b *driver.Buffer[int32]) error{
	"AllReduce": func(c *nccl.Comm, s *driver.Stream, b *driver.Buffer[int32]) error {
		return nccl.AllReduce(c, s, b, b, nccl.Sum)
	},
	"Broadcast": func(c *nccl.Comm, s *driver.Stream, b *driver.Buffer[int32]) error {
		return nccl.Broadcast(c, s, b, b, 0)
	},
	"Reduce": func(c *nccl.Comm, s *driver.Stream, b *driver.Buffer[int32]) error {
		return nccl.Reduce(c, s, b, b, nccl.Max, 0)
	},
	"AllGather": func(c *nccl.Comm, s *driver.Stream, b *driver.Buffer[int32]) error { return nccl.AllGather(c, s, b, b) },
	"ReduceScatter": func(c *nccl.Comm, s *driver.Stream, b *driver.Buffer[int32]) error {
		return nccl.ReduceScatter(c, s, b, b, nccl.Sum)
	},
	"Send": func(c *nccl.Comm, s *driver.Stream, b *driver.Buffer[int32]) error {
		return nccl.Group(func() error { return errors.Join(nccl.Send(c, s, b, 0), nccl.Recv(c, s, b, 0)) })
	},
	"Recv": func(c *nccl.Comm, s *driver.Stream, b *driver.Buffer[int32]) error {
		return nccl.Group(func() error { return errors.Join(nccl.Send(c, s, b, 0), nccl.Recv(c, s, b, 0)) })
	},
	"Err":     func(c *nccl.Comm, _ *driver.Stream, _ *driver.Buffer[int32]) error { return c.Err() },
	"Abort":   func(c *nccl.Comm, _ *driver.Stream, _ *driver.Buffer[int32]) error { return c.Abort() },
	"Close":   func(c *nccl.Comm, _ *driver.Stream, _ *driver.Buffer[int32]) error { return c.Close() },
	"Rank":    func(c *nccl.Comm, _ *driver.Stream, _ *driver.Buffer[int32]) error { _ = c.Rank(); return nil },
	"Size":    func(c *nccl.Comm, _ *driver.Stream, _ *driver.Buffer[int32]) error { _ = c.Size(); return nil },
	"Device":  func(c *nccl.Comm, _ *driver.Stream, _ *driver.Buffer[int32]) error { _ = c.Device(); return nil },
	"Context": func(c *nccl.Comm, _ *driver.Stream, _ *driver.Buffer[int32]) error { _ = c.Context(); return nil },
	"Wait": func(c *nccl.Comm, s *driver.Stream, _ *driver.Buffer[int32]) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c.Wait(ctx, s)
	},
	"Split": func(c *nccl.Comm, _ *driver.Stream, _ *driver.Buffer[int32]) error {
		sub, err := c.Split(0, 0, nil)
		if err == nil {
			err = sub.Close()
		}
		return err
	},
}

// TestCommCloseRacesOperationsFromFake: Close and Abort race every method
// and operation from many goroutines: each call succeeds or fails cleanly
// (ErrClosed, ErrAborted), NCCL never sees two threads on the
// communicator, nothing runs on a destroyed one, and nothing is left.
func TestCommCloseRacesOperationsFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	ctx := fakeCtx(t)
	for round := 0; round < 20; round++ {
		id, err := nccl.NewUniqueID()
		require.NoError(t, err)
		c, err := nccl.InitRank(context.Background(), ctx, id, 1, 0, nil)
		require.NoError(t, err)
		b, err := driver.Alloc[int32](ctx, 32)
		require.NoError(t, err)
		var wg sync.WaitGroup
		for name, call := range commCalls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := ctx.NewStream(driver.StreamNonBlocking)
				if !assert.NoError(t, err) {
					return
				}
				defer s.Close()
				for i := 0; i < 5; i++ {
					switch err := call(c, s, b); {
					case err == nil, errors.Is(err, driver.ErrClosed), errors.Is(err, nccl.ErrAborted):
					default:
						t.Errorf("%s: %v", name, err)
					}
				}
			}()
		}
		if round%2 == 1 {
			_ = c.Abort()
		}
		assert.NoError(t, c.Close())
		wg.Wait()
		require.NoError(t, b.Close())
	}
	waitNoComms(t)
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
	faketest.NoBadUses(t)
}

// waitNoComms waits (20 s at most) until fakenccl has no live
// communicator: a communicator whose streams had not yet run its work when
// it was released retires in the background.
func waitNoComms(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for faketest.NCCL(t, "fake_nccl_live_comms") != 0 && time.Now().Before(deadline) {
		lifetime.Flush()
		time.Sleep(time.Millisecond)
	}
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_live_comms"), "communicators left")
}

// TestCloseDoesNotWaitForAPeerFromFake: closing a communicator whose
// operation waits for a peer returns at once; it retires when the peer
// comes (finalized), or, for a peer that never comes, when NCCL reports
// the failure (aborted): never a hang, never a call on a freed one.
func TestCloseDoesNotWaitForAPeerFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	ctx, rs := fakeRanks(t, 2, nil)
	b0, err := driver.Alloc[float32](ctx, 8)
	require.NoError(t, err)
	defer b0.Close()
	b1, err := driver.Alloc[float32](ctx, 8)
	require.NoError(t, err)
	defer b1.Close()

	// The peer comes late.
	require.NoError(t, nccl.AllReduce(rs[0].c, rs[0].s, b0, b0, nccl.Sum))
	start := time.Now()
	require.NoError(t, rs[0].c.Close())
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.EqualValues(t, 2, faketest.NCCL(t, "fake_nccl_live_comms"), "rank 0 waits for its operation")
	require.NoError(t, nccl.AllReduce(rs[1].c, rs[1].s, b1, b1, nccl.Sum))
	require.NoError(t, rs[0].s.Synchronize())
	deadline := time.Now().Add(20 * time.Second)
	for faketest.NCCL(t, "fake_nccl_live_comms") != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	assert.EqualValues(t, 1, faketest.NCCL(t, "fake_nccl_live_comms"), "rank 0 finalized once its operation ran")

	// The peer never comes: rank 1 waits until NCCL reports the failure.
	require.NoError(t, nccl.AllReduce(rs[1].c, rs[1].s, b1, b1, nccl.Sum))
	require.NoError(t, rs[1].c.Close())
	time.Sleep(20 * time.Millisecond)
	assert.EqualValues(t, 1, faketest.NCCL(t, "fake_nccl_live_comms"))
	faketest.NCCL(t, "fake_nccl_fail_rank", 1, uintptr(nccl.ErrRemote))
	waitNoComms(t)
	require.NoError(t, rs[1].s.Synchronize(), "the abort ended the waiting operation")
	errs := lifetime.Errors()
	require.NotEmpty(t, errs, "the failure found while retiring is reported")
	assert.ErrorIs(t, errors.Join(errs...), nccl.ErrRemote)
}

// TestWatchdogDoesNotWaitForAbortsFromFake: a peer gone fails two
// communicators at once, and NCCL's abort takes a while (1.5 s here). The
// watchdog marks both failed at its next check and leaves the aborts to
// run: a call on either, soon after, fails at once with the error, rather
// than waiting for the other's abort.
func TestWatchdogDoesNotWaitForAbortsFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t, "FAKE_NCCL_ABORT_MS=1500") {
		return
	}
	ctx, rs := fakeRanks(t, 2, nil)
	subs := make([]*nccl.Comm, 2)
	var wg sync.WaitGroup
	for r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			subs[r], err = rs[r].c.Split(0, r, nil) // same ranks
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	require.NotNil(t, subs[0])
	require.NotNil(t, subs[1])
	t.Cleanup(func() {
		for _, c := range subs {
			assert.NoError(t, c.Close())
		}
	})
	b, err := driver.Alloc[int32](ctx, 4)
	require.NoError(t, err)
	defer b.Close()
	faketest.NCCL(t, "fake_nccl_fail_rank", 0, uintptr(nccl.ErrRemote)) // both rank 0s
	time.Sleep(300 * time.Millisecond)                                  // the watchdog checks every 50 ms
	for i, c := range []*nccl.Comm{rs[0].c, subs[0]} {
		start := time.Now()
		assert.ErrorIs(t, nccl.AllReduce(c, rs[0].s, b, b, nccl.Sum), nccl.ErrRemote, "communicator %d", i)
		assert.Less(t, time.Since(start), 500*time.Millisecond, "communicator %d waited for an abort", i)
	}
	require.NoError(t, rs[0].s.Synchronize())
}
