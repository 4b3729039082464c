package driver

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/lifetime"
)

// MemPool is a stream-ordered memory pool (CUmemoryPool). Every call holds
// the pool while it runs, and every buffer allocated from it holds it until
// the buffer is freed, so Close destroys the pool only after both. A
// MemPool dropped without Close is destroyed (or, the default pool, let go
// of) by a cleanup.
//
// A MemPool is safe for concurrent use: AllocFromPool, Attribute,
// SetAttribute, Trim, SetAccess, Access, ExportFD and ImportBuffer may run
// at once from several goroutines; calls that start after Close fail with
// ErrClosed.
//
// Pools made with NewExportableMemPool can be shared with other processes,
// and ImportMemPool makes a MemPool of a pool another process shared: it
// allocates nothing, and ImportBuffer imports that process's buffers from
// it (see NewExportableMemPool).
type MemPool struct {
	h     cu.CUmemoryPool
	ctx   *Context
	owned bool // made with NewMemPool; the device's default pool is not
	obj   lifetime.Object

	exportable bool // made with NewExportableMemPool: its memory may be shared between processes
	imported   bool // made with ImportMemPool: it allocates nothing

	accMu   sync.Mutex    // SetAccess calls, one at a time
	granted atomic.Uint64 // bit i: device i was given access (SetAccess); the default pool's are in defaultPoolGrants

	cleanup runtime.Cleanup // destroys a MemPool that became unreachable without Close
}

// DefaultMemPool is the device's default pool (cuDeviceGetDefaultMemPool),
// which AllocAsync uses. It holds the context until closed; Close on it
// destroys nothing.
func (c *Context) DefaultMemPool() (*MemPool, error) {
	const op = "Context.DefaultMemPool"
	if err := c.hold(op); err != nil {
		return nil, err
	}
	p := &MemPool{ctx: c}
	if err := cu.DeviceGetDefaultMemPool(&p.h, c.dev.h); err != nil {
		c.release()
		return nil, err
	}
	destroy := func() error { c.release(); return nil }
	initDropped(p, &p.obj, &p.cleanup, dropped{destroy: destroy})
	return p, nil
}

// NewMemPool creates a pool of pinned device memory on c's device
// (cuMemPoolCreate); Close destroys it. Its memory cannot be shared with
// other processes: see NewExportableMemPool.
func (c *Context) NewMemPool() (*MemPool, error) {
	return c.newMemPool("Context.NewMemPool", false)
}

// newMemPool creates a pool on c's device, exportable to other processes
// through POSIX file descriptors or not.
func (c *Context) newMemPool(op string, exportable bool) (*MemPool, error) {
	if err := c.hold(op); err != nil {
		return nil, err
	}
	props := cu.CUmemPoolProps{
		AllocType: cu.CU_MEM_ALLOCATION_TYPE_PINNED,
		Location:  cu.CUmemLocation{Type: cu.CU_MEM_LOCATION_TYPE_DEVICE, Id: int32(c.dev.ordinal)},
	}
	if exportable {
		props.HandleTypes = cu.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
	}
	p := &MemPool{ctx: c, owned: true, exportable: exportable}
	if err := bound(c, func() error { return cu.MemPoolCreate(&p.h, &props) }); err != nil {
		c.release()
		return nil, c.sawError(err)
	}
	p.startOwned()
	return p, nil
}

// startOwned gives p, which holds its context and owns its CUDA pool, its
// lifetime: the last release destroys the pool (cuMemPoolDestroy).
func (p *MemPool) startOwned() {
	h, c := p.h, p.ctx
	destroy := func() error {
		err := bound(c, func() error { return cu.MemPoolDestroy(h) })
		c.release()
		return err
	}
	initDropped(p, &p.obj, &p.cleanup, dropped{destroy: destroy})
}

func (p *MemPool) acquire(op string) error {
	if p == nil {
		return invalid(op, "nil memory pool")
	}
	if !p.obj.Acquire() {
		return notOpen(op, "memory pool")
	}
	return nil
}

func (p *MemPool) release() { _ = p.obj.Release() }

// AllocFromPool allocates n elements of T from p in stream order
// (cuMemAllocFromPoolAsync).
func AllocFromPool[T any](s *Stream, p *MemPool, n int) (*Buffer[T], error) {
	if p == nil {
		return nil, invalid("AllocFromPool", "nil memory pool")
	}
	if p.imported {
		return nil, invalid("AllocFromPool", "a pool imported from another process allocates nothing: import its buffers with ImportBuffer")
	}
	return allocAsync[T]("AllocFromPool", s, p, n)
}

// 32-bit pool attributes; the others are 64-bit.
func poolAttr32(a MemPoolAttribute) bool {
	switch a {
	case PoolAttrReuseFollowEventDependencies, PoolAttrReuseAllowOpportunistic, PoolAttrReuseAllowInternalDependencies:
		return true
	}
	return false
}

// Attribute reads a pool attribute (cuMemPoolGetAttribute): a size in
// bytes, or 0 or 1 for the reuse flags. A value above math.MaxInt (a
// release threshold of UINT64_MAX set by other code) reads as math.MaxInt.
func (p *MemPool) Attribute(a MemPoolAttribute) (int, error) {
	if err := p.acquire("MemPool.Attribute"); err != nil {
		return 0, err
	}
	defer p.release()
	v := new(uint64)
	if err := cu.MemPoolGetAttribute(p.h, cu.CUmemPool_attribute(a), unsafe.Pointer(v)); err != nil {
		return 0, err
	}
	if poolAttr32(a) {
		return int(uint32(*v)), nil
	}
	return int(min(*v, math.MaxInt)), nil
}

// SetAttribute sets a pool attribute (cuMemPoolSetAttribute), such as
// PoolAttrReleaseThreshold (bytes; math.MaxInt keeps all memory); v must
// not be negative.
func (p *MemPool) SetAttribute(a MemPoolAttribute, v int) error {
	const op = "MemPool.SetAttribute"
	if v < 0 {
		return invalid(op, "negative value %d for %v", v, a)
	}
	if err := p.acquire(op); err != nil {
		return err
	}
	defer p.release()
	if poolAttr32(a) {
		if v > math.MaxInt32 {
			return invalid(op, "value %d for %v does not fit in 32 bits", v, a)
		}
		v32 := int32(v)
		return cu.MemPoolSetAttribute(p.h, cu.CUmemPool_attribute(a), unsafe.Pointer(&v32))
	}
	v64 := uint64(v)
	return cu.MemPoolSetAttribute(p.h, cu.CUmemPool_attribute(a), unsafe.Pointer(&v64))
}

// Trim releases unused memory above keep bytes (cuMemPoolTrimTo); keep must
// not be negative.
func (p *MemPool) Trim(keep int) error {
	if keep < 0 {
		return invalid("MemPool.Trim", "negative size %d", keep)
	}
	if err := p.acquire("MemPool.Trim"); err != nil {
		return err
	}
	defer p.release()
	return cu.MemPoolTrimTo(p.h, uintptr(keep))
}

// Close releases the pool: one made with NewMemPool is destroyed
// (cuMemPoolDestroy) once no call is using it and every buffer allocated
// from it is freed. Idempotent, first result kept.
func (p *MemPool) Close() error {
	if p == nil {
		return invalid("MemPool.Close", "nil memory pool")
	}
	if p.ctx == nil {
		return nil
	}
	return p.obj.Close()
}
