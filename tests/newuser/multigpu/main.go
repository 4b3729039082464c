// Command multigpu is a new user's tour of purecuda's "Several GPUs and
// machines" features, written from the README and go doc alone: peer
// copies, NCCL collectives in one process, a captured all-reduce replayed
// from a graph, refused misuse, two processes joined over TCP, and memory
// before and after. Every result is compared with values computed here.
//
// It prints "ok  <what>", "FAIL <what>: <why>" or "skip <what>: <why>"
// per check and exits 1 if any check failed. It re-executes itself (with
// NEWUSER_RANK1_ADDR set) to act as the second process.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/lifetime"
	"github.com/purecuda/cuda/nccl"
	"github.com/purecuda/cuda/nvrtc"
)

// addto adds x into acc, element by element.
const kernelSrc = `
extern "C" __global__ void addto(int *acc, const int *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) acc[i] += x[i];
}`

const rank1Env = "NEWUSER_RANK1_ADDR" // set in the second process: where rank 0 serves the ID

var (
	failed  bool
	who     string      // "[rank 1] " in the second process
	closers []io.Closer // everything made, closed last-first at the end
)

func report(what string, err error) bool {
	if err != nil {
		failed = true
		fmt.Printf("FAIL %s%s: %v\n", who, what, err)
		return false
	}
	fmt.Printf("ok  %s%s\n", who, what)
	return true
}

func skip(what, why string) { fmt.Printf("skip %s%s: %s\n", who, what, why) }

// expectErr checks that a misuse was refused, with an error matching want
// (when want is not nil), and prints the error text.
func expectErr(what string, err, want error) {
	switch {
	case err == nil:
		report(what, errors.New("no error"))
	case want != nil && !errors.Is(err, want):
		report(what, fmt.Errorf("error does not match %q: %v", want, err))
	default:
		report(what+" -> "+err.Error(), nil)
	}
}

// keep remembers c for the final Close.
func keep[C io.Closer](c C, err error) (C, error) {
	if err == nil {
		closers = append(closers, c)
	}
	return c, err
}

// allocs keeps the first error of a series of allocations.
type allocs struct{ err error }

func upload[T any](a *allocs, s *driver.Stream, v []T) (b *driver.Buffer[T]) {
	if a.err == nil {
		b, a.err = keep(driver.AllocCopy(s, v))
	}
	return b
}

func zeros[T any](a *allocs, s *driver.Stream, n int) (b *driver.Buffer[T]) {
	if a.err == nil {
		b, a.err = keep(driver.AllocZeroed[T](s, n))
	}
	return b
}

// sumOver is f(0) + ... + f(w-1).
func sumOver[T int32 | float32](w int, f func(r int) T) (v T) {
	for r := range w {
		v += f(r)
	}
	return v
}

func fill[T any](n int, f func(i int) T) []T {
	v := make([]T, n)
	for i := range v {
		v[i] = f(i)
	}
	return v
}

// compare copies b to the host on s and compares it with want, element by element.
func compare[T comparable](s *driver.Stream, b *driver.Buffer[T], want []T) error {
	got, err := b.ToHost(s)
	if err != nil {
		return err
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d elements, want %d", len(got), len(want))
	}
	bad := 0
	for i := range got {
		if got[i] != want[i] {
			if bad++; bad == 1 {
				err = fmt.Errorf("first wrong [%d] = %v, want %v", i, got[i], want[i])
			}
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d elements wrong; %w", bad, len(got), err)
	}
	return nil
}

func main() {
	os.Setenv("NCCL_NVLS_ENABLE", "0") // before any NCCL call
	// Never hang for good, whatever happens below.
	time.AfterFunc(5*time.Minute, func() { fmt.Println("FAIL watchdog: still running after 5 minutes"); os.Exit(1) })
	if addr := os.Getenv(rank1Env); addr != "" {
		secondProcess(addr)
		return
	}
	firstProcess()
}

func firstProcess() {
	count, err := driver.DeviceCount()
	if err != nil || count == 0 {
		report("list devices", fmt.Errorf("no usable GPU (count %d): %v", count, err))
		os.Exit(1)
	}
	var names []string
	for i := range count {
		dev, err := driver.DeviceByOrdinal(i)
		if err != nil {
			report("list devices", err)
			os.Exit(1)
		}
		name, _ := dev.Name()
		mem, _ := dev.TotalMemory()
		names = append(names, fmt.Sprintf("%d: %s %s %.1f GiB", i, name, dev.Arch(), float64(mem)/(1<<30)))
	}
	report(fmt.Sprintf("list devices: %d (%s)", count, strings.Join(names, "; ")), nil)

	// A primary context, stream and kernel per GPU; a second handle of each
	// primary context (probe) stays open to read free memory at the end.
	ctxs, streams := make([]*driver.Context, count), make([]*driver.Stream, count)
	fns, probes := make([]*driver.Function, count), make([]*driver.Context, count)
	freeBefore := make([]int, count)
	for i := range count {
		dev, _ := driver.DeviceByOrdinal(i)
		if probes[i], err = dev.PrimaryContext(); err == nil {
			freeBefore[i], _, err = probes[i].MemGetInfo()
		}
		if err == nil {
			ctxs[i], streams[i], fns[i], err = setup(i)
		}
		if !report(fmt.Sprintf("GPU %d: MemGetInfo, context, stream, NVRTC kernel", i), err) {
			os.Exit(1)
		}
	}

	if count < 2 {
		for _, what := range []string{"peer copies", "nccl InitAll and collectives", "graph capture of all-reduce", "misuse checks", "two processes"} {
			skip(what, "needs 2 GPUs, 1 visible")
		}
	} else {
		peerCopies(ctxs, streams, fns)
		multiGPUNCCL(ctxs, streams, fns)
		twoProcesses()
	}

	closeEverything()
	lifetime.Flush() // wait for the frees that Close handed over
	for i, p := range probes {
		free, _, err := p.MemGetInfo()
		report(fmt.Sprintf("memory GPU %d: free before %d MiB, after %d MiB, difference %+d MiB (reported, not checked)",
			i, freeBefore[i]>>20, free>>20, (free-freeBefore[i])>>20), errors.Join(err, p.Close()))
	}
	report("no late release errors (lifetime.Errors)", errors.Join(lifetime.Errors()...))
	if failed {
		os.Exit(1)
	}
}

// setup opens GPU i's primary context, a stream and the addto kernel.
func setup(i int) (ctx *driver.Context, s *driver.Stream, fn *driver.Function, err error) {
	dev, err := driver.DeviceByOrdinal(i)
	if err != nil {
		return
	}
	if ctx, err = keep(dev.PrimaryContext()); err != nil {
		return
	}
	if s, err = keep(ctx.NewStream(driver.StreamNonBlocking)); err != nil {
		return
	}
	mod, _, err := ctx.CompileModule(kernelSrc, nvrtc.Options{}) // for this device's sm_XX
	if _, err = keep(mod, err); err != nil {
		return
	}
	fn, err = mod.Function("addto")
	return
}

// steps runs fs in order and returns the first error.
func steps(fs ...func() error) error {
	for _, f := range fs {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

func closeEverything() {
	var errs []error
	for i := len(closers) - 1; i >= 0; i-- {
		errs = append(errs, closers[i].Close())
	}
	report(fmt.Sprintf("Close everything (%d objects)", len(closers)), errors.Join(errs...))
	closers = nil
}

// peerCopies copies GPU 0 -> GPU 1 -> GPU 0 without and then with peer access.
func peerCopies(ctxs []*driver.Context, ss []*driver.Stream, fns []*driver.Function) {
	d0, d1 := ctxs[0].Device(), ctxs[1].Device()
	can01, err0 := d0.CanAccessPeer(d1)
	can10, err1 := d1.CanAccessPeer(d0)
	report(fmt.Sprintf("peer: CanAccessPeer 0->1 %v, 1->0 %v", can01, can10), errors.Join(err0, err1))
	const n = 1 << 20
	copies := func(mode string) {
		check := func(what string, s *driver.Stream, dst *driver.Buffer[int32], want []int32, copy func() error) {
			report("peer "+mode+": "+what, steps(copy, s.Synchronize, func() error { return compare(s, dst, want) }))
		}
		var a allocs
		src := fill(n, func(i int) int32 { return int32(7*i + 1) })
		a0 := upload(&a, ss[0], src)
		b1 := zeros[int32](&a, ss[1], n)
		c0 := zeros[int32](&a, ss[0], n)
		if !report("peer "+mode+": allocate", a.err) {
			return
		}
		// Synchronous, on a stream of the source's context each way.
		check("CopyFrom GPU0 -> GPU1 (stream of GPU 0)", ss[1], b1, src, func() error { return b1.CopyFrom(ss[0], a0) })
		check("CopyFrom GPU1 -> GPU0 (stream of GPU 1)", ss[0], c0, src, func() error { return c0.CopyFrom(ss[1], b1) })
		// Stream-ordered, on a stream of the destination's: new values, destinations reset.
		src2 := fill(n, func(i int) int32 { return int32(3*i - 5) })
		err := errors.Join(a0.CopyFromHost(ss[0], src2), b1.Memset32(ss[1], 0xffffffff), c0.Memset32(ss[0], 0xffffffff))
		if !report("peer "+mode+": refill source, reset destinations", err) {
			return
		}
		check("CopyFromAsync GPU0 -> GPU1 (stream of GPU 1)", ss[1], b1, src2, func() error { return b1.CopyFromAsync(ss[1], a0) })
		check("CopyFromAsync GPU1 -> GPU0 (stream of GPU 0)", ss[0], c0, src2, func() error { return c0.CopyFromAsync(ss[0], b1) })
	}
	copies("without peer access")
	if !can01 || !can10 {
		skip("peer with peer access", "CanAccessPeer says no")
		return
	}
	if !report("peer: EnablePeerAccess both ways", errors.Join(ctxs[0].EnablePeerAccess(ctxs[1]), ctxs[1].EnablePeerAccess(ctxs[0]))) {
		return
	}
	copies("with peer access")
	// With peer access a kernel on GPU 1 may read a buffer of GPU 0.
	var a allocs
	x := fill(n, func(i int) int32 { return int32(i ^ 0x5a5a) })
	x0 := upload(&a, ss[0], x)
	acc1 := zeros[int32](&a, ss[1], n)
	err := steps(func() error { return a.err },
		func() error {
			return ss[1].Launch(fns[1], driver.Grid((n+255)/256), driver.Block(256), acc1, x0, int32(n))
		},
		func() error { return compare(ss[1], acc1, x) })
	report("peer: kernel on GPU 1 reads a GPU 0 buffer through peer access", err)
	report("peer: DisablePeerAccess both ways", errors.Join(ctxs[0].DisablePeerAccess(ctxs[1]), ctxs[1].DisablePeerAccess(ctxs[0])))
}

// multiGPUNCCL makes one communicator per GPU in this process and runs
// the collectives, the captured graph and the misuse checks.
func multiGPUNCCL(ctxs []*driver.Context, ss []*driver.Stream, fns []*driver.Function) {
	major, minor, patch, err := nccl.Version()
	if !report(fmt.Sprintf("nccl: Version %d.%d.%d", major, minor, patch), err) {
		return
	}
	comms, err := nccl.InitAll(ctxs...)
	if !report(fmt.Sprintf("nccl: InitAll over %d GPUs", len(ctxs)), err) {
		return
	}
	for _, c := range comms {
		closers = append(closers, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	collectives(ctx, comms, ss)
	captureReplay(ctx, "one process", comms, ss, fns)
	misuse(ctx, comms, ctxs, ss)
}

func collectives(ctx context.Context, comms []*nccl.Comm, ss []*driver.Stream) {
	W := len(comms)
	const n, m = 1 << 20, 4096
	f32 := func(r, i int) float32 { return float32((r + 1) * (i % 1000)) } // small integers: sums are exact
	i32 := func(r, i int) int32 { return int32((r+1)*i - 3*r) }
	bcast := func(i int) int32 { return int32(1000000 + i) }
	gath := func(r, i int) int32 { return int32(r*100000 + i) }
	scat := func(r, i int) int32 { return int32((r + 1) * i) }
	sent := func(r, i int) int32 { return int32(-(r + 1) * i) }
	type bufs struct {
		f, fo                            *driver.Buffer[float32]
		i, io, bc, bco, ag, ago, rs, rso *driver.Buffer[int32]
		snd, rcv                         *driver.Buffer[int32]
	}
	var a allocs
	b := make([]bufs, W)
	for r := range W {
		s := ss[r]
		b[r].f = upload(&a, s, fill(n, func(i int) float32 { return f32(r, i) }))
		b[r].fo = zeros[float32](&a, s, n)
		b[r].i = upload(&a, s, fill(n, func(i int) int32 { return i32(r, i) }))
		b[r].io = zeros[int32](&a, s, n)
		if r == 0 { // only the root has a send buffer; the others pass nil
			b[r].bc = upload(&a, s, fill(m, bcast))
		}
		b[r].bco = zeros[int32](&a, s, m)
		b[r].ag = upload(&a, s, fill(m, func(i int) int32 { return gath(r, i) }))
		b[r].ago = zeros[int32](&a, s, W*m)
		b[r].rs = upload(&a, s, fill(W*m, func(i int) int32 { return scat(r, i) }))
		b[r].rso = zeros[int32](&a, s, m)
		b[r].snd = upload(&a, s, fill(m, func(i int) int32 { return sent(r, i) }))
		b[r].rcv = zeros[int32](&a, s, m)
	}
	if !report("nccl: allocate buffers", a.err) {
		return
	}
	err := nccl.Group(func() error {
		var errs []error
		for r, c := range comms {
			s := ss[r]
			errs = append(errs,
				nccl.AllReduce(c, s, b[r].f, b[r].fo, nccl.Sum),
				nccl.AllReduce(c, s, b[r].i, b[r].io, nccl.Sum),
				nccl.Broadcast(c, s, b[r].bc, b[r].bco, 0),
				nccl.AllGather(c, s, b[r].ag, b[r].ago),
				nccl.ReduceScatter(c, s, b[r].rs, b[r].rso, nccl.Sum))
			if r < 2 { // ranks 0 and 1 swap buffers
				errs = append(errs, nccl.Send(c, s, b[r].snd, 1-r), nccl.Recv(c, s, b[r].rcv, 1-r))
			}
		}
		return errors.Join(errs...)
	})
	if !report("nccl: queue AllReduce(f32, i32), Broadcast, AllGather, ReduceScatter, Send/Recv in one Group", err) {
		return
	}
	for r, c := range comms {
		if !report(fmt.Sprintf("nccl: Wait rank %d", r), c.Wait(ctx, ss[r])) {
			return
		}
	}
	for r := range W {
		s := ss[r]
		wantF := fill(n, func(i int) float32 { return sumOver(W, func(q int) float32 { return f32(q, i) }) })
		wantI := fill(n, func(i int) int32 { return sumOver(W, func(q int) int32 { return i32(q, i) }) })
		wantRS := fill(m, func(j int) int32 { return sumOver(W, func(q int) int32 { return scat(q, r*m+j) }) })
		report(fmt.Sprintf("nccl rank %d: AllReduce float32 sum", r), compare(s, b[r].fo, wantF))
		report(fmt.Sprintf("nccl rank %d: AllReduce int32 sum", r), compare(s, b[r].io, wantI))
		report(fmt.Sprintf("nccl rank %d: Broadcast from rank 0", r), compare(s, b[r].bco, fill(m, bcast)))
		report(fmt.Sprintf("nccl rank %d: AllGather", r), compare(s, b[r].ago, fill(W*m, func(i int) int32 { return gath(i/m, i%m) })))
		report(fmt.Sprintf("nccl rank %d: ReduceScatter sum", r), compare(s, b[r].rso, wantRS))
		if r < 2 {
			report(fmt.Sprintf("nccl rank %d: Recv from rank %d", r, 1-r), compare(s, b[r].rcv, fill(m, func(i int) int32 { return sent(1-r, i) })))
		}
	}
}

// captureReplay captures, on each local rank's stream, an all-reduce of x
// into y followed by addto(acc, y), replays the graphs 100 times and
// checks acc = 100 * the sum over ranks of x.
func captureReplay(ctx context.Context, label string, comms []*nccl.Comm, ss []*driver.Stream, fns []*driver.Function) {
	const n, replays = 1 << 16, 100
	val := func(r, i int) int32 { return int32((r+1)*(i%1000) + r) }
	var a allocs
	xs, ys, accs := make([]*driver.Buffer[int32], len(comms)), make([]*driver.Buffer[int32], len(comms)), make([]*driver.Buffer[int32], len(comms))
	for k, c := range comms {
		xs[k] = upload(&a, ss[k], fill(n, func(i int) int32 { return val(c.Rank(), i) }))
		ys[k] = zeros[int32](&a, ss[k], n)
		accs[k] = zeros[int32](&a, ss[k], n)
	}
	if !report("capture "+label+": allocate", a.err) {
		return
	}
	// Begin every capture before the Group and end them after (nccl.Group's doc).
	caps := make([]*graph.StreamCapture, len(comms))
	for k := range comms {
		var err error
		if caps[k], err = graph.BeginCapture(ss[k], graph.CaptureRelaxed); !report(fmt.Sprintf("capture %s: BeginCapture rank %d", label, comms[k].Rank()), err) {
			return
		}
		defer caps[k].Abort()
	}
	err := nccl.Group(func() error {
		var errs []error
		for k, c := range comms {
			errs = append(errs, nccl.AllReduce(c, ss[k], xs[k], ys[k], nccl.Sum))
		}
		return errors.Join(errs...)
	})
	for k := range comms {
		if err == nil {
			err = ss[k].Launch(fns[k], driver.Grid(n/256), driver.Block(256), accs[k], ys[k], int32(n))
		}
	}
	if !report("capture "+label+": AllReduce + kernel queued while capturing", err) {
		return
	}
	exes := make([]*graph.Exec, len(comms))
	for k := range comms {
		g, err := caps[k].End()
		if err == nil {
			exes[k], err = keep(g.Instantiate())
			err = errors.Join(err, g.Close()) // the executable keeps what it needs
		}
		if !report(fmt.Sprintf("capture %s: End and Instantiate rank %d", label, comms[k].Rank()), err) {
			return
		}
	}
	for range replays {
		for k := range comms { // every rank's graph, each time, so the collectives meet
			if err == nil {
				err = exes[k].Launch(ss[k])
			}
		}
	}
	for k, c := range comms {
		err = errors.Join(err, c.Wait(ctx, ss[k]))
	}
	if !report(fmt.Sprintf("capture %s: %d replays launched and finished", label, replays), err) {
		return
	}
	world := comms[0].Size()
	want := fill(n, func(i int) int32 { return replays * sumOver(world, func(r int) int32 { return val(r, i) }) })
	for k, c := range comms {
		report(fmt.Sprintf("capture %s rank %d: acc = %d x all-reduced sum", label, c.Rank(), replays), compare(ss[k], accs[k], want))
	}
}

// misuse makes mistakes a new user might make; each must be refused with an error.
func misuse(ctx context.Context, comms []*nccl.Comm, ctxs []*driver.Context, ss []*driver.Stream) {
	var a allocs
	x0 := upload(&a, ss[0], fill(1024, func(i int) float32 { return float32(i) }))
	short0 := zeros[float32](&a, ss[0], 512)
	x1 := upload(&a, ss[1], fill(1024, func(i int) float32 { return float32(i) }))
	if !report("misuse: allocate", a.err) {
		return
	}
	expectErr("misuse: AllReduce send 1024, recv 512 elements", nccl.AllReduce(comms[0], ss[0], x0, short0, nccl.Sum), nccl.ErrInvalidArgument)
	expectErr("misuse: AllReduce on GPU 0's comm with GPU 1's buffers", nccl.AllReduce(comms[0], ss[0], x1, x1, nccl.Sum), nccl.ErrInvalidArgument)
	expectErr("misuse: AllReduce on GPU 0's comm with GPU 1's stream", nccl.AllReduce(comms[0], ss[1], x0, x0, nccl.Sum), nccl.ErrInvalidArgument)
	expectErr("misuse: AllReduce with a nil stream", nccl.AllReduce(comms[0], nil, x0, x0, nccl.Sum), driver.ErrNilStream)
	expectErr("misuse: InitAll inside Group", nccl.Group(func() error {
		cs, err := nccl.InitAll(ctxs...)
		for _, c := range cs {
			c.Close()
		}
		return err
	}), nil)
	// Refused calls queue nothing: the communicator still works and its stream is idle.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err := errors.Join(comms[0].Err(), comms[0].Wait(wctx, ss[0]))
	if !report("misuse: communicator healthy and stream idle after the refused calls", err) {
		for _, c := range comms {
			c.Abort()
		}
	}
	// Close one rank alone (guarded: it must not wait for the other rank).
	done := make(chan error, 1)
	go func() { done <- comms[0].Close() }()
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		err = errors.New("closing rank 0 alone did not return within 20 s")
	}
	report("misuse: Close rank 0's communicator alone", err)
	expectErr("misuse: AllReduce on a closed communicator", nccl.AllReduce(comms[0], ss[0], x0, x0, nccl.Sum), driver.ErrClosed)
	for _, c := range comms[1:] {
		report(fmt.Sprintf("nccl: Close rank %d's communicator", c.Rank()), c.Close())
	}
}

// twoProcesses runs rank 0 here on GPU 0 and rank 1 in a child process on
// GPU 1, joined over TCP on 127.0.0.1 as examples/allreduce does.
func twoProcesses() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id, err := nccl.NewUniqueID()
	if !report("2 processes: NewUniqueID", err) {
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if !report("2 processes: listen on 127.0.0.1", err) {
		return
	}
	go func() { // serve the ID, as text and a newline, to rank 1
		defer ln.Close()
		if conn, err := ln.Accept(); err == nil {
			fmt.Fprintln(conn, id.String())
			conn.Close()
		}
	}()
	self, err := os.Executable()
	if !report("2 processes: find own executable", err) {
		return
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), rank1Env+"="+ln.Addr().String())
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if !report("2 processes: start rank 1", cmd.Start()) {
		return
	}
	oneRank(ctx, 0, id)
	report("2 processes: rank 1 exited 0 (its own lines are above)", cmd.Wait())
}

func secondProcess(addr string) {
	who = "[rank 1] "
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Rank 0 listens before it starts this process: one dial is enough.
	var id nccl.UniqueID
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err == nil {
		var line string
		line, err = bufio.NewReader(conn).ReadString('\n')
		err = errors.Join(err, conn.Close(), id.UnmarshalText([]byte(line)))
	}
	if report("2 processes: fetch the UniqueID from rank 0 over TCP", err) {
		oneRank(ctx, 1, id)
	}
	closeEverything()
	if failed {
		os.Exit(1)
	}
}

// oneRank is one process's rank of a 2-rank communicator, on GPU rank.
func oneRank(ctx context.Context, rank int, id nccl.UniqueID) {
	const world, n = 2, 1 << 20
	dctx, s, fn, err := setup(rank)
	if !report(fmt.Sprintf("2 processes: GPU %d context, stream, kernel", rank), err) {
		return
	}
	// NonBlocking, so that InitRank gives up when ctx ends instead of waiting for good.
	comm, err := keep(nccl.InitRank(ctx, dctx, id, world, rank, &nccl.Config{NonBlocking: true}))
	if !report(fmt.Sprintf("2 processes: InitRank rank %d of %d", rank, world), err) {
		return
	}
	var a allocs
	buf := upload(&a, s, fill(n, func(i int) float32 { return float32((rank + 1) * (i % 4096)) }))
	err = steps(func() error { return a.err },
		func() error { return nccl.AllReduce(comm, s, buf, buf, nccl.Sum) }, // in place
		func() error { return comm.Wait(ctx, s) },
		func() error { return compare(s, buf, fill(n, func(i int) float32 { return float32(3 * (i % 4096)) })) })
	report(fmt.Sprintf("2 processes: rank %d in-place AllReduce of %d float32", rank, n), err)
	captureReplay(ctx, "2 processes", []*nccl.Comm{comm}, []*driver.Stream{s}, []*driver.Function{fn})
}
