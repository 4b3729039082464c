//go:build linux

package graph

// Adversarial review tests. Each test asserts the behaviour the package
// promises; a test that fails demonstrates a bug (see the review report).
//
// Tests named TestReviewCPU* need nothing. Tests named TestReviewFake* run
// against tests/fakedriver's fakecuda (built with gcc) in a child process of
// this test binary, with PURECUDA_LIBCUDA pointing at it, so the rest of the
// package's tests keep using (or skipping without) the real driver.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// ---------------------------------------------------------------- helpers

// countingOwner counts its releases.
type countingOwner struct{ n atomic.Int32 }

func (c *countingOwner) Release() error { c.n.Add(1); return nil }

const rvEnvFlag = "PURECUDA_REVIEW_FAKE"

var rvBuild = sync.OnceValues(func() (string, error) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return "", fmt.Errorf("gcc not found: %w", err)
	}
	src := filepath.Join("..", "tests", "fakedriver", "testdata", "fakecuda.c")
	if _, err := os.Stat(src); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "review-fakecuda")
	if err != nil {
		return "", err
	}
	lib := filepath.Join(dir, "libfakecuda.so")
	if out, err := exec.Command(gcc, "-O2", "-shared", "-fPIC", "-o", lib, src, "-lpthread").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building fakecuda: %v\n%s", err, out)
	}
	return lib, nil
})

// rvFake reports whether the test body should run: true inside the child
// process that has fakecuda loaded. In the parent it runs the test in such
// a child, reports its result and returns false.
func rvFake(t *testing.T) bool {
	t.Helper()
	if os.Getenv(rvEnvFlag) == "1" {
		rvCall(t, "fake_reset_counters")
		return true
	}
	lib, err := rvBuild()
	if err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v", "-test.timeout=120s")
	cmd.Env = append(os.Environ(), rvEnvFlag+"=1", "PURECUDA_LIBCUDA="+lib)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("under fakecuda: %v\n%s", err, out)
	} else {
		t.Logf("under fakecuda:\n%s", out)
	}
	return false
}

var rvLib = sync.OnceValues(func() (uintptr, error) {
	return purego.Dlopen(os.Getenv("PURECUDA_LIBCUDA"), purego.RTLD_NOW|purego.RTLD_LOCAL)
})

// rvCall calls one of fakecuda's long f(long...) controls.
func rvCall(t testing.TB, name string, args ...uintptr) int64 {
	t.Helper()
	h, err := rvLib()
	require.NoError(t, err)
	fn, err := purego.Dlsym(h, name)
	require.NoError(t, err)
	r, _, _ := purego.SyscallN(fn, args...)
	return int64(r)
}

var rvFailNext func(fn string, code int32)

// rvFailNextCall makes fakecuda's next call of fn fail with code.
func rvFailNextCall(t testing.TB, fn string, code int32) {
	t.Helper()
	h, err := rvLib()
	require.NoError(t, err)
	if rvFailNext == nil {
		purego.RegisterLibFunc(&rvFailNext, h, "fake_fail_next")
	}
	rvFailNext(fn, code)
	t.Cleanup(func() { rvCall(t, "fake_fail_clear") })
}

type rvEnv struct {
	ctx   *driver.Context
	s     *driver.Stream
	mod   *driver.Module
	fill  *driver.Function
	empty *driver.Function
}

var rvCfg = driver.LaunchConfig{Grid: driver.Grid(1), Block: driver.Block(1)}

func rvSetup(t *testing.T) *rvEnv {
	t.Helper()
	dev, err := driver.DeviceByOrdinal(0)
	require.NoError(t, err)
	ctx, err := dev.PrimaryContext()
	require.NoError(t, err)
	e := &rvEnv{ctx: ctx}
	e.s, err = ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	e.mod, err = ctx.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	e.fill, err = e.mod.Function("fill")
	require.NoError(t, err)
	e.empty, err = e.mod.Function("empty")
	require.NoError(t, err)
	return e
}

var rvLastBad func() string

func rvNoBadUses(t *testing.T) {
	t.Helper()
	h, err := rvLib()
	require.NoError(t, err)
	if rvLastBad == nil {
		purego.RegisterLibFunc(&rvLastBad, h, "fake_last_bad_use")
	}
	if last := rvLastBad(); last != "" {
		t.Logf("fakecuda's last bad use: %s", last)
	}
	assert.Zero(t, rvCall(t, "fake_bad_ptr_uses"), "uses of freed or foreign device memory")
	assert.Zero(t, rvCall(t, "fake_bad_handle_uses"), "uses of destroyed handles (a segfault in the real libcuda)")
	assert.Zero(t, rvCall(t, "fake_no_ctx_graph_calls"), "graph calls without a current context")
}

// within runs f on a goroutine and reports whether it returned in d.
func within(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// ------------------------------------------------------------- CPU tests

// Finding: a Raw operand's owner is promised to be taken "also when the add
// fails", but every refusal made before Operand.resolve runs (nil graph,
// bad element size or value, a bad other operand in Memcpy, nil Exec)
// returns without releasing it: the owner leaks.
func TestReviewCPURawOwnerReleasedOnEveryRefusal(t *testing.T) {
	var nilGraph *Graph
	var nilExec *Exec
	zero := new(Graph)
	cases := map[string]func(o release.Owner){
		"nil graph Memset":      func(o release.Owner) { _, _ = nilGraph.Memset(Raw(0x1000, 16, false, o), 0, 4) },
		"Memset element size 3": func(o release.Owner) { _, _ = zero.Memset(Raw(0x1000, 16, false, o), 0, 3) },
		"Memset value too big":  func(o release.Owner) { _, _ = zero.Memset(Raw(0x1000, 16, false, o), 0x1ff, 1) },
		"nil graph Memcpy":      func(o release.Owner) { _, _ = nilGraph.Memcpy(Raw(0x1000, 16, false, o), Raw(0x2000, 16, false, nil)) },
		"Memcpy bad dst, raw src": func(o release.Owner) {
			_, _ = zero.Memcpy(Slice([]int32{}), Raw(0x2000, 16, false, o))
		},
		"nil Exec SetMemset": func(o release.Owner) { _ = nilExec.SetMemset(Node{}, Raw(0x1000, 16, false, o), 0, 4) },
		"Exec SetMemset element size 3": func(o release.Owner) {
			_ = new(Exec).SetMemset(Node{}, Raw(0x1000, 16, false, o), 0, 3)
		},
		"nil Exec SetMemcpy": func(o release.Owner) {
			_ = nilExec.SetMemcpy(Node{}, Raw(0x1000, 16, false, o), Raw(0x2000, 16, false, nil))
		},
		"Exec SetMemcpy bad dst, raw src": func(o release.Owner) {
			_ = new(Exec).SetMemcpy(Node{}, Slice([]int32{}), Raw(0x2000, 16, false, o))
		},
	}
	for name, f := range cases {
		o := new(countingOwner)
		f(o)
		assert.EqualValues(t, 1, o.n.Load(), "%s: the Raw operand's owner must be released exactly once", name)
	}
}

// Finding: an Operand is a value that looks reusable, but a Raw operand
// carries its owner, and every add (or refused add) that resolves it
// releases that owner once more. A lifetime.Ref owner is then released
// twice: the second release drops a reference that belongs to someone else,
// so the object is destroyed while its owner still uses it.
func TestReviewCPURawOperandReuseOverReleases(t *testing.T) {
	var obj lifetime.Object
	destroyed := false
	obj.Init(func() error { destroyed = true; return nil }) // the user's own reference
	ref, ok := obj.Ref()                                    // the one handed to the graph
	require.True(t, ok)
	op := Raw(0x1000, 16, false, ref)

	zero := new(Graph) // every add fails, after resolving the operand
	_, err := zero.Memset(op, 0, 4)
	require.Error(t, err)
	_, err = zero.Memset(op, 0, 4) // the same operand again
	require.Error(t, err)
	assert.False(t, destroyed, "reusing a Raw operand released its owner twice, destroying an object whose owner never let go")
	assert.EqualValues(t, 1, obj.Refs(), "only the user's own reference should be left")

	// The same in one call: the operand on both sides of a copy.
	c := new(countingOwner)
	both := Raw(0x1000, 16, false, c)
	_, _ = zero.Memcpy(both, both)
	assert.LessOrEqual(t, c.n.Load(), int32(1), "an owner given once is released at most once")
}

// ------------------------------------------------------ fake-driver tests

// Finding: Exec.SetChild locks child.mu and, holding it, setNode locks the
// source graph's mu. With child == the graph the executable was made from
// (a plain misuse: the wrong graph passed), the goroutine deadlocks on its
// own mutex while holding e.mu, so every later Launch of the executable and
// every call on the graph hang for ever.
func TestReviewFakeSetChildWithSourceGraphDeadlocks(t *testing.T) {
	if !rvFake(t) {
		return
	}
	env := rvSetup(t)
	g, err := New(env.ctx)
	require.NoError(t, err)
	c, err := New(env.ctx)
	require.NoError(t, err)
	_, err = c.Empty()
	require.NoError(t, err)
	n, err := g.Child(c)
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)

	returned := within(2*time.Second, func() { _ = e.SetChild(n, g) })
	assert.True(t, returned, "Exec.SetChild(n, its own source graph) deadlocked")
	if !returned {
		assert.True(t, within(time.Second, func() { _ = e.Launch(env.s) }), "and now every Launch of the executable hangs")
	}
}

// Finding: lock-order inversion. Exec.SetChild(n, X) takes X.mu then e.mu;
// Exec.Update(X) takes e.mu then X.mu. Both are documented as safe to call
// concurrently on one Exec; together they deadlock.
func TestReviewFakeSetChildVersusUpdateDeadlock(t *testing.T) {
	if !rvFake(t) {
		return
	}
	env := rvSetup(t)
	g, err := New(env.ctx)
	require.NoError(t, err)
	c, err := New(env.ctx)
	require.NoError(t, err)
	_, err = c.Empty()
	require.NoError(t, err)
	n, err := g.Child(c)
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)
	x, err := New(env.ctx) // the same shape as c
	require.NoError(t, err)
	_, err = x.Empty()
	require.NoError(t, err)

	ok := within(5*time.Second, func() {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < 20000; i++ {
				_ = e.SetChild(n, x)
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < 20000; i++ {
				_ = e.Update(x) // fails (topology), but takes e.mu then x.mu
			}
		}()
		wg.Wait()
	})
	assert.True(t, ok, "Exec.SetChild and Exec.Update on one executable deadlocked")
}

// Finding: Exec.retire treats any cuEventSynchronize error as "nothing more
// runs" and releases the retired owners at once. A non-sticky error (an
// event recorded on a stream that is being captured, or any transient
// failure) releases them while the launch that uses them still runs. Here
// the retired owner is stream-ordered memory, whose free is not ordered
// after the graph's stream: the running kernel writes freed memory.
func TestReviewFakeRetireReleasesEarlyOnEventSyncError(t *testing.T) {
	if !rvFake(t) {
		return
	}
	env := rvSetup(t)
	allocStream, err := env.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	bufA, err := driver.Alloc[int32](env.ctx, 16)
	require.NoError(t, err)
	g, err := New(env.ctx)
	require.NoError(t, err)
	k, err := g.KernelWith(env.fill, rvCfg, bufA, int32(1), int32(16))
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)

	sb, err := driver.AllocAsync[int32](allocStream, 16)
	require.NoError(t, err)
	require.NoError(t, allocStream.Synchronize())
	require.NoError(t, e.SetKernelWith(k, env.fill, rvCfg, sb, int32(2), int32(16)))
	require.NoError(t, sb.Close()) // the executable holds it now

	rvCall(t, "fake_set_kernel_delay_us", 300000)
	defer rvCall(t, "fake_set_kernel_delay_us", 0)
	require.NoError(t, e.Launch(env.s)) // runs for 300 ms, writing sb

	rvFailNextCall(t, "cuEventSynchronize", int32(cu.CUDA_ERROR_OUT_OF_MEMORY))
	require.NoError(t, e.SetKernelWith(k, env.fill, rvCfg, bufA, int32(3), int32(16))) // retires sb
	require.NoError(t, env.s.Synchronize())
	lifetime.Flush()
	rvNoBadUses(t)
}

// The realistic trigger of the finding above: the user starts capturing
// on a stream the executable ran on (legal while that launch still runs),
// and another goroutine changes a node. retire records its event on the
// capturing stream (so it is captured, not recorded) and synchronising
// with it fails: the retired owner is released while the launch still
// runs, and the user's capture is invalidated by purecuda as a side
// effect.
func TestReviewFakeRetireDuringCaptureOnTrackedStream(t *testing.T) {
	if !rvFake(t) {
		return
	}
	env := rvSetup(t)
	allocStream, err := env.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	bufA, err := driver.Alloc[int32](env.ctx, 16)
	require.NoError(t, err)
	g, err := New(env.ctx)
	require.NoError(t, err)
	k, err := g.KernelWith(env.fill, rvCfg, bufA, int32(1), int32(16))
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)
	sb, err := driver.AllocAsync[int32](allocStream, 16)
	require.NoError(t, err)
	require.NoError(t, allocStream.Synchronize())
	require.NoError(t, e.SetKernelWith(k, env.fill, rvCfg, sb, int32(2), int32(16)))
	require.NoError(t, sb.Close())

	rvCall(t, "fake_set_kernel_delay_us", 300000)
	defer rvCall(t, "fake_set_kernel_delay_us", 0)
	require.NoError(t, e.Launch(env.s))

	sh := cu.CUstream(seam.Stream(env.s))
	require.NoError(t, env.ctx.Raw(func(uintptr) error { return cu.StreamBeginCapture(sh, cu.CU_STREAM_CAPTURE_MODE_RELAXED) }))
	require.NoError(t, e.SetKernelWith(k, env.fill, rvCfg, bufA, int32(3), int32(16))) // retires sb
	time.Sleep(50 * time.Millisecond)                                                  // let the retire goroutine run
	var captured cu.CUgraph
	endErr := env.ctx.Raw(func(uintptr) error { return cu.StreamEndCapture(sh, &captured) })
	assert.NoError(t, endErr, "the user's capture must not be disturbed by purecuda's bookkeeping")
	if captured != 0 {
		_ = env.ctx.Raw(func(uintptr) error { return cu.GraphDestroy(captured) })
	}
	require.NoError(t, env.s.Synchronize())
	lifetime.Flush()
	rvNoBadUses(t)
}

// Finding: every retire with launches in flight starts a goroutine that
// blocks in cuEventSynchronize, a C call that holds an OS thread. A loop of
// per-node updates and launches that runs ahead of the GPU therefore holds
// one OS thread per pending update (Go's limit is 10,000 threads, after
// which the runtime kills the process).
func TestReviewFakeRetireThreadPerPendingUpdate(t *testing.T) {
	if !rvFake(t) {
		return
	}
	env := rvSetup(t)
	bufs := make([]*driver.Buffer[int32], 2)
	for i := range bufs {
		b, err := driver.Alloc[int32](env.ctx, 16)
		require.NoError(t, err)
		defer b.Close()
		bufs[i] = b
	}
	g, err := New(env.ctx)
	require.NoError(t, err)
	defer g.Close()
	k, err := g.KernelWith(env.fill, rvCfg, bufs[0], int32(1), int32(16))
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)
	defer e.Close()

	rvCall(t, "fake_set_kernel_delay_us", 2000)
	defer rvCall(t, "fake_set_kernel_delay_us", 0)
	threads := pprof.Lookup("threadcreate")
	before := threads.Count()
	const rounds = 1000
	t0 := time.Now()
	for i := 0; i < rounds; i++ {
		require.NoError(t, e.SetKernelWith(k, env.fill, rvCfg, bufs[i%2], int32(i), int32(16)))
		require.NoError(t, e.Launch(env.s))
	}
	t.Logf("loop took %v", time.Since(t0))
	time.Sleep(500 * time.Millisecond) // the GPU (fake) is still working through the launches
	grew := threads.Count() - before
	t.Logf("%d updates with launches in flight made %d OS threads", rounds, grew)
	require.NoError(t, env.s.Synchronize())
	assert.Less(t, grew, 64, "retiring owners should not cost an OS thread per pending update")
}

// Finding: Exec.track takes its own s.Hold(), which fails if the user
// closed s after onStream's Hold succeeded. e.last is set anyway and the
// launch goes ahead untracked, so a later retire (or Close) does not wait
// for it; with no stream tracked at all, retired owners are released at
// once through the queue.
func TestReviewFakeLaunchRacingStreamCloseStaysTracked(t *testing.T) {
	if !rvFake(t) {
		return
	}
	env := rvSetup(t)
	g, err := New(env.ctx)
	require.NoError(t, err)
	_, err = g.KernelWith(env.empty, rvCfg)
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)
	tracked := func(s *driver.Stream) bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, t := range e.streams {
			if t.s == s {
				return true
			}
		}
		return false
	}
	untracked := 0
	for i := 0; i < 20000 && untracked == 0; i++ {
		s, err := env.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		start := make(chan struct{})
		var lerr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); <-start; lerr = e.Launch(s) }()
		go func() { defer wg.Done(); <-start; runtime.Gosched(); _ = s.Close() }()
		close(start)
		wg.Wait()
		if lerr == nil && !tracked(s) {
			untracked++
			t.Logf("round %d: Launch succeeded on a stream the executable does not track", i)
		}
	}
	assert.Zero(t, untracked, "a successful launch must always be tracked")
	require.NoError(t, e.Close())
}

// Finding: a body graph's calls hold the body's Object and the root's, but
// not what keeps the body's CUDA graph alive: the node that owns it. A
// Node.Destroy of that node (under root.mu only) concurrent with a call on
// the body (which has acquired the body and waits for body.mu) destroys the
// CUDA graph under the call; the call then adds a node to a destroyed graph
// (fakecuda: a bad handle use; the real libcuda: use after free). The body
// is simulated here with a child-graph node's embedded graph, which the
// node owns exactly as a conditional node owns its bodies (fakecuda has no
// conditional nodes).
func TestReviewFakeBodyCallRacingOwnerNodeDestroy(t *testing.T) {
	if !rvFake(t) {
		return
	}
	env := rvSetup(t)
	root, err := New(env.ctx)
	require.NoError(t, err)
	defer root.Close()
	c, err := New(env.ctx)
	require.NoError(t, err)
	_, err = c.Empty()
	require.NoError(t, err)
	n, err := root.Child(c)
	require.NoError(t, err)
	h, err := n.ChildGraphHandle()
	require.NoError(t, err)
	root.fam.mu.Lock()
	body, err := root.newBody(cu.CUgraph(h), n.h)
	root.fam.mu.Unlock()
	require.NoError(t, err)

	// A call on the body has acquired it and waits for the tree's mutex
	// while the owner node is destroyed: one mutex serves the whole tree,
	// and the call re-checks the body once it has the lock.
	require.True(t, body.fam == root.fam, "a body shares its root's family lock")
	require.NoError(t, body.acquire("test"))
	require.NoError(t, n.Destroy()) // the owner node goes, and its graph with it
	err = body.lock("test")
	body.release()
	assert.ErrorIs(t, err, driver.ErrClosed, "the in-flight body call must see that its graph is gone")
	_, err = body.Empty()
	assert.ErrorIs(t, err, driver.ErrClosed)
	rvNoBadUses(t)
}

// Finding: Builder.Child snapshots child.uos and marks the child's table
// shared under child.mu, then lets child.mu go before the driver copies the
// child (cuGraphAddChildGraphNode, under g.mu only). A node added to the
// child in between goes to a new, unshared table that the copy embedded in
// g names but g's bookkeeping does not know of, so destroying that node in
// the child releases its buffer at once while g's copy still uses it.
// (The interleaving is fixed by holding g.mu here; in a program another
// call on g holds it.)
func TestReviewFakeChildSnapshotRace(t *testing.T) {
	if !rvFake(t) {
		return
	}
	env := rvSetup(t)
	g, err := New(env.ctx)
	require.NoError(t, err)
	defer g.Close()
	c, err := New(env.ctx)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Empty()
	require.NoError(t, err)

	g.fam.mu.Lock()
	childErr := make(chan error, 1)
	go func() { _, err := g.Child(c); childErr <- err }()
	time.Sleep(100 * time.Millisecond) // Child has snapshotted c and waits for g.mu
	buf, err := driver.Alloc[int32](env.ctx, 16)
	require.NoError(t, err)
	k, err := c.KernelWith(env.fill, rvCfg, buf, int32(1), int32(16))
	require.NoError(t, err)
	require.NoError(t, buf.Close()) // c's node holds it
	g.fam.mu.Unlock()
	require.NoError(t, <-childErr)  // g's copy of c includes k
	require.NoError(t, k.Destroy()) // c's table was never shared with g: buf is freed

	e, err := g.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	require.NoError(t, e.Launch(env.s))
	_ = env.s.Synchronize()
	rvNoBadUses(t)
}

// Finding: add's rollback (unadd) releases the owners it recorded and then
// asks CUDA to remove the node; in a graph with memory alloc or free nodes
// CUDA refuses to remove nodes, so the node stays in the graph while its
// owners are released: exactly the half-built state the rollback exists to
// prevent. (The record failure is injected with testRecordHook.)
func TestReviewFakeRollbackInGraphWithMemoryNodes(t *testing.T) {
	if !rvFake(t) {
		return
	}
	env := rvSetup(t)
	g, err := New(env.ctx)
	require.NoError(t, err)
	defer g.Close()
	a, ptr, err := g.MemAlloc(64, MemAllocOptions{})
	require.NoError(t, err)
	_, err = g.After(a).MemFree(ptr)
	require.NoError(t, err)
	before, err := g.Nodes()
	require.NoError(t, err)

	buf, err := driver.Alloc[int32](env.ctx, 16)
	require.NoError(t, err)
	testRecordHook = func() error { return errors.New("injected: owners not recorded") }
	_, err = g.KernelWith(env.fill, rvCfg, buf, int32(1), int32(16))
	testRecordHook = nil
	require.Error(t, err)
	addErr := err
	t.Logf("the failed add returned: %v", err)
	require.NoError(t, buf.Close()) // the add said it failed: the caller's buffer is freed
	after, err := g.Nodes()
	require.NoError(t, err)
	// CUDA refuses to destroy nodes of graphs with memory nodes, so the node
	// stays: then it must keep what it names (checked by the launch below:
	// no use of freed memory), and the error must say so.
	if len(after) > len(before) {
		assert.ErrorContains(t, addErr, "could not be removed again and keeps what it names")
	}
	if len(after) > len(before) {
		e, err := g.Instantiate()
		require.NoError(t, err)
		defer e.Close()
		require.NoError(t, e.Launch(env.s))
		_ = env.s.Synchronize()
	}
	rvNoBadUses(t)
}

// Finding: Builder.KernelArgs checks only the kernel's own context. For a
// library kernel (no context) it skips the per-buffer context check that
// Stream.LaunchArgs and Graph.Kernel make, so a node of a graph in context
// B names memory of context A.
func TestReviewFakeKernelArgsChecksBufferContexts(t *testing.T) {
	if !rvFake(t) {
		return
	}
	env := rvSetup(t)
	lib, err := driver.LoadLibrary([]byte("FAKE library"))
	require.NoError(t, err)
	defer lib.Close()
	fill, err := lib.Function("fill")
	require.NoError(t, err)
	other, err := env.ctx.Device().NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	defer other.Close()
	mine, err := driver.Alloc[int32](env.ctx, 16)
	require.NoError(t, err)
	defer mine.Close()
	args, err := fill.NewArgs(mine, int32(1), int32(16))
	require.NoError(t, err)
	defer args.Close()

	g, err := New(other)
	require.NoError(t, err)
	defer g.Close()
	_, err = g.KernelWith(fill, rvCfg, mine, int32(1), int32(16))
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "control: Graph.Kernel refuses a buffer of another context")
	_, err = g.KernelArgs(args, rvCfg.Grid, rvCfg.Block)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "Graph.KernelArgs must refuse it too")
	if err == nil { // what follows: the node runs in B on A's memory
		e, err := g.Instantiate()
		require.NoError(t, err)
		defer e.Close()
		s, err := other.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, e.Launch(s))
		_ = s.Synchronize()
	}
	rvNoBadUses(t)
}

// Not a bug, a check of the budget: a kernel-node add with two
// buffer arguments allocates at most 2 times (inside Batch).
func TestReviewFakeKernelAddAllocations(t *testing.T) {
	if !rvFake(t) {
		return
	}
	env := rvSetup(t)
	a, err := driver.Alloc[int32](env.ctx, 16)
	require.NoError(t, err)
	defer a.Close()
	b, err := driver.Alloc[int32](env.ctx, 16)
	require.NoError(t, err)
	defer b.Close()
	copyi, err := env.mod.Function("copyi")
	require.NoError(t, err)
	g, err := New(env.ctx)
	require.NoError(t, err)
	defer g.Close()
	var allocs float64
	require.NoError(t, g.Batch(func() error {
		allocs = testing.AllocsPerRun(2000, func() {
			if _, err := g.KernelWith(copyi, rvCfg, a, b, int32(16)); err != nil {
				panic(err)
			}
		})
		return nil
	}))
	t.Logf("kernel-node add with two buffers: %.2f allocations", allocs)
	assert.LessOrEqual(t, allocs, 2.0)
}
