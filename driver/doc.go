// Package driver is purecuda's safe, idiomatic API over the CUDA driver.
//
// It stands on the generated raw table (internal/cu), which stands on package
// loader; package nvrtc sits beside it and the graph and lifetime layers above
// it.
//
// # Errors
//
// Every failed driver call returns a *Error carrying the C function's name
// and its CUresult; errors.Is(err, driver.ErrOutOfMemory) and
// errors.Is(err, cu-level Result values) both work. A function the loaded
// driver lacks returns a *SymbolError matching ErrNotSupported. Nothing in
// this package panics on anything a caller or the machine can cause.
package driver
