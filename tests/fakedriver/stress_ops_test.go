//go:build linux

package fakedriver_test

// The operations of the Close stress (stress_close_test.go): one per
// exported method of every driver type, and the test that keeps the table
// complete.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
	"github.com/purecuda/cuda/loader"
	"github.com/purecuda/cuda/nvrtc"
)

// stressOp is one call of the stress. covers names the methods it calls
// (Type.Method, or a package function's name); allow accepts errors other
// than ErrClosed that the call may give with valid arguments.
type stressOp struct {
	covers []string
	do     func(w *stressWorld, r *rand.Rand) error
	allow  func(error) bool
}

func isAny(targets ...error) func(error) bool {
	return func(err error) bool {
		for _, t := range targets {
			if errors.Is(err, t) {
				return true
			}
		}
		return false
	}
}

// closeMade closes an object a call made, when it made one.
func closeMade[T interface{ Close() error }](v T, err error) error {
	if err != nil {
		return err
	}
	return v.Close()
}

func releaseRef(r lifetime.Ref, err error) error {
	if err != nil {
		return err
	}
	return r.Release()
}

func second[A, B any](_ A, b B) B { return b }

func third[A, B, C any](_ A, _ B, c C) C { return c }

// pick returns one of vs.
func pick[T any](r *rand.Rand, vs ...T) T { return vs[r.IntN(len(vs))] }

func (w *stressWorld) anyBuf(r *rand.Rand) *driver.Buffer[int32] {
	return pick(r, w.buf, w.buf2, w.abuf, w.pbuf, w.mbuf, w.view)
}

func (w *stressWorld) anyStream(r *rand.Rand) *driver.Stream { return pick(r, w.s, w.s2, w.legacy) }

// stressOps is every call the stress makes.
func stressOps() []stressOp {
	raw := func(uintptr) error { return nil }
	return []stressOp{
		// Context
		{covers: []string{"Context.CompileModule"}, do: func(w *stressWorld, r *rand.Rand) error {
			m, _, err := w.ctx.CompileModule(`extern "C" __global__ void k() {}`, nvrtc.Options{})
			return closeMade(m, err)
		}, allow: isAny(loader.ErrNotFound)}, // fakecuda has no NVRTC
		{covers: []string{"Context.DefaultMemPool", "MemPool.Close"}, do: func(w *stressWorld, r *rand.Rand) error {
			return closeMade(w.ctx.DefaultMemPool())
		}},
		{covers: []string{"Context.Device", "Context.Same", "Context.LegacyStream", "Stream.IsLegacy", "Stream.Context"},
			do: func(w *stressWorld, r *rand.Rand) error {
				_ = w.ctx.Device()
				_ = seam.Context(w.ctx)
				_ = w.ctx.Same(w.ctx)
				ls := w.ctx.LegacyStream()
				_, _, _ = ls.IsLegacy(), seam.Stream(ls), ls.Context()
				return nil
			}},
		{covers: []string{"Context.EnablePeerAccess", "Context.DisablePeerAccess"}, do: func(w *stressWorld, r *rand.Rand) error {
			if r.IntN(2) == 0 {
				return w.ctx.EnablePeerAccess(w.ctx)
			}
			return w.ctx.DisablePeerAccess(w.ctx)
		}, allow: isAny(driver.ErrInvalidArgument)}, // a context is not its own peer
		{covers: []string{"seam.Hold(Context)"}, do: func(w *stressWorld, r *rand.Rand) error { return releaseRef(seam.Hold(w.ctx)) }},
		{covers: []string{"Context.Limit", "Context.SetLimit"}, do: func(w *stressWorld, r *rand.Rand) error {
			if r.IntN(2) == 0 {
				return second(w.ctx.Limit(driver.LimitStackSize))
			}
			return w.ctx.SetLimit(driver.LimitStackSize, 1024)
		}},
		{covers: []string{"Context.LoadModule", "Module.Close"}, do: func(w *stressWorld, r *rand.Rand) error {
			return closeMade(w.ctx.LoadModule([]byte("FAKE module")))
		}},
		{covers: []string{"Context.MemGetInfo"}, do: func(w *stressWorld, r *rand.Rand) error { return third(w.ctx.MemGetInfo()) }},
		{covers: []string{"Context.NewEvent"}, do: func(w *stressWorld, r *rand.Rand) error {
			return closeMade(w.ctx.NewEvent(driver.EventDisableTiming))
		}},
		{covers: []string{"Context.NewMemPool"}, do: func(w *stressWorld, r *rand.Rand) error { return closeMade(w.ctx.NewMemPool()) }},
		{covers: []string{"Context.NewStream", "Context.NewStreamWithPriority"}, do: func(w *stressWorld, r *rand.Rand) error {
			if r.IntN(2) == 0 {
				return closeMade(w.ctx.NewStream(driver.StreamNonBlocking))
			}
			return closeMade(w.ctx.NewStreamWithPriority(driver.StreamNonBlocking, 0))
		}},
		{covers: []string{"Context.Raw"}, do: func(w *stressWorld, r *rand.Rand) error { return w.ctx.Raw(raw) }},
		{covers: []string{"Context.SMCount"}, do: func(w *stressWorld, r *rand.Rand) error { return second(w.ctx.SMCount()) },
			allow: isAny(driver.ErrNotSupported)}, // fakecuda models no execution affinity
		{covers: []string{"Context.StreamPriorityRange"}, do: func(w *stressWorld, r *rand.Rand) error {
			return third(w.ctx.StreamPriorityRange())
		}},
		{covers: []string{"Context.Synchronize"}, do: func(w *stressWorld, r *rand.Rand) error { return w.ctx.Synchronize() }},

		// Stream
		{covers: []string{"seam.Hold(Stream)"}, do: func(w *stressWorld, r *rand.Rand) error { return releaseRef(seam.Hold(w.anyStream(r))) }},
		{covers: []string{"Stream.Launch"}, do: func(w *stressWorld, r *rand.Rand) error {
			return w.anyStream(r).Launch(w.fill, g1, b1, w.anyBuf(r), int32(3), int32(stressN/4))
		}},
		{covers: []string{"Stream.LaunchWith"}, do: func(w *stressWorld, r *rand.Rand) error {
			return w.anyStream(r).LaunchWith(w.lfill, driver.LaunchConfig{Grid: g1, Block: b1}, w.anyBuf(r), int32(4), int32(stressN/4))
		}},
		{covers: []string{"Stream.LaunchArgs"}, do: func(w *stressWorld, r *rand.Rand) error {
			return w.anyStream(r).LaunchArgs(pick(r, w.args, w.largs), g1, b1)
		}},
		{covers: []string{"Stream.LaunchHostFunc"}, do: func(w *stressWorld, r *rand.Rand) error {
			return w.anyStream(r).LaunchHostFunc(func() { w.hostCalls.Add(1) })
		}},
		{covers: []string{"Stream.Priority", "Stream.Query"}, do: func(w *stressWorld, r *rand.Rand) error {
			s := w.anyStream(r)
			if _, err := s.Query(); err != nil {
				return err
			}
			return second(s.Priority())
		}},
		{covers: []string{"Stream.Raw"}, do: func(w *stressWorld, r *rand.Rand) error { return w.anyStream(r).Raw(raw) }},
		{covers: []string{"Stream.Synchronize"}, do: func(w *stressWorld, r *rand.Rand) error { return w.anyStream(r).Synchronize() }},
		{covers: []string{"Stream.SynchronizeContext"}, do: func(w *stressWorld, r *rand.Rand) error {
			c, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			return w.anyStream(r).SynchronizeContext(c)
		}, allow: isAny(context.DeadlineExceeded)},
		{covers: []string{"Stream.WaitEvent"}, do: func(w *stressWorld, r *rand.Rand) error {
			return w.anyStream(r).WaitEvent(pick(r, w.ev, w.ev2))
		}},

		// Event
		{covers: []string{"Event.Record", "Event.Context"}, do: func(w *stressWorld, r *rand.Rand) error {
			e := pick(r, w.ev, w.ev2)
			_, _ = e.Context(), seam.Event(e)
			return e.Record(w.anyStream(r))
		}},
		{covers: []string{"Event.Query", "Event.Synchronize"}, do: func(w *stressWorld, r *rand.Rand) error {
			e := pick(r, w.ev, w.ev2)
			if _, err := e.Query(); err != nil {
				return err
			}
			return e.Synchronize()
		}},
		{covers: []string{"seam.Hold(Event)"}, do: func(w *stressWorld, r *rand.Rand) error { return releaseRef(seam.Hold(pick(r, w.ev, w.ev2))) }},
		{covers: []string{"Event.Raw"}, do: func(w *stressWorld, r *rand.Rand) error { return pick(r, w.ev, w.ev2).Raw(raw) }},
		{covers: []string{"Elapsed"}, do: func(w *stressWorld, r *rand.Rand) error { return second(driver.Elapsed(w.ev, w.ev)) },
			allow: isAny(driver.ErrNotReady, driver.ErrInvalidHandle)}, // not yet recorded, or not complete

		// Buffer
		{covers: []string{"Buffer.Context", "Buffer.Len", "Buffer.Ptr", "Buffer.Size"}, do: func(w *stressWorld, r *rand.Rand) error {
			b := w.anyBuf(r)
			_, _, _, _ = b.Context(), b.Len(), b.Ptr(), b.Size()
			return nil
		}},
		{covers: []string{"Buffer.CopyFrom"}, do: func(w *stressWorld, r *rand.Rand) error {
			return w.buf.CopyFrom(w.anyStream(r), pick(r, w.buf2, w.abuf, w.pbuf, w.mbuf))
		}},
		{covers: []string{"Buffer.CopyFromAsync"}, do: func(w *stressWorld, r *rand.Rand) error {
			return w.anyBuf(r).CopyFromAsync(w.anyStream(r), w.view)
		}},
		{covers: []string{"Buffer.CopyFrom", "Buffer.CopyFromAsync"}, do: func(w *stressWorld, r *rand.Rand) error {
			// Between the two contexts, either way, on a stream of either.
			dst, src := pick(r, w.buf, w.buf2, w.abuf, w.pbuf, w.mbuf), pick(r, w.xbuf, w.xabuf, w.xview)
			if r.IntN(2) == 0 {
				dst, src = pick(r, w.xbuf, w.xabuf), w.anyBuf(r)
			}
			s := pick(r, w.s, w.s2, w.legacy, w.xs, w.xlegacy)
			if r.IntN(2) == 0 {
				return dst.CopyFrom(s, src)
			}
			return dst.CopyFromAsync(s, src)
		}},
		{covers: []string{"Buffer.CopyFromHost", "Buffer.CopyToHost"}, do: func(w *stressWorld, r *rand.Rand) error {
			b := w.anyBuf(r)
			h := make([]int32, 8)
			if err := b.CopyFromHost(w.anyStream(r), h); err != nil {
				return err
			}
			return b.CopyToHost(w.anyStream(r), h)
		}},
		{covers: []string{"Buffer.CopyFromHostAsync", "Buffer.CopyToHostAsync"}, do: func(w *stressWorld, r *rand.Rand) error {
			if r.IntN(2) == 0 {
				return w.anyBuf(r).CopyFromHostAsync(w.anyStream(r), make([]int32, 8))
			}
			return w.anyBuf(r).CopyToHostAsync(w.anyStream(r), make([]int32, 8))
		}},
		{covers: []string{"Buffer.CopyFromPinnedAsync", "Buffer.CopyToPinnedAsync"}, do: func(w *stressWorld, r *rand.Rand) error {
			b := pick(r, w.buf, w.buf2, w.abuf, w.pbuf, w.mbuf) // the whole HostBuffer fits
			if r.IntN(2) == 0 {
				return b.CopyFromPinnedAsync(w.anyStream(r), w.hb)
			}
			return b.CopyToPinnedAsync(w.anyStream(r), w.hb)
		}},
		{covers: []string{"seam.Hold(Buffer)"}, do: func(w *stressWorld, r *rand.Rand) error { return releaseRef(seam.Hold(w.anyBuf(r))) }},
		{covers: []string{"Buffer.HostSlice"}, do: func(w *stressWorld, r *rand.Rand) error { return second(w.mbuf.HostSlice()) }},
		{covers: []string{"Buffer.Memset8", "Buffer.Memset16", "Buffer.Memset32", "Buffer.MemsetFloat32"}, do: func(w *stressWorld, r *rand.Rand) error {
			b := w.anyBuf(r)
			switch r.IntN(4) {
			case 0:
				return b.Memset8(w.anyStream(r), 1)
			case 1:
				return b.Memset16(w.anyStream(r), 2)
			case 2:
				return b.Memset32(w.anyStream(r), 3)
			}
			return b.MemsetFloat32(w.anyStream(r), 4)
		}},
		{covers: []string{"Buffer.Memset8Async", "Buffer.Memset16Async", "Buffer.Memset32Async", "Buffer.MemsetFloat32Async"},
			do: func(w *stressWorld, r *rand.Rand) error {
				b, s := w.anyBuf(r), w.anyStream(r)
				switch r.IntN(4) {
				case 0:
					return b.Memset8Async(s, 1)
				case 1:
					return b.Memset16Async(s, 2)
				case 2:
					return b.Memset32Async(s, 3)
				}
				return b.MemsetFloat32Async(s, 4)
			}},
		{covers: []string{"Buffer.Slice", "Buffer.Close"}, do: func(w *stressWorld, r *rand.Rand) error {
			return closeMade(w.anyBuf(r).Slice(1, 3))
		}},
		{covers: []string{"Buffer.ToHost"}, do: func(w *stressWorld, r *rand.Rand) error { return second(w.anyBuf(r).ToHost(w.anyStream(r))) }},
		{covers: []string{"Alloc", "AllocZeroed", "AllocCopy", "AllocManaged"}, do: func(w *stressWorld, r *rand.Rand) error {
			switch r.IntN(4) {
			case 0:
				return closeMade(driver.Alloc[int32](w.ctx, 4))
			case 1:
				return closeMade(driver.AllocZeroed[int32](w.ctx.LegacyStream(), 4))
			case 2:
				return closeMade(driver.AllocCopy(w.ctx.LegacyStream(), []int32{1, 2}))
			}
			return closeMade(driver.AllocManaged[int32](w.ctx, 4))
		}},
		{covers: []string{"AllocAsync", "AllocFromPool"}, do: func(w *stressWorld, r *rand.Rand) error {
			if r.IntN(2) == 0 {
				return closeMade(driver.AllocAsync[int32](w.anyStream(r), 4))
			}
			return closeMade(driver.AllocFromPool[int32](w.anyStream(r), w.pool, 4))
		}},
		{covers: []string{"forgotten Buffer"}, do: func(w *stressWorld, r *rand.Rand) error {
			// Dropped without Close: the cleanup frees it.
			_, err := driver.Alloc[int32](w.ctx, 4)
			return err
		}},

		// HostBuffer, Registered
		{covers: []string{"seam.Hold(HostBuffer)", "HostBuffer.Len", "HostBuffer.Pointer", "HostBuffer.Slice"}, do: func(w *stressWorld, r *rand.Rand) error {
			_, _, _ = w.hb.Len(), w.hb.Pointer(), w.hb.Slice() // not dereferenced: Close may free it any time
			return releaseRef(seam.Hold(w.hb))
		}},
		{covers: []string{"AllocHost", "HostBuffer.Close"}, do: func(w *stressWorld, r *rand.Rand) error {
			return closeMade(driver.AllocHost[int32](w.ctx, 4, driver.HostAllocDefault))
		}},
		{covers: []string{"seam.Hold(Registered)", "Registered.Slice"}, do: func(w *stressWorld, r *rand.Rand) error {
			_ = w.reg.Slice()
			return releaseRef(seam.Hold(w.reg))
		}},
		{covers: []string{"RegisterHost", "Registered.Close"}, do: func(w *stressWorld, r *rand.Rand) error {
			return closeMade(driver.RegisterHost(w.ctx, make([]int32, 4)))
		}},

		// MemPool
		{covers: []string{"MemPool.Attribute", "MemPool.SetAttribute", "MemPool.Trim"}, do: func(w *stressWorld, r *rand.Rand) error {
			switch r.IntN(3) {
			case 0:
				return second(w.pool.Attribute(driver.PoolAttrReleaseThreshold))
			case 1:
				return w.pool.SetAttribute(driver.PoolAttrReleaseThreshold, 1<<20)
			}
			return w.pool.Trim(0)
		}},

		{covers: []string{"MemPool.SetAccess", "MemPool.Access"}, do: func(w *stressWorld, r *rand.Rand) error {
			p := pick(r, w.pool, w.epool, w.ipool)
			if r.IntN(2) == 0 {
				return second(p.Access(w.dev))
			}
			return p.SetAccess(w.dev, driver.PoolAccessReadWrite)
		}, allow: isAny(driver.ErrInvalidArgument)}, // the pool's own device: its access cannot change
		{covers: []string{"Context.NewExportableMemPool"}, do: func(w *stressWorld, r *rand.Rand) error {
			return closeMade(w.ctx.NewExportableMemPool())
		}},
		{covers: []string{"MemPool.ExportFD", "Context.ImportMemPool"}, do: func(w *stressWorld, r *rand.Rand) error {
			file, err := w.epool.ExportFD()
			if err != nil {
				return err
			}
			defer file.Close()
			return closeMade(w.ctx.ImportMemPool(file))
		}},
		{covers: []string{"ExportBuffer", "ImportBuffer"}, do: func(w *stressWorld, r *rand.Rand) error {
			if r.IntN(2) == 0 {
				return second(driver.ExportBuffer(w.ebuf))
			}
			b, err := driver.ImportBuffer[int32](w.ipool, w.eexp)
			if err != nil {
				return err
			}
			if r.IntN(2) == 0 {
				err = b.CopyToHost(w.anyStream(r), make([]int32, stressN))
			}
			return errors.Join(err, b.Close())
		}},
		{covers: []string{"Buffer (imported)"}, do: func(w *stressWorld, r *rand.Rand) error {
			if r.IntN(2) == 0 {
				return w.ibuf.CopyToHost(w.anyStream(r), make([]int32, stressN))
			}
			return w.ibuf.Memset32Async(w.anyStream(r), 7)
		}},
		{covers: []string{"Event.IPCHandle", "Context.OpenIPCEvent"}, do: func(w *stressWorld, r *rand.Rand) error {
			if r.IntN(2) == 0 {
				return second(w.iev.IPCHandle())
			}
			ev, err := w.ctx.OpenIPCEvent(w.ievh)
			if err != nil {
				return err
			}
			return errors.Join(ev.Record(w.anyStream(r)), ev.Synchronize(), ev.Close())
		}},
		{covers: []string{"Event (opened)"}, do: func(w *stressWorld, r *rand.Rand) error {
			if r.IntN(2) == 0 {
				return w.oev.Record(w.anyStream(r))
			}
			return w.anyStream(r).WaitEvent(w.oev)
		}},

		// Module, Library, Function
		{covers: []string{"Module.Function", "Module.InfoLog", "Function.Name", "Function.Context"},
			do: func(w *stressWorld, r *rand.Rand) error {
				_ = w.mod.InfoLog()
				f, err := w.mod.Function(pick(r, "fill", "add4", "empty"))
				if err != nil {
					return err
				}
				_, _, _ = f.Name(), f.Context(), fmt.Sprint(seam.Function(f))
				return nil
			}},
		{covers: []string{"Module.Global"}, do: func(w *stressWorld, r *rand.Rand) error {
			_, _, err := w.mod.Global("nothing")
			return err
		}, allow: isAny(driver.ErrNotFound)},
		{covers: []string{"Library.Function"}, do: func(w *stressWorld, r *rand.Rand) error { return second(w.lib.Function("fill")) }},
		{covers: []string{"LoadLibrary", "Library.Close"}, do: func(w *stressWorld, r *rand.Rand) error {
			return closeMade(driver.LoadLibrary([]byte("FAKE library")))
		}},
		{covers: []string{"Function.Attribute", "Function.AttributeOn", "Function.MaxThreadsPerBlock", "Function.NumRegisters", "Function.SharedMemory"},
			do: func(w *stressWorld, r *rand.Rand) error {
				f := pick(r, w.fill, w.lfill)
				switch r.IntN(5) {
				case 0:
					return second(f.Attribute(driver.FuncAttrMaxThreadsPerBlock))
				case 1:
					return second(f.AttributeOn(w.dev, driver.FuncAttrNumRegs))
				case 2:
					return second(f.MaxThreadsPerBlock())
				case 3:
					return second(f.NumRegisters())
				}
				return second(f.SharedMemory())
			}},
		{covers: []string{"Function.SetAttribute", "Function.SetAttributeOn"}, do: func(w *stressWorld, r *rand.Rand) error {
			f := pick(r, w.fill, w.lfill)
			if r.IntN(2) == 0 {
				return f.SetAttribute(driver.FuncAttrMaxDynamicSharedSizeBytes, 0)
			}
			return f.SetAttributeOn(w.dev, driver.FuncAttrMaxDynamicSharedSizeBytes, 0)
		}},
		{covers: []string{"seam.Hold(Function)"}, do: func(w *stressWorld, r *rand.Rand) error { return releaseRef(seam.Hold(pick(r, w.fill, w.lfill))) }},
		{covers: []string{"Function.Raw"}, do: func(w *stressWorld, r *rand.Rand) error { return pick(r, w.fill, w.lfill).Raw(raw) }},
		{covers: []string{"Function.ParamCount"}, do: func(w *stressWorld, r *rand.Rand) error {
			_, _, err := pick(r, w.fill, w.lfill).ParamCount()
			return err
		}, allow: isAny(driver.ErrInvalidContext)}, // a library kernel's, before any context ran it
		{covers: []string{"Function.MaxActiveBlocksPerSM", "Function.SuggestedBlockSize"}, do: func(w *stressWorld, r *rand.Rand) error {
			if r.IntN(2) == 0 {
				return second(w.fill.MaxActiveBlocksPerSM(32, 0))
			}
			return third(w.fill.SuggestedBlockSize(0))
		}},
		{covers: []string{"Function.NewArgs", "Args.Close", "Args.Function", "seam.Hold(Args)", "Args.Raw", "SetArg"},
			do: func(w *stressWorld, r *rand.Rand) error {
				a, err := pick(r, w.fill, w.lfill).NewArgs(w.anyBuf(r), int32(5), int32(stressN/4))
				if err != nil {
					return err
				}
				_ = a.Function()
				err = errors.Join(releaseRef(seam.Hold(a)), a.Raw(func(uintptr, unsafePointer) error { return nil }), driver.SetArg(a, 1, int32(6)),
					w.anyStream(r).LaunchArgs(a, g1, b1))
				return errors.Join(err, a.Close())
			}, allow: isAny(driver.ErrInvalidArgument)}, // a library kernel's buffer of another context than the stream's
		{covers: []string{"seam.Hold(Args)", "Args.Raw", "Args.Function"}, do: func(w *stressWorld, r *rand.Rand) error {
			// Not SetArg: it must not race launches of the same Args (its
			// doc says so); the op above calls it on Args of its own.
			a := pick(r, w.args, w.largs)
			_ = a.Function()
			return errors.Join(releaseRef(seam.Hold(a)), a.Raw(func(uintptr, unsafePointer) error { return nil }), seam.ArgsUsableIn(a, w.ctx))
		}, allow: isAny(driver.ErrInvalidArgument)}, // UsableIn in another context than the Args' buffers
		{covers: []string{"seam.Marshal"},
			do: func(w *stressWorld, r *rand.Rand) error {
				p, err := seam.Marshal(pick(r, w.fill, w.lfill), w.ctx, []any{w.anyBuf(r), int32(8), int32(stressN / 4)})
				if err != nil {
					return err
				}
				_ = p.Pointer()
				var refErr error
				if r.IntN(2) == 0 {
					for _, ref := range p.TakeRefs(nil) {
						refErr = errors.Join(refErr, ref.Release())
					}
				}
				p.Free()
				return refErr
			}},

		// Device (nothing to close but the contexts it makes)
		{covers: []string{"Device.Arch", "Device.ComputeCapability", "Device.Ordinal", "Device.String"}, do: func(w *stressWorld, r *rand.Rand) error {
			_, _ = w.dev.Arch(), w.dev.String()
			_, _ = w.dev.ComputeCapability()
			_ = w.dev.Ordinal()
			return nil
		}},
		{covers: []string{"Device.Attribute", "Device.Name", "Device.UUID", "Device.TotalMemory", "Device.SMCount", "Device.SMCountAffinitySupported", "Device.CanAccessPeer"},
			do: func(w *stressWorld, r *rand.Rand) error {
				return errors.Join(second(w.dev.Attribute(driver.AttrMultiprocessorCount)), second(w.dev.Name()), second(w.dev.UUID()),
					second(w.dev.TotalMemory()), second(w.dev.SMCount()), second(w.dev.SMCountAffinitySupported()),
					second(w.dev.CanAccessPeer(w.dev)))
			}},
		{covers: []string{"Device.PrimaryContext", "Device.NewContext", "Device.NewContextWith", "Context.Close"}, do: func(w *stressWorld, r *rand.Rand) error {
			switch r.IntN(3) {
			case 0:
				return closeMade(w.dev.PrimaryContext())
			case 1:
				return closeMade(w.dev.NewContext(driver.ContextSchedAuto))
			}
			return closeMade(w.dev.NewContextWith(driver.ContextOptions{}))
		}},
	}
}

// stressExempt are methods the stress does not race, with the reason.
var stressExempt = map[string]string{}

// stressMethods lists the exported methods of the driver's types.
func stressMethods() []string {
	var all []string
	for _, v := range []any{(*driver.Context)(nil), (*driver.Stream)(nil), (*driver.Event)(nil), (*driver.Buffer[int32])(nil),
		(*driver.HostBuffer[int32])(nil), (*driver.Registered[int32])(nil), (*driver.MemPool)(nil), (*driver.Module)(nil),
		(*driver.Library)(nil), (*driver.Function)(nil), (*driver.Args)(nil), (*driver.Device)(nil)} {
		t := reflect.TypeOf(v)
		name := t.Elem().Name()
		if i := strings.IndexByte(name, '['); i >= 0 {
			name = name[:i]
		}
		for i := 0; i < t.NumMethod(); i++ {
			all = append(all, name+"."+t.Method(i).Name)
		}
	}
	return all
}

// TestStressCoversEveryMethod: the stress calls every exported method of
// every driver type (or says why not).
func TestStressCoversEveryMethod(t *testing.T) {
	covered := map[string]bool{}
	for _, op := range stressOps() {
		for _, c := range op.covers {
			covered[c] = true
		}
	}
	// The round's closers race Close itself.
	for _, name := range []string{"Context.Close", "Stream.Close", "Event.Close", "Buffer.Close", "HostBuffer.Close",
		"Registered.Close", "MemPool.Close", "Module.Close", "Library.Close", "Args.Close"} {
		covered[name] = true
	}
	for _, m := range stressMethods() {
		if stressExempt[m] != "" {
			continue
		}
		assert.True(t, covered[m], "the Close stress does not call %s: add it to stressOps", m)
	}
}
