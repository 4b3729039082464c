package driver

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/purecuda/cuda/internal/cu"
)

// PoolAccess is the access a device has to the memory of a MemPool
// (CUmemAccess_flags).
type PoolAccess uint32

// Pool access flags.
const (
	PoolAccessNone      PoolAccess = 0 // CU_MEM_ACCESS_FLAGS_PROT_NONE: no access
	PoolAccessRead      PoolAccess = 1 // CU_MEM_ACCESS_FLAGS_PROT_READ: read only
	PoolAccessReadWrite PoolAccess = 3 // CU_MEM_ACCESS_FLAGS_PROT_READWRITE: read and write
)

// String names the access: "none", "read", "read-write", or the number.
func (a PoolAccess) String() string {
	switch a {
	case PoolAccessNone:
		return "none"
	case PoolAccessRead:
		return "read"
	case PoolAccessReadWrite:
		return "read-write"
	}
	return fmt.Sprintf("PoolAccess(%d)", uint32(a))
}

// SetAccess sets the access device d has to the memory of p
// (cuMemPoolSetAccess), for the memory p holds now and all it allocates
// later. A pool's memory is usable by its own device only until another
// device is given access: after SetAccess(d, PoolAccessRead) or
// PoolAccessReadWrite, buffers allocated from p with AllocFromPool may be
// passed to kernels launched on streams of d's contexts, and read (and, with
// PoolAccessReadWrite, written) by them; PoolAccessNone takes the access away
// again (launches on d's streams are then refused). Context.EnablePeerAccess
// does not give that access: CUDA maps a pool's memory only for the devices
// SetAccess names.
//
// The access itself orders nothing: work on d's stream that uses a buffer
// of p runs when that stream reaches it, so order it after the work that
// filled the buffer on the pool's device (an Event recorded there and
// Stream.WaitEvent, or a Synchronize), as between any two streams. A buffer
// used by a kernel on another device's stream is held, memory and pool,
// until that stream has passed the kernel, so a Close racing with it never
// frees the memory under it.
//
// The pool's own device always has read-write access, which CUDA does not
// let change: asking for it is refused, as are a nil or zero Device and an
// unknown access value, with an error matching ErrInvalidArgument. The
// device needs peer access to p's device in hardware (Device.CanAccessPeer);
// CUDA refuses the call otherwise. Drivers may refuse PoolAccessRead for a
// pool of device memory (driver 580 on an H200 does, with an error matching
// ErrNotSupported); the access is then unchanged.
func (p *MemPool) SetAccess(d *Device, access PoolAccess) error {
	const op = "MemPool.SetAccess"
	if err := d.check(op); err != nil {
		return err
	}
	switch access {
	case PoolAccessNone, PoolAccessRead, PoolAccessReadWrite:
	default:
		return invalid(op, "unknown access %v", access)
	}
	if err := p.acquire(op); err != nil {
		return err
	}
	defer p.release()
	if d.ordinal == p.ctx.dev.ordinal {
		return invalid(op, "%v owns the pool and always has read-write access; CUDA does not let its access change", d)
	}
	desc := cu.CUmemAccessDesc{
		Location: cu.CUmemLocation{Type: cu.CU_MEM_LOCATION_TYPE_DEVICE, Id: int32(d.ordinal)},
		Flags:    cu.CUmemAccess_flags(access),
	}
	mu := &p.accMu
	if !p.owned { // the device's default pool, which other MemPool values share
		mu = &defaultPoolAccMu
	}
	mu.Lock() // the record follows CUDA's state in the order of the calls
	defer mu.Unlock()
	if err := bound(p.ctx, func() error { return cu.MemPoolSetAccess(p.h, &desc, 1) }); err != nil {
		return p.ctx.sawError(err)
	}
	p.noteAccess(d.ordinal, access)
	return nil
}

// noteAccess records the access SetAccess gave the device of the ordinal
// (devices of ordinal 64 and up are not recorded).
func (p *MemPool) noteAccess(ordinal int, access PoolAccess) {
	if ordinal < 64 {
		bit := uint64(1) << ordinal
		if access == PoolAccessNone {
			p.grantRecord().And(^bit)
		} else {
			p.grantRecord().Or(bit)
		}
	}
}

// defaultPoolGrants records, per device ordinal, the access given to other
// devices to the device's default pool: one CUDA pool, whatever number of
// MemPool values DefaultMemPool returned for it.
var defaultPoolGrants [64]atomic.Uint64

// defaultPoolAccMu serializes SetAccess on default pools, as accMu does for
// one MemPool.
var defaultPoolAccMu sync.Mutex

// grantRecord is where p's grants are recorded: bit i, device i was given
// access (SetAccess).
func (p *MemPool) grantRecord() *atomic.Uint64 {
	if !p.owned && p.ctx != nil && p.ctx.dev.ordinal < 64 { // the device's default pool
		return &defaultPoolGrants[p.ctx.dev.ordinal]
	}
	return &p.granted
}

// Access reads the access device d has to the memory of p
// (cuMemPoolGetAccess): PoolAccessReadWrite for the pool's own device.
func (p *MemPool) Access(d *Device) (PoolAccess, error) {
	const op = "MemPool.Access"
	if err := d.check(op); err != nil {
		return PoolAccessNone, err
	}
	if err := p.acquire(op); err != nil {
		return PoolAccessNone, err
	}
	defer p.release()
	loc := &cu.CUmemLocation{Type: cu.CU_MEM_LOCATION_TYPE_DEVICE, Id: int32(d.ordinal)}
	flags := new(cu.CUmemAccess_flags)
	if err := bound(p.ctx, func() error { return cu.MemPoolGetAccess(flags, p.h, loc) }); err != nil {
		return PoolAccessNone, p.ctx.sawError(err)
	}
	return PoolAccess(*flags), nil
}

// grants reports whether p (nil: no pool) gave the device of c access to
// its memory through SetAccess, for launches in c (devices of ordinal 64
// and up are not recorded: their launches are refused).
func (p *MemPool) grants(c *Context) bool {
	if p == nil || c == nil || c.dev.ordinal >= 64 {
		return false
	}
	return p.grantRecord().Load()&(uint64(1)<<c.dev.ordinal) != 0
}

// usableIn reports whether a launch in context c may use a's memory: it
// belongs to c, to a peer context of c (Context.EnablePeerAccess), or to a
// pool that gave c's device access (MemPool.SetAccess). Peer access does
// not reach memory of a pool (stream-ordered or imported): CUDA maps it for
// the pool's device and the devices given access only.
func (a *allocation) usableIn(c *Context) bool {
	if a.stream != nil || a.pool != nil {
		return a.ctx.h == c.h || a.pool.grants(c)
	}
	return c.canUse(a.ctx)
}

// holdOthers keeps the memory among allocs that belongs to another context
// than s's allocated until s has passed the launch just queued on it: the
// free of such memory waits for its own context's work only. The caller
// holds allocs and s. Memory of s's context needs nothing: its free waits
// for the work of the context, or of the streams that used it.
func holdOthers(s *Stream, allocs []*allocation) {
	for _, a := range allocs {
		if a.ctx.h != s.ctx.h {
			holdUntilPassed(s, a)
		}
	}
}
