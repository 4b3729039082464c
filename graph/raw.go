package graph

import (
	"fmt"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/lifetime"
)

// RawHost is host memory purecuda does not manage: bytes at addr (C's
// memory, or memory another library pinned). owner, if not nil, is held for
// as long as the node may run and then released (the graph takes it, also
// when the add fails).
func RawHost(addr uintptr, bytes int, owner lifetime.Owner) Operand {
	return raw(addr, bytes, true, owner)
}

// RawDevice is device memory purecuda does not manage: bytes at addr
// (memory another library allocated, or memory a memory-alloc node
// allocates). owner, if not nil, is held for as long as the node may run
// and then released (the graph takes it, also when the add fails).
func RawDevice(addr driver.DevicePtr, bytes int, owner lifetime.Owner) Operand {
	return raw(uintptr(addr), bytes, false, owner)
}

// raw is RawHost (host) or RawDevice.
func raw(addr uintptr, bytes int, host bool, owner lifetime.Owner) Operand {
	if addr == 0 || bytes <= 0 {
		return Operand{err: fmt.Errorf("raw operand at %#x of %d bytes: %w", addr, bytes, driver.ErrInvalidArgument), owner: oneShot(owner)}
	}
	return Operand{addr: addr, bytes: bytes, isHost: host, owner: oneShot(owner)}
}
