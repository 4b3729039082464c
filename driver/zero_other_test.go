//go:build !unix

package driver_test

// ipcZeroCalls is empty where SendFD and ReceiveFD do not exist.
func ipcZeroCalls() []call { return nil }
