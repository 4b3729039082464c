package cublas

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/ctxcall"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/cublasraw"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// Math is a handle's math mode (cublasMath_t): whether cuBLAS may use
// tensor cores and reduced precision for the routines that take no compute
// type (Gemm and the others; GemmEx's ComputeType decides for itself).
type Math uint32

// The math modes, and the flag that may be added to any of them.
const (
	// DefaultMath: full precision for float32 and float64; tensor cores
	// where that precision allows (cuBLAS's default).
	DefaultMath Math = 0
	// PedanticMath: the prescribed precision and a standardised
	// arithmetic everywhere, for tests (slower).
	PedanticMath Math = 2
	// TF32Math: float32 routines may use TF32 tensor cores (about 10
	// bits of mantissa in the products): faster, less precise.
	TF32Math Math = 3
	// DisallowReducedPrecisionReduction, added to a mode, forbids reductions
	// in a lower precision than the compute type's in mixed-precision
	// routines.
	DisallowReducedPrecisionReduction Math = 16
)

// Options configure a Handle; the zero value (or nil) is cuBLAS's default
// behaviour with a workspace of the recommended size.
type Options struct {
	// Math is the math mode: DefaultMath, PedanticMath or TF32Math,
	// optionally with DisallowReducedPrecisionReduction added.
	Math Math
	// Atomics lets routines that have a faster variant using atomics use
	// it (cublasSetAtomicsMode): results may then differ from run to run.
	Atomics bool
	// WorkspaceBytes is the size of the handle's workspace, allocated on
	// the stream's device and owned by the handle. 0 means the size cuBLAS
	// recommends: 32 MiB on Hopper and later (compute capability 9.0 and
	// up), 4 MiB before. It must be a multiple of 256.
	WorkspaceBytes int
}

// Handle is a cuBLAS handle bound to one stream: every routine called on
// it is queued on that stream, in its context, with the handle's settings.
//
// # Binding
//
// The stream, the math mode, the atomics mode and the workspace are fixed
// when the handle is made (NewHandle): no call can run with another
// goroutine's settings, and no two streams can share one workspace (which
// would let two routines overwrite each other's scratch memory). Use one
// handle per stream; several handles may share a stream (each has its own
// workspace, and the stream orders their routines). Making a handle costs
// milliseconds; make them once.
//
// # Concurrency
//
// A Handle is safe for concurrent use: its routines may be called from
// several goroutines at once; they are queued on its stream one at a time,
// in the order they take the handle. Every routine runs with the handle's
// context current on a locked OS thread and leaves the thread as it found
// it, so goroutines may move between threads freely.
//
// # Lifetime
//
// Close releases the Handle's reference. The cuBLAS handle (cublasDestroy,
// which waits for the device's work) and its workspace are released once
// nothing holds them: no routine in flight, no graph that captured one of
// its routines; if a stream of its context is being captured then (the
// wait would break the capture), once that capture is over. Routines
// queued and not yet run keep their buffers, whatever is closed meanwhile.
// A Handle dropped without Close is released the same way by a cleanup.
type Handle struct {
	obj     lifetime.Object
	st      *handleState
	cleanup runtime.Cleanup
}

// handleState is what a call, the destroy and the cleanup need: nothing in
// it points to the Handle, so a dropped Handle becomes unreachable.
type handleState struct {
	// What the quick path reads comes first, within 64 bytes (cuBLAS's
	// calls evict the caller's data between calls: each line touched is
	// a miss): gemmFn are the cublas<t>gemm entry points it found, by
	// kind (under mu).
	h      cublasraw.Handle
	cuctx  cu.CUcontext
	s      *driver.Stream
	mu     sync.Mutex // held by each routine: settings, scalars, results
	gemmFn [4]uintptr

	ctx     *driver.Context
	ctxRef  lifetime.Ref
	sref    lifetime.Ref
	ws      *driver.Buffer[byte]
	wsRef   lifetime.Ref
	wsPtr   uintptr
	wsBytes int
	opts    Options

	// scratch holds, 16-byte aligned (see slot), alpha, beta and a host
	// result: cuBLAS reads and writes them during the call (host pointer
	// mode) with 16-byte vector instructions for complex128, which fault
	// on an address Go's 8-byte alignment of complex128 allows.
	scratch [4*16 + 16]byte
	// seq is the sequence of C calls of the quick paths (gemmQuick),
	// filled and run under mu.
	seq ctxcall.Seq
}

// The slots of handleState.scratch.
const (
	slotAlpha = iota
	slotBeta
	slotResult
)

// slot is the address of scratch slot i, 16-byte aligned. The state is
// on the heap, which does not move.
func (st *handleState) slot(i int) unsafe.Pointer {
	base := uintptr(unsafe.Pointer(&st.scratch[0]))
	return unsafe.Add(unsafe.Pointer(&st.scratch[0]), (16-base%16)%16+uintptr(i)*16)
}

// defaultWorkspace is the workspace cuBLAS recommends for a device of
// compute capability major.
func defaultWorkspace(major int) int {
	if major >= 9 {
		return 32 << 20
	}
	return 4 << 20
}

// NewHandle makes a cuBLAS handle whose routines run on s, in s's context,
// with the options o (nil for the defaults). It loads cuBLAS if it is not
// loaded yet; when it cannot be found, the error matches ErrNotSupported
// and lists every place searched.
func NewHandle(s *driver.Stream, o *Options) (*Handle, error) {
	const op = "NewHandle"
	if s == nil {
		return nil, fmt.Errorf("cublas: %s: %w", op, driver.ErrNilStream)
	}
	var opts Options
	if o != nil {
		opts = *o
	}
	switch opts.Math &^ DisallowReducedPrecisionReduction {
	case DefaultMath, PedanticMath, TF32Math:
	default:
		return nil, invalid(op, "unknown math mode %d", opts.Math)
	}
	if opts.WorkspaceBytes < 0 || opts.WorkspaceBytes%256 != 0 {
		return nil, invalid(op, "workspace of %d bytes: it must be a multiple of 256 and not negative", opts.WorkspaceBytes)
	}
	if _, err := cublasraw.Load(); err != nil {
		return nil, wrap(op, err)
	}
	st := &handleState{opts: opts}
	var err error
	if st.sref, err = seam.Hold(s); err != nil {
		return nil, fmt.Errorf("cublas: %s: %w", op, err)
	}
	st.s, st.ctx = s, s.Context()
	if st.ctxRef, err = seam.Hold(st.ctx); err != nil {
		st.releaseRefs()
		return nil, fmt.Errorf("cublas: %s: %w", op, err)
	}
	st.cuctx = cu.CUcontext(seam.Context(st.ctx))
	st.wsBytes = opts.WorkspaceBytes
	if st.wsBytes == 0 {
		major, _ := st.ctx.Device().ComputeCapability()
		st.wsBytes = defaultWorkspace(major)
	}
	if st.ws, err = driver.Alloc[byte](st.ctx, st.wsBytes); err != nil {
		st.releaseRefs()
		return nil, fmt.Errorf("cublas: %s: the workspace: %w", op, err)
	}
	var wsPtr uintptr
	if wsPtr, _, st.wsRef, err = seam.UseOn(op, st.ws, s); err != nil {
		st.releaseRefs()
		return nil, fmt.Errorf("cublas: %s: the workspace: %w", op, err)
	}
	st.wsPtr = wsPtr
	created := false
	err = ctxcall.Bound(st.cuctx, func() error {
		if err := cublasraw.Create(&st.h); err != nil {
			return err
		}
		created = true
		if err := cublasraw.SetStream(st.h, cublasraw.Stream(seam.Stream(s))); err != nil {
			return err
		}
		if err := cublasraw.SetWorkspace(st.h, wsPtr, uintptr(st.wsBytes)); err != nil {
			return err
		}
		if err := cublasraw.SetMathMode(st.h, cublasraw.Math(opts.Math)); err != nil {
			return err
		}
		atomics := cublasraw.CUBLAS_ATOMICS_NOT_ALLOWED
		if opts.Atomics {
			atomics = cublasraw.CUBLAS_ATOMICS_ALLOWED
		}
		if err := cublasraw.SetAtomicsMode(st.h, atomics); err != nil {
			return err
		}
		return cublasraw.SetPointerMode(st.h, cublasraw.CUBLAS_POINTER_MODE_HOST)
	})
	if err != nil {
		if created {
			_ = ctxcall.Bound(st.cuctx, func() error { return cublasraw.Destroy(st.h) })
		}
		st.releaseRefs()
		return nil, wrap(op, err)
	}
	h := &Handle{st: st}
	h.obj.Init(func() error {
		h.cleanup.Stop()
		return st.destroy()
	})
	h.cleanup = runtime.AddCleanup(h, func(st *handleState) { release.Defer(droppedHandle{st}) }, st)
	return h, nil
}

// destroy destroys the cuBLAS handle, which waits for the device's work,
// then releases the workspace, the stream and the context. While a stream
// of the context is being captured (the wait would invalidate the
// capture), it does so once the capture is over.
func (st *handleState) destroy() error {
	ran, err := seam.Synchronizing(st.ctx, st.destroy, func() error { return cublasraw.Destroy(st.h) })
	if !ran {
		return nil
	}
	st.releaseRefs()
	return wrap("Close", err)
}

// releaseRefs releases what the state holds, in the order it was taken
// back to front: the workspace, the stream, the context.
func (st *handleState) releaseRefs() {
	if st.wsRef.Valid() {
		_ = st.wsRef.Release()
		st.wsRef = lifetime.Ref{}
	}
	if st.ws != nil {
		_ = st.ws.Close()
		st.ws = nil
	}
	if st.sref.Valid() {
		_ = st.sref.Release()
		st.sref = lifetime.Ref{}
	}
	if st.ctxRef.Valid() {
		_ = st.ctxRef.Release()
		st.ctxRef = lifetime.Ref{}
	}
}

// droppedHandle releases the cuBLAS handle of a Handle dropped without
// Close.
type droppedHandle struct{ st *handleState }

func (d droppedHandle) Release() error {
	release.Counters.Objects.Add(-1) // the Handle's lifetime Object, never released
	return lifetime.OwnerFunc(d.st.destroy).Release()
}

// Close releases the handle (see Lifetime). Calls after it fail with an
// error matching driver.ErrClosed; a second Close returns the first's
// result.
func (h *Handle) Close() error {
	if h == nil || h.st == nil {
		return invalid("Close", "nil or zero Handle")
	}
	return h.obj.Close()
}

// Stream is the stream the handle's routines run on (nil for a nil
// Handle).
func (h *Handle) Stream() *driver.Stream {
	if h == nil || h.st == nil {
		return nil
	}
	return h.st.s
}

// Context is the context of the handle's stream (nil for a nil Handle).
func (h *Handle) Context() *driver.Context {
	if h == nil || h.st == nil {
		return nil
	}
	return h.st.ctx
}

// Options returns the options the handle was made with, its workspace's
// size filled in.
func (h *Handle) Options() Options {
	if h == nil || h.st == nil {
		return Options{}
	}
	o := h.st.opts
	o.WorkspaceBytes = h.st.wsBytes
	return o
}

// Version loads cuBLAS if it is not loaded yet and returns its version
// (cublasGetProperty): 13, 1, 0 for cuBLAS 13.1.0, and the path it was
// loaded from. When cuBLAS cannot be found, the error matches
// ErrNotSupported and lists every place searched.
func Version() (major, minor, patch int, path string, err error) {
	const op = "Version"
	if path, err = cublasraw.Load(); err != nil {
		return 0, 0, 0, "", wrap(op, err)
	}
	var v [3]int32
	for i, p := range []cublasraw.LibraryPropertyType{cublasraw.MAJOR_VERSION, cublasraw.MINOR_VERSION, cublasraw.PATCH_LEVEL} {
		if err = cublasraw.GetProperty(p, &v[i]); err != nil {
			return 0, 0, 0, path, wrap(op, err)
		}
	}
	return int(v[0]), int(v[1]), int(v[2]), path, nil
}
