//go:build unix

package driver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
)

// SendFD sends the file descriptor of f to the process at the other end of
// conn, a Unix domain socket (SCM_RIGHTS), with one byte of data; the other
// end receives it with ReceiveFD, as a new descriptor of the same open file.
// f stays open here: close it once sent. A nil conn or f, or a closed one,
// is refused with an error matching ErrInvalidArgument; a failed send
// returns the socket's error (the other end's close: syscall.EPIPE).
func SendFD(conn *net.UnixConn, f *os.File) error {
	const op = "SendFD"
	if !connOK(conn) {
		return invalid(op, "nil or zero connection")
	}
	if !fileOK(f) {
		return invalid(op, "nil or zero file")
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return invalid(op, "the file: %v", err)
	}
	var werr error
	if cerr := rc.Control(func(fd uintptr) {
		_, _, werr = conn.WriteMsgUnix([]byte{'F'}, syscall.UnixRights(int(fd)), nil)
	}); cerr != nil {
		return invalid(op, "the file: %v", cerr)
	}
	if werr != nil {
		if errors.Is(werr, net.ErrClosed) {
			return invalid(op, "closed connection: %v", werr)
		}
		return fmt.Errorf("driver: %s: %w", op, werr)
	}
	return nil
}

// connOK reports whether conn is a connection's handle: not nil, and not a
// zero net.UnixConn.
func connOK(conn *net.UnixConn) bool { return conn != nil && *conn != (net.UnixConn{}) }

// ReceiveFD receives one file descriptor sent with SendFD on conn, as a file
// the caller owns and closes. It fails, with nothing left open, when conn is
// nil or closed (an error matching ErrInvalidArgument), at the end of the
// stream or on the socket's error, or when the message carried no
// descriptor or more than one (an error matching ErrInvalidArgument).
// The end of the stream is io.EOF, wrapped.
func ReceiveFD(conn *net.UnixConn) (*os.File, error) {
	const op = "ReceiveFD"
	if !connOK(conn) {
		return nil, invalid(op, "nil or zero connection")
	}
	buf := make([]byte, 1)
	oob := make([]byte, syscall.CmsgSpace(4*4)) // room for a few, so that extra ones are seen and closed
	n, oobn, flags, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		if errors.Is(err, net.ErrClosed) {
			return nil, invalid(op, "closed connection: %v", err)
		}
		return nil, fmt.Errorf("driver: %s: %w", op, err)
	}
	var fds []int
	if oobn > 0 {
		msgs, perr := syscall.ParseSocketControlMessage(oob[:oobn])
		if perr != nil {
			return nil, invalid(op, "damaged control message: %v", perr)
		}
		for i := range msgs {
			got, rerr := syscall.ParseUnixRights(&msgs[i])
			if rerr == nil {
				fds = append(fds, got...)
			}
		}
	}
	if flags&syscall.MSG_CTRUNC != 0 || len(fds) != 1 {
		for _, fd := range fds {
			_ = syscall.Close(fd)
		}
		if n == 0 && oobn == 0 {
			return nil, fmt.Errorf("driver: %s: the other end closed the connection: %w", op, ErrInvalidArgument)
		}
		return nil, invalid(op, "the message carried %d file descriptors, want 1", len(fds))
	}
	syscall.CloseOnExec(fds[0])
	return os.NewFile(uintptr(fds[0]), "received-fd"), nil
}

// closeOnExec marks descriptor fd to be closed on exec.
func closeOnExec(fd int) { syscall.CloseOnExec(fd) }
