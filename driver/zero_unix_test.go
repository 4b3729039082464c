//go:build unix

package driver_test

import (
	"net"
	"os"

	"github.com/purecuda/cuda/driver"
)

// ipcZeroCalls are the descriptor-passing helpers with nil and zero
// connections and files.
func ipcZeroCalls() []call {
	var calls []call
	for _, c := range []*net.UnixConn{nil, new(net.UnixConn)} {
		for _, f := range []*os.File{nil, new(os.File), os.Stdin} {
			calls = append(calls, call{"SendFD", func() error { return driver.SendFD(c, f) }})
		}
		calls = append(calls, call{"ReceiveFD", func() error { _, err := driver.ReceiveFD(c); return err }})
	}
	return calls
}
