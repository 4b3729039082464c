package driver

import (
	"errors"
	"fmt"
	"runtime"
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
