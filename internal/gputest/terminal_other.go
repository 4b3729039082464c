//go:build !windows

package gputest

// terminalPath is the controlling terminal Main writes its summary to.
const terminalPath = "/dev/tty"
