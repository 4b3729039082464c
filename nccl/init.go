package nccl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/ncclraw"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// Config tunes a communicator (ncclConfig_t). The zero Config, like a nil
// *Config, leaves every choice to NCCL and its environment variables.
type Config struct {
	// NonBlocking makes NCCL's calls for the communicator return at once
	// (blocking = 0): its creation then honours InitRank's Go context,
	// which can give up on ranks that never join. Every call of this
	// package still returns once NCCL has done what it returns for: it
	// waits, polling, while NCCL reports the call in progress.
	NonBlocking bool
	// MinCTAs and MaxCTAs bound the number of thread blocks NCCL's
	// kernels use (0: NCCL's choice).
	MinCTAs, MaxCTAs int
	// CGAClusterSize is the cluster size of NCCL's kernels on devices
	// that have clusters (0: NCCL's choice).
	CGAClusterSize int
	// NetName picks the network plugin or transport by name, "Socket" or
	// "IB" ("": NCCL's choice, or NCCL_NET).
	NetName string
	// Name names the communicator in NCCL's logs ("": none).
	Name string
	// AbortTimeout bounds how long Abort, and the watchdog's abort of a
	// failed communicator, wait for NCCL (0: DefaultAbortTimeout).
	AbortTimeout time.Duration
}

// undef is NCCL_CONFIG_UNDEF_INT: a field NCCL chooses.
const undef = math.MinInt32

// raw is cfg as NCCL's struct; strings are NUL-terminated copies the
// caller keeps alive (and pinned) for the call and the communicator's life.
func (cfg *Config) raw() (ncclraw.Config, [][]byte, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	r := ncclraw.Config{
		Size: unsafe.Sizeof(ncclraw.Config{}), Magic: 0xcafebeef, Version: configVersion(),
		Blocking: undef, CgaClusterSize: undef, MinCTAs: undef, MaxCTAs: undef, SplitShare: undef,
		TrafficClass: undef, CollnetEnable: undef, CTAPolicy: undef, ShrinkShare: undef, NvlsCTAs: undef,
		NChannelsPerNetPeer: undef, NvlinkCentricSched: undef,
	}
	if c.NonBlocking {
		r.Blocking = 0
	}
	for _, f := range []struct {
		v   int
		to  *int32
		nam string
	}{{c.MinCTAs, &r.MinCTAs, "MinCTAs"}, {c.MaxCTAs, &r.MaxCTAs, "MaxCTAs"}, {c.CGAClusterSize, &r.CgaClusterSize, "CGAClusterSize"}} {
		switch {
		case f.v < 0 || f.v > math.MaxInt32:
			return r, nil, invalid("Config.%s is %d: want 0 (NCCL's choice) or a positive count", f.nam, f.v)
		case f.v > 0:
			*f.to = int32(f.v)
		}
	}
	if c.MinCTAs > 0 && c.MaxCTAs > 0 && c.MinCTAs > c.MaxCTAs {
		return r, nil, invalid("Config.MinCTAs (%d) is above MaxCTAs (%d)", c.MinCTAs, c.MaxCTAs)
	}
	if c.AbortTimeout < 0 {
		return r, nil, invalid("Config.AbortTimeout is negative (%v)", c.AbortTimeout)
	}
	var keep [][]byte
	for _, f := range []struct {
		s   string
		to  **byte
		nam string
	}{{c.NetName, &r.NetName, "NetName"}, {c.Name, &r.CommName, "Name"}} {
		if f.s == "" {
			continue
		}
		for i := 0; i < len(f.s); i++ {
			if f.s[i] == 0 {
				return r, nil, invalid("Config.%s holds a NUL byte", f.nam)
			}
		}
		b := append([]byte(f.s), 0)
		keep = append(keep, b)
		*f.to = &b[0]
	}
	return r, keep, nil
}

// configVersion is the version the struct is marked with: the header's,
// or the library's when that is older (NCCL reads a struct of its own
// version or older).
func configVersion() uint32 {
	var v int32
	if err := ncclraw.GetVersion(&v); err == nil && v > 0 && v < ncclraw.NCCL_VERSION_CODE {
		return uint32(v)
	}
	return ncclraw.NCCL_VERSION_CODE
}

// abortTimeout is cfg's abort timeout.
func (cfg *Config) abortTimeout() time.Duration {
	if cfg == nil || cfg.AbortTimeout == 0 {
		return DefaultAbortTimeout
	}
	return cfg.AbortTimeout
}

// holdPrimary holds dev, which must be its device's primary context (NCCL
// works in the primary context of the device current at its calls), and
// returns the reference and its handle.
func holdPrimary(op string, dev *driver.Context) (lifetime.Ref, cu.CUcontext, error) {
	if dev == nil {
		return lifetime.Ref{}, 0, invalid("%s: nil context", op)
	}
	ref, err := seam.Hold(dev)
	if err != nil {
		return lifetime.Ref{}, 0, fmt.Errorf("nccl: %s: %w", op, err)
	}
	d := dev.Device()
	if d == nil {
		_ = ref.Release()
		return lifetime.Ref{}, 0, invalid("%s: the context has no device", op)
	}
	p, err := d.PrimaryContext()
	if err != nil {
		_ = ref.Release()
		return lifetime.Ref{}, 0, fmt.Errorf("nccl: %s: %w", op, err)
	}
	same := p.Same(dev)
	_ = p.Close()
	if !same {
		_ = ref.Release()
		return lifetime.Ref{}, 0, invalid("%s: NCCL works in a device's primary context (Device.PrimaryContext), and this context is another", op)
	}
	return ref, cu.CUcontext(seam.Context(dev)), nil
}

// InitRank creates this process's rank of a communicator of nranks ranks
// (ncclCommInitRankConfig): every rank calls it with the same UniqueID
// (made by one of them with NewUniqueID), a rank from 0 to nranks-1 of its
// own, and the primary context of the GPU it uses. It returns once every
// rank has joined. cfg may be nil.
//
// A blocking communicator (the default) waits in NCCL until every rank has
// joined, whatever ctx says: ctx is checked before. With Config.NonBlocking,
// InitRank gives up when ctx is done: it aborts the communicator and returns
// ctx's error.
func InitRank(ctx context.Context, dev *driver.Context, id UniqueID, nranks, rank int, cfg *Config) (*Comm, error) {
	const op = "InitRank"
	if ctx == nil {
		return nil, invalid("%s: nil Go context", op)
	}
	if nranks < 1 || nranks > math.MaxInt32 || rank < 0 || rank >= nranks {
		return nil, invalid("%s: rank %d of %d: want 0 <= rank < nranks", op, rank, nranks)
	}
	if err := notInGroup(op); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	raw, keep, err := cfg.raw()
	if err != nil {
		return nil, err
	}
	ref, h, err := holdPrimary(op, dev)
	if err != nil {
		return nil, err
	}
	var pin runtime.Pinner
	for _, b := range keep {
		pin.Pin(&b[0])
	}
	defer pin.Unpin()
	var comm ncclraw.Comm
	rid := ncclraw.UniqueId{Internal: id}
	err = bound(h, func() error {
		return ncclraw.CommInitRankConfig(&comm, int32(nranks), rid, int32(rank), &raw)
	})
	if isInProgress(err) {
		err = nil
	}
	if err == nil && comm == 0 {
		err = errors.New("nccl: ncclCommInitRankConfig returned no communicator")
	}
	if err != nil {
		_ = ref.Release()
		return nil, wrapIf(err, comm)
	}
	st := &commState{h: comm, cuctx: h, ctxRef: ref, nonBlocking: cfg != nil && cfg.NonBlocking, abortTimeout: cfg.abortTimeout(), strs: keep}
	if st.nonBlocking {
		if err := st.waitInProgress(ctx); err != nil {
			st.abortThenRelease(err)
			return nil, err
		}
	}
	return newComm(st, dev)
}

// isInProgress reports whether err is NCCL's ncclInProgress.
func isInProgress(err error) bool {
	re, ok := err.(*ncclraw.Error) // as the raw table returns it (errors.As would allocate)
	return ok && re.Code == ncclraw.InProgress
}

// waitInProgress polls a non-blocking communicator until NCCL no longer
// reports its last call in progress, or ctx is done. Each query holds
// st.mu, as the watchdog's does: NCCL's query completes the communicator's
// pending group work, which two threads must not do at once.
func (st *commState) waitInProgress(ctx context.Context) error {
	pause := time.Microsecond
	for {
		var r ncclraw.Result
		st.mu.Lock()
		err := ncclraw.CommGetAsyncError(st.h, &r)
		st.mu.Unlock()
		if err != nil {
			return wrap(err, st.h)
		}
		switch r {
		case ncclraw.Success:
			return nil
		case ncclraw.InProgress:
		default:
			return newError("ncclCommGetAsyncError", Status(r), st.h)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Millisecond)
	}
}

// InitAll creates a communicator of len(devs) ranks in this process, one
// per context, rank i on devs[i] (ncclCommInitAll): each context must be
// the primary context of a different device. Close every Comm it returns.
func InitAll(devs ...*driver.Context) ([]*Comm, error) {
	const op = "InitAll"
	if len(devs) == 0 || len(devs) > math.MaxInt32 {
		return nil, invalid("%s: %d contexts: want at least one", op, len(devs))
	}
	if err := notInGroup(op); err != nil {
		return nil, err
	}
	refs := make([]lifetime.Ref, 0, len(devs))
	hs := make([]cu.CUcontext, 0, len(devs))
	ords := make([]int32, 0, len(devs))
	fail := func(err error) ([]*Comm, error) {
		for _, r := range refs {
			_ = r.Release()
		}
		return nil, err
	}
	for i, d := range devs {
		ref, h, err := holdPrimary(op, d)
		if err != nil {
			return fail(fmt.Errorf("context %d: %w", i, err))
		}
		refs, hs = append(refs, ref), append(hs, h)
		o := int32(d.Device().Ordinal())
		for j, p := range ords {
			if p == o {
				return fail(invalid("%s: contexts %d and %d are both on device %d: NCCL wants one rank per device", op, j, i, o))
			}
		}
		ords = append(ords, o)
	}
	comms := make([]ncclraw.Comm, len(devs))
	err := bound(hs[0], func() error { return ncclraw.CommInitAll(&comms[0], int32(len(devs)), &ords[0]) })
	if err != nil {
		return fail(wrap(err, 0))
	}
	out := make([]*Comm, 0, len(devs))
	for i, h := range comms {
		st := &commState{h: h, cuctx: hs[i], ctxRef: refs[i], abortTimeout: DefaultAbortTimeout}
		c, err := newComm(st, devs[i])
		if err != nil {
			for _, c := range out {
				_ = c.Abort()
				_ = c.Close()
			}
			for j := i + 1; j < len(comms); j++ {
				_ = bound(hs[j], func() error { return ncclraw.CommAbort(comms[j]) })
				_ = refs[j].Release()
			}
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// NoColor is the color of a rank that takes no part in the communicator
// Split makes (NCCL_SPLIT_NOCOLOR): its Split returns nil and no error.
const NoColor = -1

// Split makes a new communicator of the ranks that pass the same color
// (ncclCommSplit), ranked by key (ties by their rank here). It is
// collective: every rank of c calls it, with NoColor for one that joins
// none. The new communicator uses c's device. cfg may be nil; NCCL then
// takes c's configuration.
func (c *Comm) Split(color, key int, cfg *Config) (*Comm, error) {
	const op = "Comm.Split"
	if color < NoColor || color > math.MaxInt32 || key < math.MinInt32 || key > math.MaxInt32 {
		return nil, invalid("%s: color %d, key %d: want a color >= 0 or NoColor, and 32-bit values", op, color, key)
	}
	if err := notInGroup(op); err != nil {
		return nil, err
	}
	var raw *ncclraw.Config
	var keep [][]byte
	if cfg != nil {
		r, k, err := cfg.raw()
		if err != nil {
			return nil, err
		}
		raw, keep = &r, k
	}
	if err := c.acquire(op); err != nil {
		return nil, err
	}
	defer c.release()
	ref, err := seam.Hold(c.ctx)
	if err != nil {
		return nil, fmt.Errorf("nccl: %s: %w", op, err)
	}
	pin := new(runtime.Pinner)
	for _, b := range keep {
		pin.Pin(&b[0])
	}
	// A non-blocking c's split returns ncclInProgress, and NCCL's thread
	// stores the new communicator through ncp when it is made: ncp is
	// pinned Go memory, and c (whose state says when) is polled until then,
	// holding c's calls back as NCCL asks.
	ncp := new(ncclraw.Comm)
	pin.Pin(ncp)
	c.st.lockForSplit() // a group on another goroutine may hold operations of c
	err = c.st.call(func() error { return ncclraw.CommSplit(c.st.h, int32(color), int32(key), ncp, raw) })
	if isInProgress(err) {
		if err = c.st.waitInProgress(context.Background()); err != nil {
			// c failed while the split may still be under way: NCCL may
			// still store through ncp, until c is aborted, which ends
			// the split. ncp stays pinned until c is released.
			c.st.keepPinned(pin)
			pin = nil
		}
	}
	c.st.unlockForSplit()
	if pin != nil {
		defer pin.Unpin()
	}
	var nc ncclraw.Comm
	if pin != nil {
		nc = ncclraw.Comm(atomic.LoadUintptr((*uintptr)(unsafe.Pointer(ncp))))
	}
	nonBlocking := c.st.nonBlocking
	if cfg != nil {
		nonBlocking = cfg.NonBlocking
	}
	if err != nil || nc == 0 {
		if nc != 0 { // made, but the split failed
			_ = bound(c.st.cuctx, func() error { return ncclraw.CommAbort(nc) })
		}
		_ = ref.Release()
		if err != nil {
			return nil, wrapIf(err, c.st.h)
		}
		return nil, nil // NoColor: no communicator
	}
	st := &commState{h: nc, cuctx: c.st.cuctx, ctxRef: ref, nonBlocking: nonBlocking, abortTimeout: c.st.abortTimeout, strs: keep}
	if cfg != nil {
		st.abortTimeout = cfg.abortTimeout()
	}
	if nonBlocking {
		if err := st.waitInProgress(context.Background()); err != nil {
			st.abortThenRelease(err)
			return nil, err
		}
	}
	return newComm(st, c.ctx)
}
