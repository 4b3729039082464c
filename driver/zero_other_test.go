//go:build !unix

package driver_test

// ipcZeroCalls: the descriptor-passing helpers exist on unix only.
func ipcZeroCalls() []call { return nil }
