package driver

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/lifetime"
)

// Library is context-independent code (cuLibraryLoadData): its kernels can
// be launched on any context's streams. A Library dropped without Close
// (with its Functions) is unloaded by a cleanup.
//
// A Library is safe for concurrent use, as a Module is: a Close racing with
// lookups and launches unloads it only after those in flight (and the Args
// and graphs made with its kernels) are done; later calls fail with
// ErrClosed.
type Library struct {
	obj   lifetime.Object // owner + calls in flight + its Functions
	h     cu.CUlibrary
	funcs kernels
	use   *libraryUse
	last  atomic.Pointer[Context] // the latest context of use.used, to skip the lock on repeated launches

	cleanup runtime.Cleanup // unloads a Library that became unreachable without Close
}

// libraryUse is what a Library's unload needs besides its handle, apart
// from the Library so that its cleanup can have it too.
type libraryUse struct {
	jit *jitOptions // the JIT options and logs, which a lazy load may still use

	// The contexts its kernels were launched in, each held until the
	// unload: cuLibraryUnload does not wait for kernels still queued or
	// running, so the unload first waits for the work of each of them.
	// (Held, because a Context value may be closed while the CUDA context
	// lives on through another value of the same primary context.)
	mu   sync.Mutex
	used []*Context
}

// launchedIn records that a kernel of l is being launched in c; the
// caller holds l and c.
func (l *Library) launchedIn(c *Context) {
	if l.last.Load() == c {
		return
	}
	u := l.use
	u.mu.Lock()
	if !slices.Contains(u.used, c) && c.obj.Retain() {
		u.used = append(u.used, c)
	}
	u.mu.Unlock()
	l.last.Store(c)
}

// unloadLibrary waits for the work of every context the kernels of
// library h were launched in (u.used), then unloads h and lets the
// contexts go. While a stream of one of them is being captured, that
// synchronisation would fail and invalidate the capture: the unload waits
// for the capture to end, and starts again.
func unloadLibrary(h cu.CUlibrary, u *libraryUse) error {
	u.mu.Lock()
	used := slices.Clone(u.used)
	u.mu.Unlock()
	var serr error
	for _, c := range used {
		// Not ran: the unload starts again after the capture.
		ran, err := drainThenUnlessCaptured(c, func() error { return unloadLibrary(h, u) }, func() error { return nil })
		if !ran {
			return nil
		}
		if err != nil && serr == nil {
			serr = err
		}
	}
	u.mu.Lock()
	u.used = nil
	u.mu.Unlock()
	err := relaxedHere(func() error { return cu.LibraryUnload(h) })
	runtime.KeepAlive(u.jit)
	for _, c := range used {
		c.release()
	}
	if err != nil {
		return err
	}
	return serr
}

// LoadLibrary loads PTX, CUBIN or a fatbin as a context-independent library
// (cuLibraryLoadData). code is checked as LoadModule checks it, with the
// same ErrInvalidImage errors.
//
// cuLibraryLoadData succeeds even for PTX that does not compile (driver
// 580, lazy or eager module loading: it compiles the PTX and writes the JIT
// log, but reports the error only when a kernel is looked up or the
// library is loaded into a context). So for PTX text LoadLibrary looks up
// the first kernel the PTX declares (cuLibraryGetKernel, no context
// needed); when that is not found or fails, it asks for the library's
// module in device 0's primary context (cuLibraryGetModule; the context is
// retained for the call and released after, which creates and destroys it
// if nothing else holds it): PTX that does not compile fails here, as a
// *ModuleError with the driver's error (ErrInvalidPtx, …) and the JIT log,
// and nothing stays loaded. On a machine whose devices
// differ, PTX that does not load on device 0 (it targets a newer
// architecture, say) is tried on one device of each other compute
// capability, and passes if it loads on any. A device whose primary
// context cannot be had (an exclusive-process device in use elsewhere) is
// passed over; when none can be had, errors surface at the first kernel
// lookup. A CUBIN or fatbin is left to CUDA's own pace: a kernel a device
// cannot run fails when it is first used there.
func LoadLibrary(code []byte, opts ...JITOptions) (*Library, error) {
	const op = "LoadLibrary"
	img, kind, err := image(op, code)
	if err != nil {
		return nil, err
	}
	if len(opts) > 1 {
		return nil, invalid(op, "at most one JITOptions")
	}
	if err := Init(); err != nil {
		return nil, err
	}
	var o JITOptions
	if len(opts) == 1 {
		o = opts[0]
	}
	// The driver may keep the option values for a lazy load: the log
	// buffers live as long as the library.
	j := newJITOptions(o)
	l := &Library{use: &libraryUse{jit: j}, funcs: kernels{made: new(atomic.Int64)}}
	err = cu.LibraryLoadData(&l.h, unsafe.Pointer(&img[0]), &j.keys[0], j.valuesPtr(), uint32(len(j.keys)), nil, nil, 0)
	if err == nil && kind == imageText && !compiled(l.h, img) {
		if err = loadsSomewhere(l.h); err != nil {
			_ = cu.LibraryUnload(l.h)
		}
	}
	runtime.KeepAlive(j)
	if err != nil {
		errLog, _ := j.logs()
		return nil, &ModuleError{Err: err, Log: errLog}
	}
	h, u := l.h, l.use
	// Not initDropped: the destroy also lets go of the last context used.
	l.obj.Init(func() error {
		l.cleanup.Stop()
		l.last.Store(nil)
		return unloadLibrary(h, u)
	})
	l.cleanup = runtime.AddCleanup(l, deferDrop, dropped{destroy: func() error { return unloadLibrary(h, u) }, objects: l.funcs.made})
	return l, nil
}

// compiled reports whether the driver hands out the first kernel (.entry)
// of PTX library h (cuLibraryGetKernel needs no context), which it does
// only once the PTX compiled. Any other outcome (no .entry found, an
// error) leaves the verdict to loadsSomewhere, which may try other devices.
func compiled(h cu.CUlibrary, ptx []byte) bool {
	name := firstEntry(ptx)
	if name == "" {
		return false
	}
	cname, err := cstring("LoadLibrary", "kernel name", name)
	if err != nil {
		return false
	}
	var k cu.CUkernel
	return cu.LibraryGetKernel(&k, h, cname) == nil
}

// firstEntry returns the name of the first kernel PTX text declares
// (".entry name"), or "" if it finds none.
func firstEntry(ptx []byte) string {
	const tok = ".entry"
	for off := 0; ; {
		i := bytes.Index(ptx[off:], []byte(tok))
		if i < 0 {
			return ""
		}
		i += off + len(tok)
		off = i
		if i >= len(ptx) || (ptx[i] != ' ' && ptx[i] != '\t' && ptx[i] != '\n' && ptx[i] != '\r') {
			continue // ".entryfoo" is some other word
		}
		for i < len(ptx) && (ptx[i] == ' ' || ptx[i] == '\t' || ptx[i] == '\n' || ptx[i] == '\r') {
			i++
		}
		j := i
		for j < len(ptx) && isPTXIdent(ptx[j], j == i) {
			j++
		}
		if j > i {
			return string(ptx[i:j])
		}
	}
}

// isPTXIdent reports whether c may appear in a PTX identifier (first: at
// its start).
func isPTXIdent(c byte, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == '$':
		return true
	case c == '%':
		return first
	case c >= '0' && c <= '9':
		return !first
	}
	return false
}

// loadsSomewhere loads library h into a device's primary context
// (cuLibraryGetModule), which makes the driver report a failed
// compilation: nil if it loads on device 0, or on one device of each other
// compute capability, or if no device's primary context can be had (or
// the driver lacks cuLibraryGetModule); else the first device's error.
func loadsSomewhere(h cu.CUlibrary) error {
	n, _ := DeviceCount() // no device (0): CUDA judges the library at its first use
	var first error
	tried := map[[2]int]bool{}
	for i := range n {
		d, err := DeviceByOrdinal(i)
		if err != nil {
			continue
		}
		major, minor := d.ComputeCapability()
		if tried[[2]int{major, minor}] {
			continue
		}
		c, err := d.PrimaryContext()
		if err != nil {
			continue // another device may do
		}
		tried[[2]int{major, minor}] = true
		var m cu.CUmodule
		err = bound(c, func() error { return cu.LibraryGetModule(&m, h) })
		_ = c.Close()
		if err == nil || isNotSupported(err) {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func (l *Library) acquire(op string) error {
	if l == nil {
		return invalid(op, "nil library")
	}
	if !l.obj.Acquire() {
		return notOpen(op, "library")
	}
	return nil
}

func (l *Library) release() { _ = l.obj.Release() }

// Close unloads the library (cuLibraryUnload) once no launch of its kernels
// is in progress and no Args or graph made with them holds it. Idempotent.
func (l *Library) Close() error {
	if l == nil {
		return invalid("Library.Close", "nil library")
	}
	if l.h == 0 {
		return nil
	}
	return closeWithKernels(&l.funcs, &l.obj)
}

// Function looks up a kernel by name (cuLibraryGetKernel); every call with
// the same name returns the same Function. The kernel can be launched on a
// stream of any context.
func (l *Library) Function(name string) (*Function, error) {
	const op = "Library.Function"
	if err := l.acquire(op); err != nil {
		return nil, err
	}
	defer l.release()
	cname, err := cstring(op, "kernel name", name)
	if err != nil {
		return nil, err
	}
	return l.funcs.get(op, "library", name, &l.obj, func(f *Function) error {
		f.lib = l
		if err := cu.LibraryGetKernel(&f.kernel, l.h, cname); err != nil {
			if errors.Is(err, ErrNotFound) {
				return fmt.Errorf("driver: kernel %q is not in the library: %w", name, err)
			}
			return err
		}
		f.h = cu.CUfunction(f.kernel) // cuLaunchKernel accepts a CUkernel as a CUfunction
		return nil
	})
}
