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

// JITOptions tune the driver's just-in-time compilation of PTX.
type JITOptions struct {
	MaxRegisters      int  // 0: no limit
	OptimizationLevel int  // 0-4; -1 or 0 leaves the driver's default (4)
	GenerateDebugInfo bool // -G
	GenerateLineInfo  bool // -lineinfo
}

// ModuleError is a module that did not load, with the JIT's log.
type ModuleError struct {
	Err error  // the driver's error
	Log string // the JIT error log
}

func (e *ModuleError) Error() string {
	if e.Log == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + "\nJIT log:\n" + e.Log
}

// Unwrap returns the driver's error.
func (e *ModuleError) Unwrap() error { return e.Err }

// Module is code loaded into a context: PTX, CUBIN or a fatbin. A Module
// dropped without Close (with its Functions) is unloaded by a cleanup.
//
// A Module is safe for concurrent use: Function, Global and the launches
// of its kernels may run at once from several goroutines. A Close racing
// with them unloads the module only after the launches and lookups in
// flight (and the Args and graphs made with its kernels) are done; calls
// that start after it fail with ErrClosed.
type Module struct {
	obj     lifetime.Object // owner + calls in flight + its Functions
	h       cu.CUmodule
	ctx     *Context
	infoLog string
	funcs   kernels
	cleanup runtime.Cleanup // unloads a Module that became unreachable without Close
}

const jitLogSize = 16 << 10

// jitOptions builds the option arrays for cuModuleLoadDataEx and
// cuLibraryLoadData, with error and info log buffers.
type jitOptions struct {
	keys          []cu.CUjit_option
	vals          []uintptr
	errLog, info  []byte
	errIdx, infIx int
}

func newJITOptions(o JITOptions) *jitOptions {
	j := &jitOptions{errLog: make([]byte, jitLogSize), info: make([]byte, jitLogSize)}
	add := func(k cu.CUjit_option, v uintptr) { j.keys = append(j.keys, k); j.vals = append(j.vals, v) }
	add(cu.CU_JIT_ERROR_LOG_BUFFER, uintptr(unsafe.Pointer(&j.errLog[0])))
	j.errIdx = len(j.vals)
	add(cu.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, jitLogSize)
	add(cu.CU_JIT_INFO_LOG_BUFFER, uintptr(unsafe.Pointer(&j.info[0])))
	j.infIx = len(j.vals)
	add(cu.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, jitLogSize)
	if o.MaxRegisters > 0 {
		add(cu.CU_JIT_MAX_REGISTERS, uintptr(o.MaxRegisters))
	}
	if o.OptimizationLevel > 0 {
		add(cu.CU_JIT_OPTIMIZATION_LEVEL, uintptr(o.OptimizationLevel))
	}
	if o.GenerateDebugInfo {
		add(cu.CU_JIT_GENERATE_DEBUG_INFO, 1)
	}
	if o.GenerateLineInfo {
		add(cu.CU_JIT_GENERATE_LINE_INFO, 1)
	}
	return j
}

func (j *jitOptions) valuesPtr() *unsafe.Pointer {
	return (*unsafe.Pointer)(unsafe.Pointer(&j.vals[0]))
}

func (j *jitOptions) logs() (errLog, info string) {
	n := func(b []byte, size uintptr) string {
		if size > uintptr(len(b)) {
			size = uintptr(len(b))
		}
		return gostring(b[:size])
	}
	return n(j.errLog, j.vals[j.errIdx]), n(j.info, j.vals[j.infIx])
}

// LoadModule loads PTX, CUBIN or a fatbin into c (cuModuleLoadDataEx).
//
// CUDA takes no length and trusts what it reads, so code is checked first:
// a CUBIN's ELF headers and sections and a fatbin's header and entries must
// lie inside code and hold what CUDA's tools write there (a known
// architecture and flags, valid section and symbol indices, …), and PTX
// must be text (CUDA gets a NUL-terminated copy). Anything else (empty,
// truncated, damaged, random bytes) is refused before CUDA reads it, with an
// error matching ErrInvalidImage and ErrInvalidArgument that says what is
// wrong and where. When CUDA refuses the image, the error is a *ModuleError
// carrying the JIT log.
//
// Inside a CUBIN's sections the check follows what CUDA follows: symbols
// and relocations (their types, and room for what they patch), NVIDIA's
// toolkit and CUDA notes, the constant banks sections are named for, the
// call graph, and the kernel attributes that
// name symbols, instructions to patch or the kernel's parameters. What it
// cannot judge is left to CUDA, checked only to lie inside the image: the
// machine code itself, debug sections, and sections whose layout NVIDIA
// does not publish (.nv.rel.action, .nv.prototype, .nv.metadata, …).
// purecuda's tests load damaged images (bit flips, truncations, bytes
// replaced, zeroed or changed inside every kind of section) and require
// each to be refused or to load, never to crash the process; that is a
// test, not a proof. An image from a source you do not
// trust is best loaded first in a child process (your program run again
// with os/exec, loading the image and exiting): load it here once the
// child succeeded.
func (c *Context) LoadModule(code []byte, opts ...JITOptions) (*Module, error) {
	const op = "Context.LoadModule"
	img, _, err := image(op, code)
	if err != nil {
		return nil, err
	}
	if len(opts) > 1 {
		return nil, invalid(op, "at most one JITOptions")
	}
	var o JITOptions
	if len(opts) == 1 {
		o = opts[0]
	}
	if err := c.hold(op); err != nil {
		return nil, err
	}
	j := newJITOptions(o)
	m := &Module{ctx: c, funcs: kernels{made: new(atomic.Int64)}}
	err = bound(c, func() error {
		return cu.ModuleLoadDataEx(&m.h, unsafe.Pointer(&img[0]), uint32(len(j.keys)), &j.keys[0], j.valuesPtr())
	})
	runtime.KeepAlive(j)
	errLog, info := j.logs()
	if err != nil {
		c.release()
		return nil, &ModuleError{Err: err, Log: errLog}
	}
	m.infoLog = info
	h := m.h
	initDropped(m, &m.obj, &m.cleanup, dropped{destroy: func() error { return unloadModule(c, h) }, objects: m.funcs.made})
	return m, nil
}

// unloadModule unloads module h of context c once the Module's last
// reference is gone. cuModuleUnload does not wait for kernels of the
// module that are still queued or running, so the context's work finishes
// first (drain, then the context's synchronisation); while a stream of the
// context is being captured, that synchronisation would fail and
// invalidate the capture, so the unload waits for the capture to end. All
// of it runs with the thread's capture mode relaxed, so that a global
// capture in another context goes on.
func unloadModule(c *Context, h cu.CUmodule) error {
	ran, err := drainThenUnlessCaptured(c, func() error { return unloadModule(c, h) }, func() error { return cu.ModuleUnload(h) })
	if ran {
		c.release()
	}
	return err
}

// InfoLog is the JIT's information log from loading ("" for a nil Module).
func (m *Module) InfoLog() string {
	if m == nil {
		return ""
	}
	return m.infoLog
}

func (m *Module) acquire(op string) error {
	if m == nil {
		return invalid(op, "nil module")
	}
	if !m.obj.Acquire() {
		return notOpen(op, "module")
	}
	return nil
}

func (m *Module) release() { _ = m.obj.Release() }

// Close unloads the module (cuModuleUnload) once no launch of its kernels is
// in progress and no Args or graph made with them holds it. Its functions
// fail with ErrClosed afterwards (open Args still launch). Idempotent.
func (m *Module) Close() error {
	if m == nil {
		return invalid("Module.Close", "nil module")
	}
	if m.ctx == nil {
		return nil
	}
	return closeWithKernels(&m.funcs, &m.obj)
}

// Function looks up a kernel by name (cuModuleGetFunction); every call with
// the same name returns the same Function. A name that is not in the
// module is an error matching ErrNotFound.
func (m *Module) Function(name string) (*Function, error) {
	const op = "Module.Function"
	if err := m.acquire(op); err != nil {
		return nil, err
	}
	defer m.release()
	cname, err := cstring(op, "kernel name", name)
	if err != nil {
		return nil, err
	}
	return m.funcs.get(op, "module", name, &m.obj, func(f *Function) error {
		f.mod, f.ctx = m, m.ctx
		err := bound(m.ctx, func() error { return cu.ModuleGetFunction(&f.h, m.h, cname) })
		if errors.Is(err, ErrNotFound) {
			return fmt.Errorf("driver: kernel %q is not in the module: %w", name, err)
		}
		return err
	})
}

// kernels is the Functions a module or library handed out, one per name.
// Each holds a reference on its module or library until it is destroyed;
// the module's or library's Close closes them.
type kernels struct {
	mu     sync.Mutex
	closed bool
	byName map[string]*Function
	made   *atomic.Int64 // how many Functions were made: Objects the handle's cleanup accounts for

	closeOnce sync.Once
	closeErr  error
}

// get returns the Function named name, looked up by find (which sets the
// handle and what else it knows) on first use. parent is the module's or
// library's lifetime, which the caller holds; what names it in errors.
func (k *kernels) get(op, what, name string, parent *lifetime.Object, find func(*Function) error) (*Function, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, notOpen(op, what)
	}
	if f := k.byName[name]; f != nil {
		return f, nil
	}
	f := &Function{name: name}
	if err := find(f); err != nil {
		return nil, err
	}
	if !parent.Retain() { // cannot fail: the caller holds parent
		return nil, notOpen(op, what)
	}
	// A failed unload is counted by parent's Release: passing it on must
	// not count it again.
	f.obj.Init(func() error { return lifetime.Counted(parent.Release()) })
	k.made.Add(1)
	if k.byName == nil {
		k.byName = make(map[string]*Function)
	}
	k.byName[name] = f
	return f, nil
}

// closeWithKernels closes a module's or library's Functions and then its
// own lifetime obj, once, and returns the first error (the unload's, when
// it ran) to every call. A Function still held (by an Args, a graph or a
// launch in flight) keeps obj loaded until it is released.
func closeWithKernels(k *kernels, obj *lifetime.Object) error {
	k.closeOnce.Do(func() {
		k.mu.Lock()
		k.closed = true
		fs := k.byName
		k.byName = nil
		k.mu.Unlock()
		var first error
		for _, f := range fs {
			if err := f.obj.Close(); err != nil && first == nil {
				first = err
			}
		}
		if err := obj.Close(); err != nil {
			first = err
		}
		k.closeErr = first
	})
	return k.closeErr
}

// Global returns the address and size in bytes of a module-scope
// __device__ variable (cuModuleGetGlobal).
func (m *Module) Global(name string) (DevicePtr, int, error) {
	const op = "Module.Global"
	if err := m.acquire(op); err != nil {
		return 0, 0, err
	}
	defer m.release()
	cname, err := cstring(op, "global name", name)
	if err != nil {
		return 0, 0, err
	}
	var p cu.CUdeviceptr
	var size uintptr
	err = bound(m.ctx, func() error { return cu.ModuleGetGlobal(&p, &size, m.h, cname) })
	if err != nil {
		return 0, 0, fmt.Errorf("driver: global %q: %w", name, err)
	}
	return DevicePtr(p), int(size), nil
}

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
