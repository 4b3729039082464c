//go:build linux

package graph

// Graph safety on the GPU: what the real driver does that fakecuda cannot
// show (handle reuse, memory it keeps, a sticky fault, conditional bodies)
// and the fake-driver safety tests (tests/fakedriver/graph_safety_test.go)
// once more against libcuda, which crashes where they fail.

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// manyGraphsChild is set in the process TestGPUManyGraphsLeaveNothing
// runs in.
const manyGraphsChild = "PURECUDA_MANYGRAPHS_CHILD"

// Six goroutines instantiate, launch and close executables and clones while
// another adds nodes and the graph is closed: no crash inside libcuda,
// every call works or says the graph is closed.
func TestGPUFamilyCallsRacingClose(t *testing.T) {
	e, s := setup(t)
	for round := 0; round < 150; round++ {
		g, err := New(e.ctx)
		require.NoError(t, err)
		buf, err := driver.Alloc[int32](e.ctx, 256)
		require.NoError(t, err)
		k, err := g.KernelWith(e.fn["fill"], cfg(256), buf, int32(1), int32(256))
		require.NoError(t, err)
		require.NoError(t, buf.Close())
		var wg sync.WaitGroup
		for w := 0; w < 6; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 4; i++ {
					if w%2 == 0 {
						x, err := g.Instantiate()
						if err != nil {
							closedOK(t, err)
							continue
						}
						assert.NoError(t, x.Launch(s))
						assert.NoError(t, x.Close())
						continue
					}
					c, err := g.Clone()
					if err != nil {
						closedOK(t, err)
						continue
					}
					if x, err := c.Instantiate(); assert.NoError(t, err) {
						assert.NoError(t, x.Close())
					}
					assert.NoError(t, c.Close())
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 16; i++ {
				_, err := g.After(k).Empty()
				closedOK(t, err)
			}
		}()
		runtime.Gosched()
		require.NoError(t, g.Close())
		wg.Wait()
	}
	require.NoError(t, s.Synchronize())
}

func closedOK(t *testing.T, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, driver.ErrClosed) {
		t.Errorf("unexpected error: %v", err)
	}
}

// cGraphLoop is the C half of items 2 and 3: the same graphs made,
// launched and destroyed from C, for the device memory CUDA itself keeps.
// With hold, every executable, graph and buffer is kept until the end (as
// graphs dropped without Close are kept until a garbage collection finds
// them): CUDA keeps some of what they used, for later graphs.
const cGraphLoop = `
#include <cuda.h>
#include <stdlib.h>
static void CUDA_CB host_fn(void *d) {}
int graph_loop(CUcontext ctx, CUfunction f, long n, int hold) {
	CUstream s; CUresult r;
	CUgraphExec *xs = calloc(n, sizeof *xs); CUgraph *gs = calloc(n, sizeof *gs); CUdeviceptr *bs = calloc(n, sizeof *bs);
	if ((r = cuCtxPushCurrent(ctx))) return r;
	if ((r = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING))) return r;
	for (long i = 0; i < n; i++) {
		int v = 1, cnt = 256; CUgraphNode k, h;
		if ((r = cuMemAlloc(&bs[i], 1024))) return r;
		void *params[3] = {&bs[i], &v, &cnt};
		CUDA_KERNEL_NODE_PARAMS p = {0};
		p.func = f; p.gridDimX = p.gridDimY = p.gridDimZ = 1; p.blockDimX = 256; p.blockDimY = p.blockDimZ = 1;
		p.kernelParams = params;
		if ((r = cuGraphCreate(&gs[i], 0))) return r;
		if ((r = cuGraphAddKernelNode(&k, gs[i], 0, 0, &p))) return r;
		CUDA_HOST_NODE_PARAMS hp = {host_fn, 0};
		if ((r = cuGraphAddHostNode(&h, gs[i], &k, 1, &hp))) return r;
		if ((r = cuGraphInstantiateWithFlags(&xs[i], gs[i], 0))) return r;
		if ((r = cuGraphLaunch(xs[i], s))) return r;
		if ((r = cuStreamSynchronize(s))) return r;
		if (!hold) { cuGraphExecDestroy(xs[i]); cuGraphDestroy(gs[i]); cuMemFree(bs[i]); }
	}
	for (long i = 0; hold && i < n; i++) { cuGraphExecDestroy(xs[i]); cuGraphDestroy(gs[i]); cuMemFree(bs[i]); }
	cuStreamDestroy(s);
	free(xs); free(gs); free(bs);
	CUcontext old; cuCtxPopCurrent(&old);
	return 0;
}
`

// 10,000 graphs with a kernel node and a host node, instantiated and
// launched from 16 goroutines, closed, then dropped without Close.
// Afterwards every lifetime counter and the goroutines are back, and the
// device memory CUDA keeps is no more than the same loops in C keep, run
// here first: destroying at once (Close), and keeping everything until the
// end (dropping, where the garbage collector decides when).
//
// It runs in a process of its own: after it, libcuda (driver 580) crashes
// when the process launches new multi-context executables on a stream
// that runs host functions, as TestGPUGraphStressCloseRaces does (see
// "Several GPUs" in the package documentation; tests/libcuda/
// multi_ctx_launch.c does the same in C).
func TestGPUManyGraphsLeaveNothing(t *testing.T) {
	if os.Getenv(manyGraphsChild) == "" {
		gputest.Require(t)
		args := []string{"-test.run", "^TestGPUManyGraphsLeaveNothing$", "-test.count=1", "-test.v"}
		if testing.Short() {
			args = append(args, "-test.short")
		}
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), manyGraphsChild+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("in a child process:\n%s", out)
		require.NoError(t, err)
		require.Contains(t, string(out), "--- PASS: TestGPUManyGraphsLeaveNothing")
		return
	}
	e, _ := setup(t)
	c := gputest.BuildC(t, cGraphLoop, "graph_loop")
	fill := e.fn["fill"]
	fh, _ := seam.Function(fill)
	n := 10000
	if testing.Short() {
		n = 1600
	}
	settle := func() {
		for i := 0; i < 5; i++ {
			runtime.GC()
			time.Sleep(10 * time.Millisecond)
			lifetime.Flush()
		}
		require.NoError(t, e.ctx.Synchronize())
	}
	run := func(drop bool) {
		var wg sync.WaitGroup
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := e.ctx.NewStream(driver.StreamNonBlocking)
				if !assert.NoError(t, err) {
					return
				}
				defer s.Close()
				for i := 0; i < n/16; i++ {
					buf, err := driver.Alloc[int32](e.ctx, 256)
					if !assert.NoError(t, err) {
						return
					}
					g, _ := New(e.ctx)
					k, err := g.KernelWith(fill, cfg(256), buf, int32(i), int32(256))
					assert.NoError(t, err)
					_, err = g.After(k).HostFunc(func() {})
					assert.NoError(t, err)
					x, err := g.Instantiate()
					if !assert.NoError(t, err) {
						return
					}
					assert.NoError(t, x.Launch(s))
					assert.NoError(t, s.Synchronize())
					if !drop {
						assert.NoError(t, x.Close())
						assert.NoError(t, g.Close())
						assert.NoError(t, buf.Close())
					}
				}
			}()
		}
		wg.Wait()
	}
	runC := func(hold int) {
		var wg sync.WaitGroup
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				assert.NoError(t, cCall(e.ctx, c["graph_loop"], seam.Context(e.ctx), fh, uintptr(n/16), uintptr(hold)))
			}()
		}
		wg.Wait()
	}
	settle()
	stats0, g0, free0 := lifetime.ReadStats(), runtime.NumGoroutine(), memFree(t, e.ctx)
	runC(0)
	settle()
	freeC := memFree(t, e.ctx)
	runC(1)
	settle()
	freeCHold := memFree(t, e.ctx)
	t.Logf("C's loops keep %d MiB (destroying at once), %d MiB (holding everything first)", (free0-freeC)>>20, (free0-freeCHold)>>20)
	errs0 := stats0.ReleaseErrors
	for _, drop := range []bool{false, true} {
		run(drop)
		ok := false
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			settle()
			s := lifetime.ReadStats()
			if s.Objects == stats0.Objects && s.Tables == stats0.Tables && s.Live == stats0.Live &&
				s.Callbacks == stats0.Callbacks && s.Pinned == stats0.Pinned && runtime.NumGoroutine() <= g0+1 {
				ok = true
				break
			}
		}
		free := memFree(t, e.ctx)
		t.Logf("drop=%v: device memory free %d MiB below the start; goroutines %d (were %d); release errors %d",
			drop, (free0-free)>>20, runtime.NumGoroutine(), g0, lifetime.ReadStats().ReleaseErrors-errs0)
		assert.True(t, ok, "drop=%v: lifetime back to %+v: %+v, goroutines %d (were %d)", drop, stats0, lifetime.ReadStats(), runtime.NumGoroutine(), g0)
		assert.Equal(t, errs0, lifetime.ReadStats().ReleaseErrors, "no release failed: %v", lifetime.Errors())
		assert.LessOrEqual(t, free0-free, max(free0-freeC, free0-freeCHold)+4<<20, "drop=%v: device memory back to where C's loops leave it", drop)
	}
}

// CUDA reuses the handle of a destroyed node; the destroyed Node stays
// destroyed.
func TestGPUDestroyedNodeStaysDestroyed(t *testing.T) {
	e, _ := setup(t)
	g, err := New(e.ctx)
	require.NoError(t, err)
	defer g.Close()
	old, err := g.Empty()
	require.NoError(t, err)
	require.NoError(t, old.Destroy())
	reused, added := false, 0
	for ; added < 1000 && !reused; added++ {
		n, err := g.KernelWith(e.fn["empty"], one)
		require.NoError(t, err)
		reused = n.h == old.h
	}
	t.Logf("handle reused: %v, after %d adds", reused, added)
	_, err = old.Kind()
	assert.ErrorIs(t, err, ErrDestroyedNode)
	assert.ErrorIs(t, old.Destroy(), ErrDestroyedNode)
	_, err = g.After(old).Empty()
	assert.ErrorIs(t, err, ErrDestroyedNode)
	_, err = old.Dependencies()
	assert.ErrorIs(t, err, ErrDestroyedNode)
	nodes, err := g.Nodes()
	require.NoError(t, err)
	assert.Len(t, nodes, added, "the new nodes are all there")
}

// Items 6 to 8 on the GPU: an aborted capture into a graph with memory
// nodes keeps what CUDA keeps; during a capture into a graph, clones,
// instantiations, child use and explicit adds are refused; nothing reaches
// libcuda with a destroyed node.
func TestGPUCaptureIntoGraphSafety(t *testing.T) {
	e, s := setup(t)
	g, err := New(e.ctx)
	require.NoError(t, err)
	defer g.Close()
	_, _, err = g.MemAlloc(1<<10, MemAllocOptions{})
	require.NoError(t, err)
	buf, err := driver.Alloc[int32](e.ctx, 256)
	require.NoError(t, err)
	parent, err := New(e.ctx)
	require.NoError(t, err)
	defer parent.Close()
	_, err = g.Capture(s, CaptureRelaxed, func(s *driver.Stream) error {
		if err := s.Launch(e.fn["fill"], driver.Grid(1), driver.Block(256), buf, int32(3), int32(256)); err != nil {
			return err
		}
		_, err := g.Clone()
		assert.ErrorIs(t, err, ErrCapturing, "Clone")
		_, err = g.Instantiate()
		assert.ErrorIs(t, err, ErrCapturing, "Instantiate")
		_, err = parent.Child(g)
		assert.ErrorIs(t, err, ErrCapturing, "Child")
		_, err = g.Empty()
		assert.ErrorIs(t, err, ErrCapturing, "an explicit add")
		return errors.New("abort")
	})
	require.Error(t, err)
	require.NoError(t, buf.Close()) // the kernel node CUDA keeps still names it
	collect()
	x, err := g.Instantiate()
	require.NoError(t, err)
	defer x.Close()
	require.NoError(t, x.Launch(s))
	require.NoError(t, s.Synchronize())
}

// A child graph's and an update graph's host-node panics reach the
// executable that ran them.
func TestGPUHostPanicsOfChildAndUpdate(t *testing.T) {
	e, s := setup(t)
	child, err := New(e.ctx)
	require.NoError(t, err)
	_, err = child.HostFunc(func() { panic("child boom") })
	require.NoError(t, err)
	parent, err := New(e.ctx)
	require.NoError(t, err)
	defer parent.Close()
	_, err = parent.Child(child)
	require.NoError(t, err)
	require.NoError(t, child.Close())
	x, err := parent.Instantiate()
	require.NoError(t, err)
	defer x.Close()
	require.NoError(t, x.Launch(s))
	require.NoError(t, s.Synchronize())
	assert.ErrorContains(t, x.Err(), "child boom")

	quiet, err := New(e.ctx)
	require.NoError(t, err)
	defer quiet.Close()
	_, err = quiet.HostFunc(func() {})
	require.NoError(t, err)
	loud, err := New(e.ctx)
	require.NoError(t, err)
	_, err = loud.HostFunc(func() { panic("update boom") })
	require.NoError(t, err)
	y, err := quiet.Instantiate()
	require.NoError(t, err)
	defer y.Close()
	require.NoError(t, y.Update(loud))
	require.NoError(t, loud.Close())
	require.NoError(t, y.Launch(s))
	require.NoError(t, s.Synchronize())
	assert.ErrorContains(t, y.Err(), "update boom")
}

// Launches racing the end of their stream's capture (libcuda crashed inside
// StreamCapture.End); the captured graphs run.
func TestGPULaunchesRacingCaptureEnd(t *testing.T) {
	e, s := setup(t)
	run, err := e.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer run.Close()
	for i := 0; i < 100; i++ {
		sc, err := BeginCapture(s, CaptureRelaxed)
		require.NoError(t, err)
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for j := 0; ; j++ {
				buf, err := driver.Alloc[int32](e.ctx, 256)
				if !assert.NoError(t, err) {
					return
				}
				err = s.Launch(e.fn["fill"], driver.Grid(1), driver.Block(256), buf, int32(j), int32(256))
				_ = buf.Close()
				if err != nil && !errors.Is(err, driver.ErrStreamCaptureInvalidated) {
					t.Errorf("launch: %v", err)
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
		time.Sleep(time.Duration(i%7) * 20 * time.Microsecond)
		g, err := sc.End()
		close(stop)
		<-done
		if err != nil {
			continue
		}
		collect()
		x, err := g.Instantiate()
		require.NoError(t, err)
		require.NoError(t, x.Launch(run))
		require.NoError(t, run.Synchronize())
		require.NoError(t, x.Close())
		require.NoError(t, g.Close())
	}
	require.NoError(t, s.Synchronize())
}

// After an illegal-address fault, what an update retired is released
// (nothing runs in the context any more) and no goroutine is left polling.
// The fault ends every context on the device, so the test runs in a process
// of its own.
func TestGPURetireAfterFault(t *testing.T) {
	gputest.Require(t)
	if os.Getenv("PURECUDA_FAULT_CHILD") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestGPURetireAfterFault$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "PURECUDA_FAULT_CHILD=1")
		out, err := cmd.CombinedOutput()
		t.Logf("child:\n%s", out)
		require.NoError(t, err, "the child process")
		return
	}
	e, s := setup(t)
	fill := e.fn["fill"]
	bufs := make([]*driver.Buffer[int32], 3)
	for i := range bufs {
		var err error
		bufs[i], err = driver.Alloc[int32](e.ctx, 256)
		require.NoError(t, err)
	}
	g, err := New(e.ctx)
	require.NoError(t, err)
	k, err := g.KernelWith(fill, cfg(256), bufs[0], int32(1), int32(256))
	require.NoError(t, err)
	x, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, x.SetKernelWith(k, fill, cfg(256), bufs[1], int32(2), int32(256)))
	require.NoError(t, x.Launch(s))
	require.NoError(t, s.Synchronize())
	time.Sleep(1500 * time.Millisecond) // idle callback workers end
	collect()
	g0, objects0 := runtime.NumGoroutine(), lifetime.ReadStats().Objects

	// A long kernel, then one writing to address 8: the context faults for
	// good once the first is done, after the retire below began to wait.
	require.NoError(t, s.Launch(e.fn["spin"], driver.Grid(1), driver.Block(1), int64(200_000_000)))
	require.NoError(t, s.Launch(fill, driver.Grid(1), driver.Block(256), driver.DevicePtr(8), int32(0), int32(256)))
	require.NoError(t, x.SetKernelWith(k, fill, cfg(256), bufs[2], int32(3), int32(256)), "retires bufs[1]'s owners behind s")
	assert.Error(t, s.Synchronize(), "the fault")
	_ = x.Close()
	_ = g.Close()
	for _, b := range bufs {
		_ = b.Close()
	}
	var ok bool
	for deadline := time.Now().Add(10 * time.Second); !ok && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		collect()
		ok = runtime.NumGoroutine() <= g0 && lifetime.ReadStats().Objects <= objects0-5
	}
	assert.True(t, ok, "released after the fault: %d goroutines (were %d), %d objects (were %d)",
		runtime.NumGoroutine(), g0, lifetime.ReadStats().Objects, objects0)
	t.Logf("release errors after the fault: %v", lifetime.Errors())
}

// An executable launched or uploaded on a stream being captured is refused
// before CUDA sees it, with the capture going on: driver 580 refuses a
// graph launch into a capture and invalidates the capture, and that
// invalidation racing a record or wait on the capture's streams crashes
// libcuda. The executable and the stream stay usable.
func TestGPUExecLaunchIntoCaptureRefused(t *testing.T) {
	e, s := setup(t)
	fill := e.fn["fill"]
	buf, err := driver.Alloc[int32](e.ctx, 256)
	require.NoError(t, err)
	defer buf.Close()
	g, err := New(e.ctx)
	require.NoError(t, err)
	_, err = g.KernelWith(fill, cfg(256), buf, int32(1), int32(256))
	require.NoError(t, err)
	x, err := g.Instantiate()
	require.NoError(t, err)
	defer x.Close()
	require.NoError(t, g.Close())

	sc, err := BeginCapture(s, CaptureRelaxed)
	require.NoError(t, err)
	defer sc.Abort()
	require.ErrorIs(t, x.Launch(s), driver.ErrStreamCaptureUnsupported)
	require.ErrorIs(t, x.Upload(s), driver.ErrStreamCaptureUnsupported)
	st, err := IsCapturing(s)
	require.NoError(t, err)
	require.Equal(t, Capturing, st, "the capture goes on")
	require.NoError(t, s.Launch(fill, driver.Grid(1), driver.Block(256), buf, int32(5), int32(256)))
	captured, err := sc.End()
	require.NoError(t, err)
	defer captured.Close()
	require.NoError(t, x.Launch(s), "the executable launches outside the capture")
	require.NoError(t, s.Synchronize())
	out := make([]int32, 256)
	require.NoError(t, buf.CopyToHost(e.ctx.LegacyStream(), out))
	require.Equal(t, int32(1), out[0], "the executable ran; the captured launch did not")
}

// A capture into a conditional node's body keeps the whole family busy:
// destroying the conditional node meanwhile is refused, not a crash.
func TestGPUCaptureIntoBodyRefusesDestroy(t *testing.T) {
	e, s := setup(t)
	g, err := New(e.ctx)
	require.NoError(t, err)
	defer g.Close()
	c, err := g.NewCondition(0, AssignDefault)
	require.NoError(t, err)
	n, body, err := g.If(c)
	require.NoError(t, err)
	buf, err := driver.Alloc[int32](e.ctx, 256)
	require.NoError(t, err)
	defer buf.Close()
	_, err = body.Capture(s, CaptureRelaxed, func(s *driver.Stream) error {
		if err := s.Launch(e.fn["fill"], driver.Grid(1), driver.Block(256), buf, int32(1), int32(256)); err != nil {
			return err
		}
		assert.ErrorIs(t, n.Destroy(), ErrCapturing)
		_, err := body.Empty()
		assert.ErrorIs(t, err, ErrCapturing)
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, n.Destroy())
	_, err = body.Empty()
	assert.ErrorIs(t, err, ErrDestroyedNode)
}
