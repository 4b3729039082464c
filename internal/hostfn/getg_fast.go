//go:build linux && (amd64 || arm64)

package hostfn

// getg returns the address of the calling goroutine's runtime g: the same
// for the goroutine's whole life, and never that of another live
// goroutine.
func getg() uintptr

// goroutineKey identifies the calling goroutine among those alive: its g.
// One load, whatever the stack's depth.
func goroutineKey() uintptr { return getg() }
