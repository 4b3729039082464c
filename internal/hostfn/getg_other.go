//go:build !(linux && (amd64 || arm64))

package hostfn

// goroutineKey identifies the calling goroutine among those alive: its id,
// read from its stack trace (microseconds, more on deep stacks).
func goroutineKey() uintptr { return uintptr(goroutineID()) }
