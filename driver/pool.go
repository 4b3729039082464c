package driver

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/purecuda/cuda/internal/cu"
)

// MemPool is a stream-ordered memory pool (CUmemoryPool).
type MemPool struct {
	h         cu.CUmemoryPool
	ctx       *Context
	owned     bool
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// DefaultMemPool is the device's default pool (cuDeviceGetDefaultMemPool),
// which AllocAsync uses. Close on it does nothing.
func (c *Context) DefaultMemPool() (*MemPool, error) {
	if err := c.check("Context.DefaultMemPool"); err != nil {
		return nil, err
	}
	p := &MemPool{ctx: c}
	if err := cu.DeviceGetDefaultMemPool(&p.h, c.dev.h); err != nil {
		return nil, err
	}
	return p, nil
}

// NewMemPool creates a pool of pinned device memory on c's device
// (cuMemPoolCreate); Close destroys it.
func (c *Context) NewMemPool() (*MemPool, error) {
	if err := c.acquire("Context.NewMemPool"); err != nil {
		return nil, err
	}
	props := cu.CUmemPoolProps{
		AllocType: cu.CU_MEM_ALLOCATION_TYPE_PINNED,
		Location:  cu.CUmemLocation{Type: cu.CU_MEM_LOCATION_TYPE_DEVICE, Id: int32(c.dev.ordinal)},
	}
	p := &MemPool{ctx: c, owned: true}
	if err := bound(c, func() error { return cu.MemPoolCreate(&p.h, &props) }); err != nil {
		c.release()
		return nil, err
	}
	return p, nil
}

func (p *MemPool) check(op string) error {
	if p == nil {
		return invalid(op, "nil memory pool")
	}
	if p.closed.Load() {
		return closedErr(op, "memory pool")
	}
	return nil
}

// AllocFromPool allocates n elements of T from p in stream order
// (cuMemAllocFromPoolAsync).
func AllocFromPool[T any](s *Stream, p *MemPool, n int) (*Buffer[T], error) {
	if p == nil {
		return nil, invalid("AllocFromPool", "nil memory pool")
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

// Attribute reads a pool attribute (cuMemPoolGetAttribute).
func (p *MemPool) Attribute(a MemPoolAttribute) (uint64, error) {
	if err := p.check("MemPool.Attribute"); err != nil {
		return 0, err
	}
	var v uint64
	if err := cu.MemPoolGetAttribute(p.h, a, unsafe.Pointer(&v)); err != nil {
		return 0, err
	}
	if poolAttr32(a) {
		v = uint64(uint32(v))
	}
	return v, nil
}

// SetAttribute sets a pool attribute (cuMemPoolSetAttribute), such as
// PoolAttrReleaseThreshold.
func (p *MemPool) SetAttribute(a MemPoolAttribute, v uint64) error {
	if err := p.check("MemPool.SetAttribute"); err != nil {
		return err
	}
	if poolAttr32(a) {
		v32 := int32(v)
		return cu.MemPoolSetAttribute(p.h, a, unsafe.Pointer(&v32))
	}
	return cu.MemPoolSetAttribute(p.h, a, unsafe.Pointer(&v))
}

// Trim releases unused memory above keep bytes (cuMemPoolTrimTo).
func (p *MemPool) Trim(keep uint64) error {
	if err := p.check("MemPool.Trim"); err != nil {
		return err
	}
	return cu.MemPoolTrimTo(p.h, uintptr(keep))
}

// Close destroys a pool made with NewMemPool (cuMemPoolDestroy).
func (p *MemPool) Close() error {
	if p == nil {
		return invalid("MemPool.Close", "nil memory pool")
	}
	if !p.owned {
		return nil
	}
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		p.closeErr = bound(p.ctx, func() error { return cu.MemPoolDestroy(p.h) })
		p.ctx.release()
	})
	return p.closeErr
}
