//go:build !(linux && amd64)

package hostfn

// fastSupported reports that HostFn has no fast path here: every callback
// takes the portable trampoline.
const fastSupported = false

func fastTrampoline() uintptr { return 0 }

// futexWake is never called without the fast path (no trampoline sleeps).
func futexWake(*uint32) {}
