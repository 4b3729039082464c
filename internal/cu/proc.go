package cu

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/purecuda/cuda/loader"
)

// proc is one lazily resolved driver entry point.
type proc struct {
	name   string // C name, e.g. cuMemAlloc
	abi    int    // ABI version of the Go signature, e.g. 3020
	export string // versioned export for the dlsym fallback, "" if unknown
	addr   atomic.Uintptr
	once   sync.Once // RegisterFunc-bound functions only
}

// driverLib is the opened driver with the entry points needed to resolve others.
type driverLib struct {
	lib     *loader.Library
	version int     // cuDriverGetVersion
	gpa     uintptr // cuGetProcAddress_v2, 0 on drivers before 12.0
}

var openDriver = sync.OnceValues(func() (*driverLib, error) {
	lib, err := loader.Driver()
	if err != nil {
		return nil, err
	}
	d := &driverLib{lib: lib}
	getVersion, err := lib.Lookup("cuDriverGetVersion")
	if err != nil {
		return nil, err
	}
	var v int32
	if r, _, _ := purego.SyscallN(getVersion, uintptr(unsafe.Pointer(&v))); CUresult(int32(r)) != CUDA_SUCCESS {
		return nil, callError("cuDriverGetVersion", CUresult(int32(r)))
	}
	d.version = int(v)
	d.gpa, _ = lib.Lookup("cuGetProcAddress_v2")
	return d, nil
})

// Load opens the driver library (if not yet open) and returns the path it
// was opened from and the driver's CUDA version (e.g. 13000).
func Load() (path string, version int, err error) {
	d, err := openDriver()
	if err != nil {
		return "", 0, err
	}
	return d.lib.Path, d.version, nil
}

// find returns the entry point's address, resolving it on first use.
func (p *proc) find() (uintptr, error) {
	if a := p.addr.Load(); a != 0 {
		return a, nil
	}
	return p.resolve()
}

func (p *proc) resolve() (uintptr, error) {
	d, err := openDriver()
	if err != nil {
		return 0, err
	}
	if p.abi > d.version {
		return 0, symbolError(&SymbolError{Func: p.name, ABI: p.abi, Driver: d.version, Reason: "needs a newer driver"})
	}
	var gpaErr error
	if d.gpa != 0 {
		name := append([]byte(p.name), 0)
		var fn uintptr
		var status CUdriverProcAddressQueryResult
		r, _, _ := purego.SyscallN(d.gpa, uintptr(unsafe.Pointer(&name[0])), uintptr(unsafe.Pointer(&fn)),
			uintptr(p.abi), uintptr(CU_GET_PROC_ADDRESS_LEGACY_STREAM), uintptr(unsafe.Pointer(&status)))
		res := CUresult(int32(r))
		switch {
		case res == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS && fn != 0:
			p.addr.Store(fn)
			return fn, nil
		case res == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT:
			return 0, symbolError(&SymbolError{Func: p.name, ABI: p.abi, Driver: d.version, Reason: "the driver has no entry point for this ABI version"})
		case res == CUDA_SUCCESS:
			gpaErr = symbolError(&SymbolError{Func: p.name, ABI: p.abi, Driver: d.version, Reason: "the driver does not know this function"})
		default:
			gpaErr = symbolError(&SymbolError{Func: p.name, ABI: p.abi, Driver: d.version, Reason: "cuGetProcAddress_v2 failed: " + res.Error()})
		}
	}
	if p.export == "" {
		if gpaErr != nil {
			return 0, gpaErr
		}
		return 0, symbolError(&SymbolError{Func: p.name, ABI: p.abi, Driver: d.version, Reason: "this driver has no cuGetProcAddress_v2 and the export name of this ABI is unknown"})
	}
	fn, err := d.lib.Lookup(p.export)
	if err != nil {
		if gpaErr != nil {
			return 0, gpaErr
		}
		return 0, symbolError(&SymbolError{Func: p.name, ABI: p.abi, Driver: d.version, Reason: "no export " + p.export})
	}
	p.addr.Store(fn)
	return fn, nil
}

// check turns a returned status into an error value.
func (p *proc) check(r uintptr) error {
	if res := CUresult(int32(r)); res != CUDA_SUCCESS {
		return callError(p.name, res)
	}
	return nil
}

// Resolution is the outcome of resolving one entry point.
type Resolution struct {
	Func string
	ABI  int
	Err  error
}

// ResolveAll resolves every bound entry point and reports each outcome. It is
// for diagnostics (cmd/smoke, tests); normal use resolves lazily.
func ResolveAll() []Resolution {
	out := make([]Resolution, 0, len(procs))
	for _, p := range procs {
		_, err := p.find()
		out = append(out, Resolution{Func: p.name, ABI: p.abi, Err: err})
	}
	return out
}
