//go:build !unix

package driver

// closeOnExec does nothing where descriptors are not inherited by exec.
func closeOnExec(int) {}
