//go:build linux

package fakedriver_test

// The Close stress: 64 goroutines race Close against every
// method of every driver type, round after round, against fakecuda, which
// counts every call that names a destroyed handle or freed memory. Nothing
// may panic, every error must be one the call may give (ErrClosed above
// all), fakecuda must see no bad use, and once everything is closed and
// the release queue flushed, every live counter of fakecuda and of package
// lifetime is back where it started.
//
// PURECUDA_STRESS_DURATION sets how long it runs (a Go duration; default
// 10s, 2s with -short). TestStressCoversEveryMethod keeps the table of
// operations complete: a method added to a driver type fails it until the
// stress calls it (stress_ops_test.go).

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

const stressN = 64 // elements in every buffer of the stress

// stressWorld is one round's objects. Every field is closed at some point
// of the round, by a goroutine, while the others use it.
type stressWorld struct {
	dev           *driver.Device
	ctx           *driver.Context
	s, s2, legacy *driver.Stream
	ev, ev2       *driver.Event
	buf, buf2     *driver.Buffer[int32]
	abuf, pbuf    *driver.Buffer[int32] // AllocAsync on s, AllocFromPool on s2
	mbuf, view    *driver.Buffer[int32] // AllocManaged, buf.Slice
	hb            *driver.HostBuffer[int32]
	reg           *driver.Registered[int32]
	pool          *driver.MemPool
	mod           *driver.Module
	fill, empty   *driver.Function
	lib           *driver.Library
	lfill         *driver.Function
	args, largs   *driver.Args
	// A second context (created when ctx is the primary one, and the
	// other way round), for copies between contexts: a stream, its
	// legacy stream, a buffer, a stream-ordered one and a view.
	pctx               *driver.Context
	xs, xlegacy        *driver.Stream
	xbuf, xabuf, xview *driver.Buffer[int32]
	// Sharing between processes, within this one: an exportable pool, a
	// buffer of it (exported as eexp) and an interprocess event (its
	// handle ievh), which the round does not close (the exporter keeps
	// them until the importers are done: closeAll closes them last); the
	// pool imported, a buffer imported from it and the event opened.
	epool, ipool *driver.MemPool
	ebuf, ibuf   *driver.Buffer[int32]
	eexp         driver.BufferExport
	iev, oev     *driver.Event
	ievh         driver.IPCEventHandle
	hostCalls    *atomic.Int64
	closers      []func() error
	closerNames  []string
}

type unsafePointer = unsafe.Pointer

// newStressWorld makes the objects of a round; primary picks a
// PrimaryContext handle (shared with the fixture's) or a created context.
func newStressWorld(t *testing.T, dev *driver.Device, primary bool, hostCalls *atomic.Int64) *stressWorld {
	t.Helper()
	w := &stressWorld{dev: dev, hostCalls: hostCalls}
	var err error
	if primary {
		w.ctx, err = dev.PrimaryContext()
	} else {
		w.ctx, err = dev.NewContext(driver.ContextSchedAuto)
	}
	require.NoError(t, err)
	must := func(err error) { t.Helper(); require.NoError(t, err) }
	w.s, err = w.ctx.NewStream(driver.StreamNonBlocking)
	must(err)
	w.s2, err = w.ctx.NewStreamWithPriority(driver.StreamDefault, 0)
	must(err)
	w.legacy = w.ctx.LegacyStream()
	w.ev, err = w.ctx.NewEvent(driver.EventDefault)
	must(err)
	w.ev2, err = w.ctx.NewEvent(driver.EventDisableTiming)
	must(err)
	w.buf, err = driver.Alloc[int32](w.ctx, stressN)
	must(err)
	w.buf2, err = driver.AllocZeroed[int32](w.ctx.LegacyStream(), stressN)
	must(err)
	w.abuf, err = driver.AllocAsync[int32](w.s, stressN)
	must(err)
	w.pool, err = w.ctx.NewMemPool()
	must(err)
	w.pbuf, err = driver.AllocFromPool[int32](w.s2, w.pool, stressN)
	must(err)
	w.mbuf, err = driver.AllocManaged[int32](w.ctx, stressN)
	must(err)
	w.view, err = w.buf.Slice(stressN/4, stressN/2)
	must(err)
	w.hb, err = driver.AllocHost[int32](w.ctx, stressN, driver.HostAllocDefault)
	must(err)
	w.reg, err = driver.RegisterHost(w.ctx, make([]int32, stressN))
	must(err)
	w.mod, err = w.ctx.LoadModule([]byte("FAKE module"))
	must(err)
	w.fill, err = w.mod.Function("fill")
	must(err)
	w.empty, err = w.mod.Function("empty")
	must(err)
	w.lib, err = driver.LoadLibrary([]byte("FAKE library"))
	must(err)
	w.lfill, err = w.lib.Function("fill")
	must(err)
	w.args, err = w.fill.NewArgs(w.buf, int32(1), int32(stressN))
	must(err)
	w.largs, err = w.lfill.NewArgs(w.abuf, int32(2), int32(stressN))
	must(err)
	if primary {
		w.pctx, err = dev.NewContext(driver.ContextSchedAuto)
	} else {
		w.pctx, err = dev.PrimaryContext()
	}
	must(err)
	w.xs, err = w.pctx.NewStream(driver.StreamNonBlocking)
	must(err)
	w.xlegacy = w.pctx.LegacyStream()
	w.xbuf, err = driver.AllocZeroed[int32](w.xs, stressN)
	must(err)
	w.xabuf, err = driver.AllocAsync[int32](w.xs, stressN)
	must(err)
	w.xview, err = w.xbuf.Slice(stressN/4, stressN/2)
	must(err)
	w.epool, err = w.ctx.NewExportableMemPool()
	must(err)
	w.ebuf, err = driver.AllocFromPool[int32](w.s2, w.epool, stressN)
	must(err)
	w.eexp, err = driver.ExportBuffer(w.ebuf)
	must(err)
	file, err := w.epool.ExportFD()
	must(err)
	w.ipool, err = w.ctx.ImportMemPool(file)
	must(err)
	must(file.Close())
	must(w.s2.Synchronize()) // the allocation is done before the import is used
	w.ibuf, err = driver.ImportBuffer[int32](w.ipool, w.eexp)
	must(err)
	w.iev, err = w.ctx.NewEvent(driver.EventInterprocess | driver.EventDisableTiming)
	must(err)
	w.ievh, err = w.iev.IPCHandle()
	must(err)
	w.oev, err = w.ctx.OpenIPCEvent(w.ievh)
	must(err)
	add := func(name string, c func() error) {
		w.closers = append(w.closers, c)
		w.closerNames = append(w.closerNames, name)
	}
	add("Context.Close", w.ctx.Close)
	add("Stream.Close", w.s.Close)
	add("Stream.Close (s2)", w.s2.Close)
	add("Stream.Close (legacy)", w.legacy.Close)
	add("Event.Close", w.ev.Close)
	add("Event.Close (ev2)", w.ev2.Close)
	add("Buffer.Close", w.buf.Close)
	add("Buffer.Close (buf2)", w.buf2.Close)
	add("Buffer.Close (async)", w.abuf.Close)
	add("Buffer.Close (pool)", w.pbuf.Close)
	add("Buffer.Close (managed)", w.mbuf.Close)
	add("Buffer.Close (view)", w.view.Close)
	add("HostBuffer.Close", w.hb.Close)
	add("Registered.Close", w.reg.Close)
	add("MemPool.Close", w.pool.Close)
	add("Module.Close", w.mod.Close)
	add("Library.Close", w.lib.Close)
	add("Args.Close", w.args.Close)
	add("Args.Close (library)", w.largs.Close)
	add("Context.Close (peer)", w.pctx.Close)
	add("Stream.Close (peer)", w.xs.Close)
	add("Buffer.Close (peer)", w.xbuf.Close)
	add("Buffer.Close (peer, async)", w.xabuf.Close)
	add("Buffer.Close (peer view)", w.xview.Close)
	add("MemPool.Close (exportable)", w.epool.Close)
	add("MemPool.Close (imported)", w.ipool.Close)
	add("Buffer.Close (imported)", w.ibuf.Close)
	add("Event.Close (opened)", w.oev.Close)
	return w
}

// closeAll closes everything (Close is idempotent) and reports errors.
func (w *stressWorld) closeAll() error {
	var errs []error
	for i := len(w.closers) - 1; i >= 0; i-- {
		if err := w.closers[i](); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", w.closerNames[i], err))
		}
	}
	// The exporter's buffer and event go once every import of the buffer
	// is freed and every opening of the event closed (a Close of an
	// imported buffer frees it before it returns).
	lifetime.Flush()
	if err := w.ebuf.Close(); err != nil {
		errs = append(errs, fmt.Errorf("Buffer.Close (exported): %w", err))
	}
	if err := w.iev.Close(); err != nil {
		errs = append(errs, fmt.Errorf("Event.Close (interprocess): %w", err))
	}
	return errors.Join(errs...)
}

func stressDuration(t *testing.T) time.Duration {
	if s := os.Getenv("PURECUDA_STRESS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err, "PURECUDA_STRESS_DURATION")
		return d
	}
	if testing.Short() {
		return 2 * time.Second
	}
	return 10 * time.Second
}

// fakeLive are fakecuda's live-object counters the stress must leave as
// it found them.
var fakeLive = []string{"fake_live_allocations", "fake_live_contexts", "fake_live_modules", "fake_live_libraries",
	"fake_live_streams", "fake_live_events", "fake_live_pools", "fake_live_registrations", "fake_live_host_allocs",
	"fake_live_pool_imports", "fake_live_ipc_event_opens"}

// TestStressCloseRaces is the Close stress (see the top of the file).
func TestStressCloseRaces(t *testing.T) {
	f := ltSetup(t) // checks fakecuda's bad-use counters, pins and callbacks at the end
	dev := f.ctx.Device()
	total := stressDuration(t)
	lifetime.Flush()
	live := map[string]int64{}
	for _, c := range fakeLive {
		live[c] = fcall(t, c)
	}
	objects := lifetime.ReadStats().Objects
	ops := stressOps()

	const goroutines = 64
	roundLen := 100 * time.Millisecond
	if total < time.Second {
		roundLen = total / 10
	}
	var hostCalls atomic.Int64
	var calls, closedErrs, unexpected atomic.Int64
	var firstUnexpected sync.Map // op index → error
	end := time.Now().Add(total)
	rounds := 0
	for time.Now().Before(end) {
		w := newStressWorld(t, dev, rounds%2 == 0, &hostCalls)
		start := time.Now()
		var wg sync.WaitGroup
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(rounds), uint64(g)))
				for {
					el := time.Since(start)
					if el > roundLen {
						return
					}
					// Closes grow likelier as the round goes on, so that
					// the objects die at different times.
					if r.Float64() < 0.01*float64(el)/float64(roundLen) {
						i := r.IntN(len(w.closers))
						if err := w.closers[i](); err != nil {
							unexpected.Add(1)
							firstUnexpected.LoadOrStore(w.closerNames[i], err)
						}
						continue
					}
					i := r.IntN(len(ops))
					err := stressCall(ops[i], w, r)
					calls.Add(1)
					switch {
					case err == nil:
					case errors.Is(err, driver.ErrClosed):
						closedErrs.Add(1)
					case ops[i].allow != nil && ops[i].allow(err):
					default:
						unexpected.Add(1)
						firstUnexpected.LoadOrStore(strings.Join(ops[i].covers, ","), err)
					}
				}
			}()
		}
		wg.Wait()
		require.NoError(t, w.closeAll(), "round %d", rounds)
		rounds++
	}
	firstUnexpected.Range(func(k, v any) bool {
		t.Errorf("%s: unexpected error: %v", k, v)
		return true
	})
	assert.Zero(t, unexpected.Load(), "unexpected errors")
	t.Logf("%d rounds of %d goroutines, %d calls (%d refused as closed), %d host functions ran", rounds, goroutines, calls.Load(), closedErrs.Load(), hostCalls.Load())

	// No leak: everything the rounds made is gone once the cleanups and
	// the release queue have run and fakecuda's queues are empty.
	require.NoError(t, f.ctx.Synchronize())
	assert.Equal(t, int64(1), fcall(t, "fake_quiesce", 30000))
	require.NoError(t, seam.TrimStaging(f.ctx)) // the blocks it keeps for copies of Go slices
	ok := ltSettle(func() bool {
		for _, c := range fakeLive {
			if fcall(t, c) != live[c] {
				return false
			}
		}
		return lifetime.ReadStats().Objects == objects
	})
	if !ok {
		now := map[string]int64{}
		for _, c := range fakeLive {
			now[c] = fcall(t, c) - live[c]
		}
		keys := make([]string, 0, len(now))
		for k := range now {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			assert.Zero(t, now[k], "%s above its start", k)
		}
		assert.Equal(t, objects, lifetime.ReadStats().Objects, "lifetime objects back to their start: %+v", lifetime.ReadStats())
	}
	runtime.KeepAlive(f)
}

// stressCall runs op, turning a panic into a test failure's error.
func stressCall(op stressOp, w *stressWorld, r *rand.Rand) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return op.do(w, r)
}
