package main

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
)

// graphN is the number of elements the graph steps copy and compute.
const graphN = 1<<16 + 5

// graphReplays is how often the graph step replays its executable.
const graphReplays = 100

// stepGraph builds an explicit graph, memcpy(HtoD) → axpb → memcpy(DtoH) →
// host callback, instantiates it once and replays it graphReplays times on
// one stream, then checks every element and the callback's count.
func stepGraph(st *state) (summary string, err error) {
	ctx := st.ctx
	mod, err := ctx.LoadModule(st.res.Image())
	if err != nil {
		return "", err
	}
	defer closeKeep(&err, mod)
	fn, err := mod.Function("axpb")
	if err != nil {
		return "", err
	}
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	if err != nil {
		return "", err
	}
	defer closeKeep(&err, s)
	g, err := graph.New(ctx)
	if err != nil {
		return "", err
	}
	defer closeKeep(&err, g)

	in := make([]int32, graphN)
	for i := range in {
		in[i] = int32(i*7 - 3)
	}
	out := make([]int32, graphN)
	dIn, err := driver.Alloc[int32](ctx, graphN)
	if err != nil {
		return "", err
	}
	defer closeKeep(&err, dIn)
	dOut, err := driver.Alloc[int32](ctx, graphN)
	if err != nil {
		return "", err
	}
	defer closeKeep(&err, dOut)
	const a, b, block = 5, 11, 256
	grid := driver.Grid((graphN + block - 1) / block)
	var calls atomic.Int64
	up, err := g.Memcpy(graph.Device(dIn), graph.Slice(in))
	if err != nil {
		return "", err
	}
	k, err := g.After(up).Kernel(fn, grid, driver.Block(block), dOut, dIn, int32(a), int32(b), uint32(graphN))
	if err != nil {
		return "", err
	}
	down, err := g.After(k).Memcpy(graph.Slice(out), graph.Device(dOut))
	if err != nil {
		return "", err
	}
	if _, err := g.After(down).HostFunc(func() { calls.Add(1) }); err != nil {
		return "", err
	}
	exe, err := g.Instantiate()
	if err != nil {
		return "", err
	}
	defer closeKeep(&err, exe)
	for i := 0; i < graphReplays; i++ {
		if err := exe.Launch(s); err != nil {
			return "", err
		}
	}
	if err := syncWithin(s, 30*time.Second); err != nil {
		return "", err
	}
	if err := exe.Err(); err != nil {
		return "", err
	}
	if n := calls.Load(); n != graphReplays {
		return "", fmt.Errorf("the host callback ran %d times, want %d", n, graphReplays)
	}
	if err := checkAxpb(out, in, a, b); err != nil {
		return "", err
	}
	return fmt.Sprintf("memcpy → axpb → memcpy → host callback, replayed %d times: every result exact, callback ran %d times", graphReplays, graphReplays), nil
}

// stepGraphLifetime adds a kernel node whose buffers are named only by the
// graph: their Go owners are dropped and collected before the graph runs,
// and the result must still be exact.
func stepGraphLifetime(st *state) (summary string, err error) {
	ctx := st.ctx
	mod, err := ctx.LoadModule(st.res.Image())
	if err != nil {
		return "", err
	}
	fn, err := mod.Function("axpb")
	if err != nil {
		_ = mod.Close()
		return "", err
	}
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	if err != nil {
		_ = mod.Close()
		return "", err
	}
	defer closeKeep(&err, s)
	g, err := graph.New(ctx)
	if err != nil {
		_ = mod.Close()
		return "", err
	}
	defer closeKeep(&err, g)
	in := make([]int32, graphN)
	for i := range in {
		in[i] = int32(graphN - i)
	}
	out := make([]int32, graphN)
	const a, b, block = -2, 9, 256
	// The buffers and the module live only in this function; the graph
	// holds them from here on.
	if err := func() error {
		dIn, err := driver.AllocCopy(ctx.LegacyStream(), in)
		if err != nil {
			return err
		}
		dOut, err := driver.Alloc[int32](ctx, graphN)
		if err != nil {
			return err
		}
		grid := driver.Grid((graphN + block - 1) / block)
		k, err := g.Kernel(fn, grid, driver.Block(block), dOut, dIn, int32(a), int32(b), uint32(graphN))
		if err != nil {
			return err
		}
		_, err = g.After(k).Memcpy(graph.Slice(out), graph.Device(dOut))
		return err
	}(); err != nil {
		_ = mod.Close()
		return "", err
	}
	if err := mod.Close(); err != nil { // the kernel node keeps the module loaded
		return "", err
	}
	for i := 0; i < 3; i++ {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	exe, err := g.Instantiate()
	if err != nil {
		return "", err
	}
	defer closeKeep(&err, exe)
	if err := exe.Launch(s); err != nil {
		return "", err
	}
	if err := syncWithin(s, 30*time.Second); err != nil {
		return "", err
	}
	if err := checkAxpb(out, in, a, b); err != nil {
		return "", err
	}
	return "buffers and module dropped and collected before launch: the graph kept them, every result exact", nil
}

// closeKeep closes c and stores its error in *err unless one is there.
func closeKeep(err *error, c interface{ Close() error }) {
	if cerr := c.Close(); *err == nil && cerr != nil {
		*err = cerr
	}
}

// syncWithin waits for s, at most d.
func syncWithin(s *driver.Stream, d time.Duration) error {
	wait, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := s.SynchronizeContext(wait); err != nil {
		return fmt.Errorf("waiting for the graph: %w", err)
	}
	return nil
}

// checkAxpb checks out[i] == a*in[i]+b for every i.
func checkAxpb(out, in []int32, a, b int32) error {
	wrong, first := 0, -1
	for i, v := range out {
		if v != a*in[i]+b {
			if first < 0 {
				first = i
			}
			wrong++
		}
	}
	if wrong > 0 {
		return fmt.Errorf("%d of %d results wrong; the first at [%d]: got %d, want %d", wrong, len(out), first, out[first], a*in[first]+b)
	}
	return nil
}
