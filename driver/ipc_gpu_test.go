//go:build linux

package driver_test

// Sharing stream-ordered memory between two processes: the test binary
// runs itself again as the importing child. The lifetime rules of the
// import side are proved on a CPU in tests/fakedriver (pool_ipc_test.go).

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/lifetime"
)

// ipcChildEnv makes TestGPUPoolIPCBetweenProcesses run as the importing
// child, with its end of the socket pair as descriptor 3.
const ipcChildEnv = "PURECUDA_IPC_CHILD"

// ipcN is the shared buffer's length: 256 MiB of int32, so that a leak
// shows in MemGetInfo past memoryBack's 64 MiB of slack (a buffer of 64
// MiB left allocated would pass it).
const ipcN = 64 << 20

// ipcMsg is what the exporter sends after the pool's descriptor: the
// buffer's export data and the event's handle.
type ipcMsg struct {
	Export [72]byte
	Event  driver.IPCEventHandle
}

// TestGPUPoolIPCBetweenProcesses: the parent makes an exportable pool and
// a buffer of it, fills the buffer (after a spin, so that the child must
// wait for the fill) and records an interprocess event after it, and
// closes its pool at once (the exporter first: the pool lives on for its
// buffer). It sends the pool's descriptor over a Unix socket pair
// (SendFD) and then the buffer's export data and the event's handle. The
// child imports the pool and the buffer, opens the event, waits for it on
// a stream, checks every element, overwrites the buffer with fill(7),
// records the event, frees its import (Close), closes the event and the
// pool and reports. The parent waits for the child's event, checks every
// element of the child's answer, closes the rest, and its device's free
// memory comes back.
func TestGPUPoolIPCBetweenProcesses(t *testing.T) {
	gputest.Require(t)
	if os.Getenv(ipcChildEnv) != "" {
		ipcChild(t)
		return
	}
	e, s := setup(t)
	runtime.GC()
	lifetime.Flush()
	require.NoError(t, e.ctx.Synchronize())
	free0, _, err := e.ctx.MemGetInfo()
	require.NoError(t, err)

	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	parentEnd := os.NewFile(uintptr(fds[0]), "parent")
	childEnd := os.NewFile(uintptr(fds[1]), "child")
	fc, err := net.FileConn(parentEnd)
	require.NoError(t, err)
	require.NoError(t, parentEnd.Close())
	conn := fc.(*net.UnixConn)

	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, os.Args[0], "-test.run=^TestGPUPoolIPCBetweenProcesses$", "-test.v", "-test.count=1", "-test.timeout=100s")
	cmd.Env = append(os.Environ(), ipcChildEnv+"=1")
	cmd.ExtraFiles = []*os.File{childEnd}
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out // one writer: written by one goroutine at a time
	require.NoError(t, cmd.Start())
	require.NoError(t, childEnd.Close())
	waited := false
	defer func() {
		_ = conn.Close() // a child still waiting for the parent reads the end
		if !waited {
			_ = cmd.Wait()
		}
		t.Logf("the child:\n%s", out.String()) // read once the child is gone
	}()

	// Export.
	pool, err := e.ctx.NewExportableMemPool()
	require.NoError(t, err)
	buf, err := driver.AllocFromPool[int32](s, pool, ipcN)
	require.NoError(t, err)
	ev, err := e.ctx.NewEvent(driver.EventInterprocess | driver.EventDisableTiming)
	require.NoError(t, err)
	// The fill comes after a spin of about a tenth of a second: a child
	// that did not wait for the event would read what was there before.
	require.NoError(t, s.Launch(e.fn["spin"], driver.Grid(1), driver.Block(1), int64(200_000_000)))
	require.NoError(t, s.Launch(e.fn["fill"], driver.Grid(ipcN/256), driver.Block(256), buf, int32(1000), int32(ipcN)))
	require.NoError(t, ev.Record(s))
	file, err := pool.ExportFD()
	require.NoError(t, err)
	exp, err := driver.ExportBuffer(buf)
	require.NoError(t, err)
	evh, err := ev.IPCHandle()
	require.NoError(t, err)
	require.NoError(t, pool.Close(), "the exporter closes its pool first")
	require.NoError(t, driver.SendFD(conn, file))
	require.NoError(t, file.Close())
	var msg ipcMsg
	b, err := exp.MarshalBinary()
	require.NoError(t, err)
	copy(msg.Export[:], b)
	msg.Event = evh
	require.NoError(t, binary.Write(conn, binary.LittleEndian, &msg))

	// The child's report: 'D' once it has freed its import.
	reply := make([]byte, 1)
	_, err = io.ReadFull(conn, reply)
	require.NoError(t, err, "the child's report")
	require.Equal(t, "D", string(reply), "the child is done")
	require.NoError(t, ev.Synchronize(), "the child's record of the event")
	got, err := buf.ToHost(s)
	require.NoError(t, err)
	for i, v := range got {
		if v != int32(7+i) {
			t.Fatalf("element %d is %d after the child's fill, want %d", i, v, 7+i)
		}
	}
	werr := cmd.Wait()
	waited = true
	require.NoError(t, werr, "the child failed")
	assert.Contains(t, out.String(), "IPC-CHILD-DONE")

	require.NoError(t, buf.Close(), "the exporter frees its buffer after the importer")
	require.NoError(t, ev.Close())
	require.NoError(t, s.Synchronize())
	memoryBack(t, e.ctx, free0)
}

// ipcChild is the importing side of TestGPUPoolIPCBetweenProcesses.
func ipcChild(t *testing.T) {
	e, s := setup(t)
	f := os.NewFile(3, "socket")
	fc, err := net.FileConn(f)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	conn := fc.(*net.UnixConn)
	defer conn.Close()
	free0, _, err := e.ctx.MemGetInfo()
	require.NoError(t, err)

	file, err := driver.ReceiveFD(conn)
	require.NoError(t, err)
	pool, err := e.ctx.ImportMemPool(file)
	require.NoError(t, err)
	require.NoError(t, file.Close())
	var msg ipcMsg
	require.NoError(t, binary.Read(conn, binary.LittleEndian, &msg))
	var exp driver.BufferExport
	require.NoError(t, exp.UnmarshalBinary(msg.Export[:]))
	require.Equal(t, 4*ipcN, exp.Bytes())
	buf, err := driver.ImportBuffer[int32](pool, exp)
	require.NoError(t, err)
	require.Equal(t, ipcN, buf.Len())
	ev, err := e.ctx.OpenIPCEvent(msg.Event)
	require.NoError(t, err)
	require.NoError(t, s.WaitEvent(ev))
	got, err := buf.ToHost(s)
	require.NoError(t, err)
	for i, v := range got {
		if v != int32(1000+i) {
			t.Fatalf("element %d is %d, want %d (read before the exporter's fill?)", i, v, 1000+i)
		}
	}
	require.NoError(t, s.Launch(e.fn["fill"], driver.Grid(ipcN/256), driver.Block(256), buf, int32(7), int32(ipcN)))
	require.NoError(t, ev.Record(s))
	require.NoError(t, s.Synchronize())
	require.NoError(t, buf.Close(), "frees the import before it returns")
	require.NoError(t, ev.Close())
	require.NoError(t, pool.Close())
	lifetime.Flush()
	free, _, err := e.ctx.MemGetInfo()
	require.NoError(t, err)
	t.Logf("child: free memory %d MiB at the start, %d MiB after closing the import", free0>>20, free>>20)
	_, err = conn.Write([]byte("D"))
	require.NoError(t, err)
	if !t.Failed() {
		t.Log("IPC-CHILD-DONE")
	}
}
