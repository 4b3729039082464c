package driver

import (
	"math/bits"
	"sync"
	"unsafe"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/release"
)

// Staging: page-locked host memory a context keeps for the stream-ordered
// copies of Go slices. CUDA copies pageable memory out of stream order: it
// reads the first piece of a host-to-device copy when the copy is queued
// and the rest when the stream reaches it, and it makes the caller of a
// device-to-host copy wait for the stream. So CopyFromHostAsync copies the
// slice into a staging block when it is called and queues the device copy
// from the block; CopyToHostAsync queues the device copy into a block and
// a host function that copies the block into the slice. Either way the
// device copy is between page-locked and device memory, in stream order,
// and the caller never waits for the stream.
//
// Blocks come in power-of-two sizes from stageMin to stageMax; a few of
// each are kept for the next copies (stageKeep, at most stageKeepBytes in
// all), the rest freed. A larger copy gets a block of its own, freed after
// it. A block in use holds its context, so the context is not destroyed
// under a copy; the context's destroy frees the blocks kept.

const (
	stageMin       = 4 << 10
	stageMax       = 16 << 20
	stageClasses   = 13 // 4 KiB << 0 … 4 KiB << 12 = 16 MiB
	stageKeep      = 4
	stageKeepBytes = 64 << 20
)

// stagingPool is a context's kept blocks. It does not point to its
// Context, so the Context's cleanup can free them.
type stagingPool struct {
	mu     sync.Mutex
	free   [stageClasses][]unsafe.Pointer
	kept   uintptr
	closed bool // the context was destroyed: blocks are no longer kept
}

// stage is one block in use.
type stage struct {
	p     unsafe.Pointer
	size  uintptr
	class int // -1: a block of its own, freed after use
	ctx   *Context
}

// bytes is the block's first n bytes.
func (st *stage) bytes(n uintptr) []byte { return unsafe.Slice((*byte)(st.p), n) }

// stageClass is the class of a block of at least n bytes, or -1.
func stageClass(n uintptr) int {
	if n > stageMax {
		return -1
	}
	if n <= stageMin {
		return 0
	}
	return bits.Len64(uint64(n-1)) - bits.Len64(stageMin-1)
}

// getStage returns a block of at least n bytes, holding c until the block
// is put back. The caller has c current (a new block is allocated) and
// holds c through its stream, so this works after c's Close, as the
// stream's other calls do.
func (c *Context) getStage(op string, n uintptr) (*stage, error) {
	if c == nil || c.staging == nil || !c.obj.Retain() {
		return nil, notOpen(op, "context")
	}
	pool := c.staging
	class := stageClass(n)
	size := (n + pageSize - 1) &^ (pageSize - 1)
	if class >= 0 {
		size = stageMin << class
		pool.mu.Lock()
		if k := len(pool.free[class]); k > 0 {
			p := pool.free[class][k-1]
			pool.free[class] = pool.free[class][:k-1]
			pool.kept -= size
			pool.mu.Unlock()
			return &stage{p: p, size: size, class: class, ctx: c}, nil
		}
		pool.mu.Unlock()
	}
	var p unsafe.Pointer
	if err := relaxed(func() error { return cu.MemHostAlloc(&p, size, uint32(HostAllocPortable)) }); err != nil {
		c.release()
		return nil, err
	}
	return &stage{p: p, size: size, class: class, ctx: c}, nil
}

// put gives the block back once no work uses it. It makes no CUDA call,
// so a host function may call it: a block not kept is freed on the
// release queue.
func (st *stage) put() {
	c, pool := st.ctx, st.ctx.staging
	pool.mu.Lock()
	if st.class >= 0 && !pool.closed && len(pool.free[st.class]) < stageKeep && pool.kept+st.size <= stageKeepBytes {
		pool.free[st.class] = append(pool.free[st.class], st.p)
		pool.kept += st.size
		pool.mu.Unlock()
		c.release()
		return
	}
	pool.mu.Unlock()
	release.Defer(freeStage{st}) // releases c after the free
}

// freeStage frees a block that is not kept, with its context current.
type freeStage struct{ st *stage }

func (f freeStage) Release() error {
	c := f.st.ctx
	err := bound(c, func() error { return relaxed(func() error { return cu.MemFreeHost(f.st.p) }) })
	c.release()
	return err
}

// drain frees the kept blocks and keeps no more; the caller has the
// context current. It is part of the context's destroy.
func (pool *stagingPool) drain() error {
	pool.mu.Lock()
	pool.closed = true
	pool.mu.Unlock()
	return pool.trim()
}

// trim frees the kept blocks; the caller has the context current.
func (pool *stagingPool) trim() error {
	pool.mu.Lock()
	var ps []unsafe.Pointer
	for i := range pool.free {
		ps = append(ps, pool.free[i]...)
		pool.free[i] = nil
	}
	pool.kept = 0
	pool.mu.Unlock()
	var first error
	for _, p := range ps {
		if err := relaxed(func() error { return cu.MemFreeHost(p) }); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// trimStaging frees the blocks c keeps (for tests, through seam).
func (c *Context) trimStaging(op string) error {
	if c == nil || c.staging == nil {
		return invalid(op, "zero context")
	}
	return c.with(op, c.staging.trim)
}
