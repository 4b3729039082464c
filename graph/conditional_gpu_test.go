package graph

import (
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/lifetime"
	"github.com/purecuda/cuda/nvrtc"
)

// condSrc are the kernels of the conditional-node tests. They include only
// nvrtc's built-in <purecuda/graph.h>. Float kernels round every operation
// on its own (__fadd_rn and friends are never contracted into an FMA), so
// the CPU can repeat them bit for bit.
const condSrc = `
#include <purecuda/graph.h>
extern "C" {
// One explicit step of 1-D heat diffusion with fixed ends.
__global__ void heat_step(const float* cur, float* next, float r, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	if (i == 0 || i == n - 1) { next[i] = cur[i]; return; }
	float c = cur[i];
	float lap = __fadd_rn(__fsub_rn(cur[i-1], __fmul_rn(2.0f, c)), cur[i+1]);
	next[i] = __fadd_rn(c, __fmul_rn(r, lap));
}
__global__ void copy_f(const float* src, float* dst, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) dst[i] = src[i];
}
// loop_tail counts an iteration and ends the loop after limit of them.
__global__ void loop_tail(int* step, int limit, cudaGraphConditionalHandle h) {
	if (++*step >= limit) cudaGraphSetConditional(h, 0);
}
__global__ void bump(int* x) { *x += 1; }
// Bisection for sqrt(2): st = {lo, hi, mid}; side is set when mid is too big.
__global__ void bisect_mid(float* st, cudaGraphConditionalHandle side) {
	float mid = __fmul_rn(__fadd_rn(st[0], st[1]), 0.5f);
	st[2] = mid;
	float f = __fsub_rn(__fmul_rn(mid, mid), 2.0f);
	cudaGraphSetConditional(side, f > 0.0f ? 1u : 0u);
}
__global__ void set_hi(float* st) { st[1] = st[2]; }
__global__ void set_lo(float* st) { st[0] = st[2]; }
// set_from sets a condition to a value in device memory.
__global__ void set_from(const int* v, cudaGraphConditionalHandle h) { cudaGraphSetConditional(h, (unsigned)*v); }
__global__ void branch_add(int* x) { *x += 1; }
__global__ void branch_mul(int* x) { *x *= 3; }
__global__ void branch_neg(int* x) { *x = -*x; }
// parity sets h when *step is even.
__global__ void parity(const int* step, cudaGraphConditionalHandle h) { cudaGraphSetConditional(h, (*step % 2) == 0); }
}
`

var condOnce = sync.OnceValues(func() (map[string]*driver.Function, error) {
	e, err := kernels()
	if err != nil {
		return nil, err
	}
	mod, _, err := e.Ctx.CompileModule(condSrc, nvrtc.Options{Name: "conditional_test.cu"})
	if err != nil {
		return nil, err
	}
	fns := map[string]*driver.Function{}
	for _, name := range []string{"heat_step", "copy_f", "loop_tail", "bump", "bisect_mid", "set_hi", "set_lo",
		"set_from", "branch_add", "branch_mul", "branch_neg", "parity"} {
		if fns[name], err = mod.Function(name); err != nil {
			return nil, err
		}
	}
	return fns, nil
})

// condSetup is setup plus the conditional kernels; it skips on a driver
// older than need (a cuDriverGetVersion number).
func condSetup(tb testing.TB, need int) (*testEnv, *driver.Stream, map[string]*driver.Function) {
	tb.Helper()
	e, s := setup(tb)
	have, err := driverVersion()
	require.NoError(tb, err)
	if have < need {
		tb.Skipf("driver %d is older than the %d this test needs", have, need)
	}
	fns, err := condOnce()
	require.NoError(tb, err)
	return e, s, fns
}

func alloc[T any](tb testing.TB, ctx *driver.Context, n int) *driver.Buffer[T] {
	tb.Helper()
	b, err := driver.Alloc[T](ctx, n)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = b.Close() })
	return b
}

// heatCPU repeats heat_step on the CPU, rounding each operation as the
// kernel does (explicit conversions keep Go from fusing them).
func heatCPU(u []float32, r float32, steps int) []float32 {
	n := len(u)
	cur, next := slices.Clone(u), make([]float32, n)
	for s := 0; s < steps; s++ {
		next[0], next[n-1] = cur[0], cur[n-1]
		for i := 1; i < n-1; i++ {
			c := cur[i]
			lap := float32(float32(cur[i-1]-float32(2*c)) + cur[i+1])
			next[i] = float32(c + float32(r*lap))
		}
		cur, next = next, cur
	}
	return cur
}

// Scenario: a heat-diffusion loop driven by a while node whose condition a
// kernel clears after N steps. The result equals the CPU's bit for bit, and
// the loop ran exactly N times, on each of two launches.
func TestWhileHeatDiffusion(t *testing.T) {
	e, s, fns := condSetup(t, versionIfWhile)
	const n, steps = 256, 100
	const r = float32(0.25)
	init := make([]float32, n)
	init[n/2], init[n/4] = 1000, 250
	want := heatCPU(init, r, steps)

	cur, next, step := alloc[float32](t, e.ctx, n), alloc[float32](t, e.ctx, n), alloc[int32](t, e.ctx, 1)
	g, err := New(e.ctx)
	require.NoError(t, err)
	defer g.Close()
	loop, err := g.NewCondition(1, AssignDefault) // do-while: the body runs at least once
	require.NoError(t, err)
	assert.Same(t, g, loop.Graph())
	up := must[Node](t)(g.Memcpy(Device(cur), Slice(init)))
	zero := must[Node](t)(g.Memset(Device(step), 0, 4))
	w, body, err := g.After(up, zero).While(loop)
	require.NoError(t, err)
	k1 := must[Node](t)(body.KernelWith(fns["heat_step"], cfg(n), cur, next, r, int32(n)))
	k2 := must[Node](t)(body.After(k1).KernelWith(fns["copy_f"], cfg(n), next, cur, int32(n)))
	_, err = body.After(k2).KernelWith(fns["loop_tail"], one, step, int32(steps), loop.Handle())
	require.NoError(t, err)
	out, count := make([]float32, n), make([]int32, 1)
	_, err = g.After(w).Memcpy(Slice(out), Device(cur))
	require.NoError(t, err)
	_, err = g.After(w).Memcpy(Slice(count), Device(step))
	require.NoError(t, err)

	kind, err := w.Kind()
	require.NoError(t, err)
	assert.Equal(t, KindConditional, kind)
	bodyNodes, err := body.Nodes()
	require.NoError(t, err)
	assert.Len(t, bodyNodes, 3)
	rootNodes, err := g.Nodes()
	require.NoError(t, err)
	assert.Len(t, rootNodes, 5, "the body's nodes are not the root's")

	exe, err := g.Instantiate()
	require.NoError(t, err)
	defer exe.Close()
	for launch := 0; launch < 2; launch++ {
		clear(out)
		require.NoError(t, exe.Launch(s))
		require.NoError(t, s.Synchronize())
		assert.EqualValues(t, steps, count[0], "launch %d: iterations", launch)
		for i := range want {
			require.Equal(t, math.Float32bits(want[i]), math.Float32bits(out[i]), "launch %d: u[%d] = %v, CPU %v", launch, i, out[i], want[i])
		}
	}
	assert.NotEqual(t, init, out, "heat diffused")
}

// bisectCPU repeats the bisection kernels on the CPU.
func bisectCPU(lo, hi float32, iters int) (float32, float32) {
	for i := 0; i < iters; i++ {
		mid := float32(float32(lo+hi) * 0.5)
		if float32(float32(mid*mid)-2) > 0 {
			hi = mid
		} else {
			lo = mid
		}
	}
	return lo, hi
}

// Scenario: a bisection root finder for sqrt(2): a while loop whose body
// holds an if/else that a kernel steers. The bracket equals the CPU's bit
// for bit.
func TestIfElseBisection(t *testing.T) {
	e, s, fns := condSetup(t, versionIfElseSwitch)
	const iters = 40 // past float32's precision: the bracket stops moving
	st, iter := alloc[float32](t, e.ctx, 3), alloc[int32](t, e.ctx, 1)
	g, err := New(e.ctx)
	require.NoError(t, err)
	defer g.Close()
	loop, err := g.NewCondition(1, AssignDefault)
	require.NoError(t, err)
	side, err := g.NewCondition(0, 0) // set by bisect_mid before the if/else reads it
	require.NoError(t, err)
	init := []float32{1, 2, 0}
	up := must[Node](t)(g.Memcpy(Device(st), Slice(init)))
	zero := must[Node](t)(g.Memset(Device(iter), 0, 4))
	w, body, err := g.After(up, zero).While(loop)
	require.NoError(t, err)
	mid := must[Node](t)(body.KernelWith(fns["bisect_mid"], one, st, side.Handle()))
	ie, then, els, err := body.After(mid).IfElse(side)
	require.NoError(t, err)
	require.NotSame(t, then, els)
	_, err = then.KernelWith(fns["set_hi"], one, st)
	require.NoError(t, err)
	_, err = els.KernelWith(fns["set_lo"], one, st)
	require.NoError(t, err)
	_, err = body.After(ie).KernelWith(fns["loop_tail"], one, iter, int32(iters), loop.Handle())
	require.NoError(t, err)
	res, count := make([]float32, 3), make([]int32, 1)
	_, err = g.After(w).Memcpy(Slice(res), Device(st))
	require.NoError(t, err)
	_, err = g.After(w).Memcpy(Slice(count), Device(iter))
	require.NoError(t, err)

	exe, err := g.Instantiate()
	require.NoError(t, err)
	defer exe.Close()
	require.NoError(t, exe.Launch(s))
	require.NoError(t, s.Synchronize())
	lo, hi := bisectCPU(1, 2, iters)
	assert.EqualValues(t, iters, count[0])
	assert.Equal(t, math.Float32bits(lo), math.Float32bits(res[0]), "lo: GPU %v, CPU %v", res[0], lo)
	assert.Equal(t, math.Float32bits(hi), math.Float32bits(res[1]), "hi: GPU %v, CPU %v", res[1], hi)
	assert.InDelta(t, math.Sqrt2, float64(res[0]), 1e-6)
	assert.Less(t, float64(res[0])*float64(res[0]), 2.0)
	assert.Greater(t, float64(res[1])*float64(res[1]), 2.0)
}

// Scenario: a switch dispatches to one of three kernels by a value in
// device memory; a value past the last branch runs none.
func TestSwitchDispatch(t *testing.T) {
	e, s, fns := condSetup(t, versionIfElseSwitch)
	sel, x := alloc[int32](t, e.ctx, 1), alloc[int32](t, e.ctx, 1)
	g, err := New(e.ctx)
	require.NoError(t, err)
	defer g.Close()
	c, err := g.NewCondition(0, 0)
	require.NoError(t, err)
	pick := must[Node](t)(g.KernelWith(fns["set_from"], one, sel, c.Handle()))
	sw, branches, err := g.After(pick).Switch(c, 3)
	require.NoError(t, err)
	require.Len(t, branches, 3)
	for i, name := range []string{"branch_add", "branch_mul", "branch_neg"} {
		_, err := branches[i].KernelWith(fns[name], one, x)
		require.NoError(t, err)
	}
	deps, err := sw.Dependencies()
	require.NoError(t, err)
	assert.Equal(t, []Node{pick}, deps)
	exe, err := g.Instantiate()
	require.NoError(t, err)
	defer exe.Close()
	for _, c := range []struct{ sel, want int32 }{{0, 8}, {1, 21}, {2, -7}, {3, 7}, {1000, 7}, {2, -7}, {0, 8}} {
		require.NoError(t, sel.CopyFromHost(e.ctx.LegacyStream(), []int32{c.sel}))
		require.NoError(t, x.CopyFromHost(e.ctx.LegacyStream(), []int32{7}))
		require.NoError(t, exe.Launch(s))
		require.NoError(t, s.Synchronize())
		got := make([]int32, 1)
		require.NoError(t, x.CopyToHost(e.ctx.LegacyStream(), got))
		assert.Equal(t, c.want, got[0], "selector %d", c.sel)
	}
}

// Scenario: nested conditionals, three deep: an if (opened by a kernel)
// holding a while loop whose body holds an if that runs on even steps.
// Conditions made on body graphs belong to the top-level graph.
func TestNestedConditionals(t *testing.T) {
	e, s, fns := condSetup(t, versionIfWhile)
	const steps = 9
	gate, step, evens := alloc[int32](t, e.ctx, 1), alloc[int32](t, e.ctx, 1), alloc[int32](t, e.ctx, 1)
	g, err := New(e.ctx)
	require.NoError(t, err)
	defer g.Close()
	open, err := g.NewCondition(0, 0)
	require.NoError(t, err)
	z1 := must[Node](t)(g.Memset(Device(step), 0, 4))
	z2 := must[Node](t)(g.Memset(Device(evens), 0, 4))
	set := must[Node](t)(g.After(z1, z2).KernelWith(fns["set_from"], one, gate, open.Handle()))
	outer, outerBody, err := g.After(set).If(open)
	require.NoError(t, err)

	loop, err := outerBody.NewCondition(1, AssignDefault)
	require.NoError(t, err)
	assert.Same(t, g, loop.Graph(), "made in the top-level graph")
	_, loopBody, err := outerBody.While(loop)
	require.NoError(t, err)
	even, err := loopBody.NewCondition(0, 0)
	require.NoError(t, err)
	par := must[Node](t)(loopBody.KernelWith(fns["parity"], one, step, even.Handle()))
	inner, innerBody, err := loopBody.After(par).If(even)
	require.NoError(t, err)
	_, err = innerBody.KernelWith(fns["bump"], one, evens)
	require.NoError(t, err)
	_, err = loopBody.After(inner).KernelWith(fns["loop_tail"], one, step, int32(steps), loop.Handle())
	require.NoError(t, err)
	got := make([]int32, 2)
	c1 := must[Node](t)(g.After(outer).Memcpy(Slice(got[:1]), Device(step)))
	_, err = g.After(c1).Memcpy(Slice(got[1:]), Device(evens))
	require.NoError(t, err)

	exe, err := g.Instantiate()
	require.NoError(t, err)
	defer exe.Close()
	for _, c := range []struct{ gate, steps, evens int32 }{{1, steps, 5}, {0, 0, 0}, {1, steps, 5}} {
		require.NoError(t, gate.CopyFromHost(e.ctx.LegacyStream(), []int32{c.gate}))
		clear(got)
		require.NoError(t, exe.Launch(s))
		require.NoError(t, s.Synchronize())
		assert.Equal(t, []int32{c.steps, c.evens}, got, "gate %d: steps and even steps", c.gate)
	}
}

// A buffer that only a body's kernel names, dropped by its caller and
// collected, lives until the graph and its executable are gone; then it is
// released (counters and free device memory back to where they were).
func TestBodyOwnersSurviveGC(t *testing.T) {
	e, s, fns := condSetup(t, versionIfWhile)
	const n, iters = 16 << 20, 3 // 64 MiB of int32
	acc, step := alloc[int32](t, e.ctx, n), alloc[int32](t, e.ctx, 1)
	collect()
	free0 := memFree(t, e.ctx)
	st0 := lifetime.ReadStats()

	g, err := New(e.ctx)
	require.NoError(t, err)
	loop, err := g.NewCondition(1, AssignDefault)
	require.NoError(t, err)
	z1 := must[Node](t)(g.Memset(Device(step), 0, 4))
	z2 := must[Node](t)(g.Memset(Device(acc), 0, 4))
	w, body, err := g.After(z1, z2).While(loop)
	require.NoError(t, err)
	var last Node
	func() {
		tmp, err := driver.Alloc[int32](e.ctx, n) // only the body's kernels name it
		require.NoError(t, err)
		k := must[Node](t)(body.KernelWith(e.fn["fill"], cfg(n), tmp, int32(5), int32(n)))
		last = must[Node](t)(body.After(k).KernelWith(e.fn["addTo"], cfg(n), tmp, acc, int32(n)))
	}()
	_, err = body.After(last).KernelWith(fns["loop_tail"], one, step, int32(iters), loop.Handle())
	require.NoError(t, err)
	out := make([]int32, n)
	_, err = g.After(w).Memcpy(Slice(out), Device(acc))
	require.NoError(t, err)
	collect()
	assert.Less(t, memFree(t, e.ctx), free0-60<<20, "the body's node holds the 64 MiB")
	assert.Greater(t, lifetime.ReadStats().Live, st0.Live)

	exe, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, g.Close(), "the executable outlives its graph, bodies included")
	collect()
	require.NoError(t, exe.Launch(s))
	require.NoError(t, s.Synchronize())
	for _, i := range []int{0, 1, n / 2, n - 1} {
		require.Equal(t, int32(iters*(5+i)), out[i], "acc[%d]", i)
	}
	_, err = body.Empty()
	assert.ErrorIs(t, err, driver.ErrClosed, "a body stops working with its top-level graph")
	require.NoError(t, exe.Close())
	eventually(t, func() bool {
		st := lifetime.ReadStats()
		return st.Live <= st0.Live && st.Pinned <= st0.Pinned && st.Objects <= st0.Objects && st.Tables <= st0.Tables
	}, "body owners released")
	assert.GreaterOrEqual(t, memFree(t, e.ctx), free0-(2<<20), "the body's buffer is freed")
}
