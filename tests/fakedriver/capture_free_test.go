//go:build linux

package fakedriver_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/capture"
	"github.com/purecuda/cuda/lifetime"
)

// Memory closed while a stream is being captured. cuMemFree and
// cuMemFreeHost wait for the context's work, which a capture in the
// context forbids (and is invalidated by), and a global capture anywhere
// refuses them on threads whose mode is global (MODEL.md). Buffer.Close
// frees on the release queue, so a Close just before a capture meets it as
// well: the frees in the capturing context wait for the capture's end, and
// those in other contexts run at once with the releasing thread's mode
// relaxed. No capture is refused or invalidated, and nothing is lost.
func TestCloseMemoryDuringCapture(t *testing.T) {
	f := setup(t)
	defer func() { _ = lifetime.Errors() }()
	other, err := f.ctx.Device().NewContext(0)
	require.NoError(t, err)
	defer other.Close()
	for _, mode := range []graph.CaptureMode{graph.CaptureGlobal, graph.CaptureThreadLocal, graph.CaptureRelaxed} {
		for _, where := range []*driver.Context{f.ctx, other} {
			same := where == f.ctx
			msg := fmt.Sprintf("%v, capturing context %v", mode, same)
			_ = lifetime.Errors()
			allocs, hosts := fcall(t, "fake_live_allocations"), fcall(t, "fake_live_host_allocs")
			buf, err := driver.Alloc[int32](where, 64)
			require.NoError(t, err, msg)
			hb, err := driver.AllocHost[int32](where, 64, 0)
			require.NoError(t, err, msg)

			s2, err := f.ctx.NewStream(driver.StreamNonBlocking)
			require.NoError(t, err, msg)
			sc, err := graph.BeginCapture(s2, mode)
			require.NoError(t, err, msg)
			require.NoError(t, s2.Launch(f.empty, g1, b1), msg)
			require.NoError(t, errors.Join(buf.Close(), hb.Close()), msg)
			lifetime.Flush()
			if same {
				assert.Equal(t, allocs+1, fcall(t, "fake_live_allocations"), msg+": the free waits for the capture's end")
				assert.Equal(t, hosts+1, fcall(t, "fake_live_host_allocs"), msg+": the free waits for the capture's end")
			} else {
				assert.Equal(t, allocs, fcall(t, "fake_live_allocations"), msg+": freed at once")
				assert.Equal(t, hosts, fcall(t, "fake_live_host_allocs"), msg+": freed at once")
			}
			require.NoError(t, s2.Launch(f.empty, g1, b1), msg+": the capture goes on")
			g, err := sc.End()
			require.NoError(t, err, msg+": the capture ends")
			nodes, err := g.Nodes()
			require.NoError(t, err, msg)
			assert.Len(t, nodes, 2, msg)
			require.NoError(t, errors.Join(g.Close(), s2.Close()), msg)
			lifetime.Flush()
			assert.True(t, settleWithin(30*time.Second, func() bool {
				return fcall(t, "fake_live_allocations") == allocs && fcall(t, "fake_live_host_allocs") == hosts
			}), msg+": freed after the capture")
			assert.Empty(t, lifetime.Errors(), msg+": no free failed")
		}
	}
}

// TestEndDoesNotWaitForContextWork: a Buffer closed during a capture is
// freed after the capture's end, on the release queue, not by End on its
// caller's goroutine: the free waits for the context's work, here a host
// function on another stream that waits for End's caller.
func TestEndDoesNotWaitForContextWork(t *testing.T) {
	f := setup(t)
	s2, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s2.Close()
	b, err := driver.Alloc[int32](f.ctx, 16)
	require.NoError(t, err)
	sc, err := graph.BeginCapture(s2, graph.CaptureRelaxed)
	require.NoError(t, err)
	require.NoError(t, s2.Launch(f.empty, g1, b1))
	require.NoError(t, b.Close())
	time.Sleep(50 * time.Millisecond) // the free is handed to the capture's end
	gate := make(chan struct{})
	require.NoError(t, f.s.LaunchHostFunc(func() { <-gate }))
	ended := make(chan error, 1)
	go func() {
		g, err := sc.End()
		if err == nil {
			_ = g.Close()
		}
		ended <- err
	}()
	select {
	case err := <-ended:
		close(gate)
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		close(gate)
		<-ended
		t.Fatal("StreamCapture.End waited for the context's work (a host function on another stream)")
	}
}

// A free or an unload waits for the context's work before it runs, and a
// capture may begin in the context meanwhile: the wait keeps nothing from
// a BeginCapture, which here must not wait for a host function that waits
// for BeginCapture's caller. Each kind of release (a Buffer's free, a
// HostBuffer's, a module's unload) is closed while a host function waits
// for the test; a capture then begins on another stream of the context, and
// the release runs after the capture's end. Nothing is invalidated, freed
// early or lost.
func TestReleaseWaitDoesNotDelayBeginCapture(t *testing.T) {
	f := setup(t)
	defer func() { _ = lifetime.Errors() }()
	releases := map[string]func() (func() error, error){
		"Buffer": func() (func() error, error) {
			b, err := driver.Alloc[int32](f.ctx, 16)
			return b.Close, err
		},
		"HostBuffer": func() (func() error, error) {
			h, err := driver.AllocHost[int32](f.ctx, 16, 0)
			return h.Close, err
		},
		"Module": func() (func() error, error) {
			m, err := f.ctx.LoadModule([]byte("FAKE module"))
			return m.Close, err
		},
	}
	for name, newRelease := range releases {
		for _, mode := range []graph.CaptureMode{graph.CaptureGlobal, graph.CaptureThreadLocal, graph.CaptureRelaxed} {
			msg := fmt.Sprintf("%s, %v", name, mode)
			allocs, hosts, mods := fcall(t, "fake_live_allocations"), fcall(t, "fake_live_host_allocs"), fcall(t, "fake_live_modules")
			closeIt, err := newRelease()
			require.NoError(t, err, msg)
			gate, ran := make(chan struct{}), make(chan struct{})
			require.NoError(t, f.s.LaunchHostFunc(func() { <-gate }), msg)
			require.NoError(t, f.s.LaunchHostFunc(func() { close(ran) }), msg)
			closed := make(chan error, 1)
			go func() { closed <- closeIt() }() // a module's unload may run on Close's goroutine
			time.Sleep(50 * time.Millisecond)   // the release waits for the host function
			s2, err := f.ctx.NewStream(driver.StreamNonBlocking)
			require.NoError(t, err, msg)
			began := make(chan *graph.StreamCapture, 1)
			go func() {
				sc, err := graph.BeginCapture(s2, mode)
				assert.NoError(t, err, msg)
				began <- sc
			}()
			var sc *graph.StreamCapture
			select {
			case sc = <-began:
			case <-time.After(30 * time.Second):
				close(gate)
				if sc := <-began; sc != nil {
					_ = sc.Abort()
				}
				t.Fatalf("%s: BeginCapture waited for a release that waits for a host function", msg)
			}
			require.NotNil(t, sc, msg)
			defer func() { _ = sc.Abort() }() // a no-op after End; after a failure, no capture is left behind
			require.NoError(t, s2.Launch(f.empty, g1, b1), msg)
			close(gate) // the release's wait ends during the capture
			<-ran       // (no Synchronize: a capture in global mode elsewhere refuses it)
			require.NoError(t, <-closed, msg)
			lifetime.Flush()
			time.Sleep(20 * time.Millisecond)
			require.NoError(t, s2.Launch(f.empty, g1, b1), msg+": the capture goes on")
			g, err := sc.End()
			require.NoError(t, err, msg+": the capture was not invalidated")
			nodes, err := g.Nodes()
			require.NoError(t, err, msg)
			assert.Len(t, nodes, 2, msg)
			require.NoError(t, errors.Join(g.Close(), s2.Close()), msg)
			lifetime.Flush()
			assert.True(t, settleWithin(30*time.Second, func() bool {
				return fcall(t, "fake_live_allocations") == allocs && fcall(t, "fake_live_host_allocs") == hosts &&
					fcall(t, "fake_live_modules") == mods
			}), msg+": released after the capture")
			assert.Empty(t, lifetime.Errors(), msg+": no release failed")
		}
	}
}

// The same, with the host function on a stream closed (or dropped) right
// after it was queued: a common pattern (defer s.Close()). CUDA still runs
// the stream's work, which the release must wait for without keeping a
// BeginCapture in the context waiting.
func TestReleaseWaitOnClosedStreamDoesNotDelayBeginCapture(t *testing.T) {
	f := setup(t)
	defer func() { _ = lifetime.Errors() }()
	for _, how := range []string{"closed", "dropped"} {
		msg := how
		allocs := fcall(t, "fake_live_allocations")
		b, err := driver.Alloc[int32](f.ctx, 16)
		require.NoError(t, err, msg)
		gate, ran := make(chan struct{}), make(chan struct{})
		func() {
			s1, err := f.ctx.NewStream(driver.StreamNonBlocking)
			require.NoError(t, err, msg)
			require.NoError(t, s1.LaunchHostFunc(func() { <-gate }), msg)
			require.NoError(t, s1.LaunchHostFunc(func() { close(ran) }), msg)
			if how == "closed" {
				require.NoError(t, s1.Close(), msg)
			}
		}()
		if how == "dropped" {
			gcAll()
		}
		require.NoError(t, b.Close(), msg)
		time.Sleep(50 * time.Millisecond) // the release waits for the host function
		s2, err := f.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err, msg)
		began := make(chan *graph.StreamCapture, 1)
		go func() {
			sc, err := graph.BeginCapture(s2, graph.CaptureGlobal)
			assert.NoError(t, err, msg)
			began <- sc
		}()
		var sc *graph.StreamCapture
		select {
		case sc = <-began:
		case <-time.After(30 * time.Second):
			close(gate)
			if sc := <-began; sc != nil {
				_ = sc.Abort()
			}
			t.Fatalf("%s: BeginCapture waited for a release that waits for a host function", msg)
		}
		require.NotNil(t, sc, msg)
		require.NoError(t, s2.Launch(f.empty, g1, b1), msg)
		close(gate)
		<-ran
		lifetime.Flush()
		require.NoError(t, s2.Launch(f.empty, g1, b1), msg+": the capture goes on")
		g, err := sc.End()
		require.NoError(t, err, msg+": the capture was not invalidated")
		require.NoError(t, errors.Join(g.Close(), s2.Close()), msg)
		lifetime.Flush()
		assert.True(t, settleWithin(30*time.Second, func() bool {
			return fcall(t, "fake_live_allocations") == allocs
		}), msg+": released after the capture")
		assert.Empty(t, lifetime.Errors(), msg+": no release failed")
		noBadUses(t)
	}
}

// A release past its wait for the context's work, when work that waits for
// the test was queued during that wait: the work it waited for did not
// include it, so what follows must not wait for it while keeping captures
// out (the release waits again, holding nothing). The capture begins at
// once; the release runs after it.
func TestReleasePastItsWaitDoesNotDelayBeginCapture(t *testing.T) {
	f := setup(t)
	defer func() { _ = lifetime.Errors() }()
	p := startReleasePastItsWait(t, f)
	gate0, gate1, ran := p.gate0, p.gate1, p.ran
	close(gate0)                      // the release's wait ends; s1's host function is not among what it waited for
	time.Sleep(50 * time.Millisecond) // the release looks again
	s2, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	began := make(chan *graph.StreamCapture, 1)
	go func() {
		sc, err := graph.BeginCapture(s2, graph.CaptureGlobal)
		assert.NoError(t, err)
		began <- sc
	}()
	sc := p.begun(t, began, "BeginCapture waited for a release that waits for a host function queued after its first wait")
	require.NoError(t, s2.Launch(f.empty, g1, b1))
	close(gate1)
	<-ran
	lifetime.Flush()
	require.NoError(t, s2.Launch(f.empty, g1, b1), "the capture goes on")
	g, err := sc.End()
	require.NoError(t, err, "the capture was not invalidated")
	require.NoError(t, errors.Join(g.Close(), s2.Close()))
	p.finish(t)
}

// The same, when the stream with the work queued during the release's wait
// is one a BeginCapture has installed its sink on and not yet begun (it
// waits for an uncaptured call in flight there): the work is no capture's,
// so the release must not synchronise it while keeping captures out, or
// the BeginCapture, which the work waits for, waits for it in turn.
func TestReleasePastItsWaitSeesWorkUnderABeginningCapture(t *testing.T) {
	f := setup(t)
	defer func() { _ = lifetime.Errors() }()
	p := startReleasePastItsWait(t, f)
	s1, gate0, gate1, ran := p.s1, p.gate0, p.gate1, p.ran

	// A launch on s1 held inside cuLaunchKernel keeps a capture beginning
	// on s1 between its sink's installation and its begin.
	release := hold(t, "fake_set_launch_call_delay_us")
	launched := make(chan error, 1)
	go func() { launched <- s1.Launch(f.empty, g1, b1) }()
	waitGauge(t, "fake_launch_calls_in_delay", 1)
	began := make(chan *graph.StreamCapture, 1)
	go func() {
		sc, err := graph.BeginCapture(s1, graph.CaptureGlobal)
		assert.NoError(t, err)
		began <- sc
	}()
	for deadline := time.Now().Add(30 * time.Second); capture.Installed(s1) == nil; time.Sleep(100 * time.Microsecond) {
		require.True(t, time.Now().Before(deadline), "the capture's sink is installed")
	}

	close(gate0)                      // the release's wait ends; s1's host function is not among what it waited for
	time.Sleep(50 * time.Millisecond) // the release looks again
	release()                         // the capture goes on to begin
	require.NoError(t, <-launched)
	sc := p.begun(t, began, "BeginCapture waited for a release that synchronised work queued before the capture's sink")
	require.NoError(t, s1.Launch(f.empty, g1, b1))
	close(gate1)
	<-ran
	lifetime.Flush()
	g, err := sc.End()
	require.NoError(t, err, "the capture was not invalidated")
	require.NoError(t, g.Close())
	p.finish(t)
}

// releasePastItsWait is the start of the tests of a release past its wait
// for the context's work: a Buffer closed while a host function on sa
// holds its release's wait (gate0), then, during that wait, a host function
// on s1 that waits for the test (gate1), and one that closes ran.
type releasePastItsWait struct {
	allocs            int64
	sa, s1            *driver.Stream
	gate0, gate1, ran chan struct{}
}

func startReleasePastItsWait(t *testing.T, f *fixture) *releasePastItsWait {
	t.Helper()
	p := &releasePastItsWait{allocs: fcall(t, "fake_live_allocations"), gate0: make(chan struct{}), gate1: make(chan struct{}), ran: make(chan struct{})}
	b, err := driver.Alloc[int32](f.ctx, 16)
	require.NoError(t, err)
	p.sa, err = f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	p.s1, err = f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	require.NoError(t, p.sa.LaunchHostFunc(func() { <-p.gate0 }))
	require.NoError(t, b.Close())
	time.Sleep(50 * time.Millisecond) // the release waits for sa's host function
	require.NoError(t, p.s1.LaunchHostFunc(func() { <-p.gate1 }))
	require.NoError(t, p.s1.LaunchHostFunc(func() { close(p.ran) }))
	return p
}

// finish closes the streams and checks that the release ran once the
// capture was over, and failed nothing.
func (p *releasePastItsWait) finish(t *testing.T) {
	t.Helper()
	require.NoError(t, errors.Join(p.s1.Close(), p.sa.Close()))
	lifetime.Flush()
	assert.True(t, settleWithin(30*time.Second, func() bool {
		return fcall(t, "fake_live_allocations") == p.allocs
	}), "released after the capture")
	assert.Empty(t, lifetime.Errors(), "no release failed")
	noBadUses(t)
}

// begun is the capture that began reports, within 10 s; past that the
// test fails, having let the host function on s1 run (gate1) so that the
// BeginCapture ends and its capture is aborted.
func (p *releasePastItsWait) begun(t *testing.T, began <-chan *graph.StreamCapture, failure string) *graph.StreamCapture {
	t.Helper()
	select {
	case sc := <-began:
		require.NotNil(t, sc)
		return sc
	case <-time.After(10 * time.Second):
		close(p.gate1)
		if sc := <-began; sc != nil {
			_ = sc.Abort()
		}
		t.Fatal(failure)
		return nil
	}
}
