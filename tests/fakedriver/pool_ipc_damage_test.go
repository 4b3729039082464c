//go:build linux

package fakedriver_test

import (
	"encoding/binary"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/lifetime"
)

// TestImportBufferRefusesASizeBeyondTheMemory: a BufferExport whose size
// was damaged (its last 8 bytes travel beside CUDA's export data, which
// does not check them) to more than the exported allocation holds is
// refused with ErrInvalidArgument, the import undone: a Buffer that long
// would let copies and kernels run past the memory. A smaller size is a
// prefix of the memory and is imported.
func TestImportBufferRefusesASizeBeyondTheMemory(t *testing.T) {
	f := ltSetup(t)
	lifetime.Flush()
	live, objects := ipcLive(t), lifetime.ReadStats().Objects
	x := newExporter(t, f, 1024)
	file, err := x.pool.ExportFD()
	require.NoError(t, err)
	ipool, err := f.ctx.ImportMemPool(file)
	require.NoError(t, err)
	require.NoError(t, file.Close())
	exp, err := driver.ExportBuffer(x.buf)
	require.NoError(t, err)
	b, err := exp.MarshalBinary()
	require.NoError(t, err)
	imports := fcall(t, "fake_live_pool_imports")

	for _, size := range []uint64{4096 + 4, 1 << 40} {
		binary.LittleEndian.PutUint64(b[64:], size)
		var e driver.BufferExport
		require.NoError(t, e.UnmarshalBinary(b))
		buf, err := driver.ImportBuffer[int32](ipool, e)
		if !assert.ErrorIs(t, err, driver.ErrInvalidArgument, "%d bytes of a 4096-byte allocation", size) {
			require.NoError(t, buf.Close())
		}
		assert.Equal(t, imports, fcall(t, "fake_live_pool_imports"), "the refused import is undone")
	}
	binary.LittleEndian.PutUint64(b[64:], 400)
	var e driver.BufferExport
	require.NoError(t, e.UnmarshalBinary(b))
	prefix, err := driver.ImportBuffer[int32](ipool, e)
	require.NoError(t, err, "a prefix")
	require.NoError(t, x.ev.Synchronize())
	got, err := prefix.ToHost(f.s)
	require.NoError(t, err)
	assert.Equal(t, x.want[:100], got)
	require.NoError(t, prefix.Close())

	require.NoError(t, ipool.Close())
	require.NoError(t, x.buf.Close())
	require.NoError(t, x.ev.Close())
	require.NoError(t, x.pool.Close())
	require.NoError(t, f.s.Synchronize())
	ipcBackTo(t, live, objects)
	noBadUses(t)
}

// TestReceiveFDTooManyDescriptors: a message carrying more descriptors than
// ReceiveFD makes room for (its control message is truncated) is refused
// with ErrInvalidArgument, and every descriptor it brought is closed; the
// next message is received whole.
func TestReceiveFDTooManyDescriptors(t *testing.T) {
	a, b := ipcPair(t)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	fds0 := openFDs(t)
	many := make([]int, 12)
	for i := range many {
		many[i] = int(w.Fd())
	}
	_, _, err = a.WriteMsgUnix([]byte{'m'}, syscall.UnixRights(many...), nil)
	require.NoError(t, err)
	_, err = driver.ReceiveFD(b)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "12 descriptors")
	assert.Equal(t, fds0, openFDs(t), "the received descriptors were closed")
	require.NoError(t, driver.SendFD(a, w))
	got, err := driver.ReceiveFD(b)
	require.NoError(t, err, "the next message")
	require.NoError(t, got.Close())
	assert.Equal(t, fds0, openFDs(t))
}

// TestImportMemPoolOfAnotherDevice: a pool that lives on another device
// than the importing context's (the exporter's ordinals may differ from
// the importer's) is refused with ErrInvalidArgument and the import
// undone: its buffers would be launched in the context, whose device has
// no access to them, and the kernels would fault. fakecuda stands the
// imported pool on another device (fake_set_import_elsewhere).
func TestImportMemPoolOfAnotherDevice(t *testing.T) {
	f := ltSetup(t)
	lifetime.Flush()
	live, objects := ipcLive(t), lifetime.ReadStats().Objects
	x := newExporter(t, f, 16)
	file, err := x.pool.ExportFD()
	require.NoError(t, err)
	defer file.Close()

	fcall(t, "fake_set_import_elsewhere", 1)
	defer fcall(t, "fake_set_import_elsewhere", 0)
	p, err := f.ctx.ImportMemPool(file)
	if !assert.ErrorIs(t, err, driver.ErrInvalidArgument, "a pool of another device") {
		require.NoError(t, p.Close())
	}
	assert.Equal(t, live["fake_live_pools"]+1, fcall(t, "fake_live_pools"), "the refused import is destroyed")
	fcall(t, "fake_set_import_elsewhere", 0)
	p, err = f.ctx.ImportMemPool(file)
	require.NoError(t, err, "a pool of the context's device")
	require.NoError(t, p.Close())

	require.NoError(t, x.buf.Close())
	require.NoError(t, x.ev.Close())
	require.NoError(t, x.pool.Close())
	require.NoError(t, f.s.Synchronize())
	ipcBackTo(t, live, objects)
	noBadUses(t)
}

// TestImportBufferOfAnotherPool: a BufferExport of a buffer of one pool,
// imported from another imported pool, is refused (CUDA's error), and
// leaves no import behind.
func TestImportBufferOfAnotherPool(t *testing.T) {
	f := ltSetup(t)
	lifetime.Flush()
	live, objects := ipcLive(t), lifetime.ReadStats().Objects
	x, y := newExporter(t, f, 16), newExporter(t, f, 16)
	file, err := y.pool.ExportFD()
	require.NoError(t, err)
	ipool, err := f.ctx.ImportMemPool(file)
	require.NoError(t, err)
	require.NoError(t, file.Close())
	exp, err := driver.ExportBuffer(x.buf)
	require.NoError(t, err)
	buf, err := driver.ImportBuffer[int32](ipool, exp)
	if !assert.Error(t, err, "a buffer of x's pool from y's") {
		require.NoError(t, buf.Close())
	}
	assert.Equal(t, live["fake_live_pool_imports"], fcall(t, "fake_live_pool_imports"))
	require.NoError(t, ipool.Close())
	for _, e := range []*exporter{x, y} {
		require.NoError(t, e.buf.Close())
		require.NoError(t, e.ev.Close())
		require.NoError(t, e.pool.Close())
	}
	require.NoError(t, f.s.Synchronize())
	ipcBackTo(t, live, objects)
	noBadUses(t)
}

// TestExportFDClosesOnExec: the descriptor ExportFD returns is closed on
// exec, like every descriptor Go opens, whatever libcuda made it (fakecuda
// makes it without FD_CLOEXEC): a program that starts other programs does
// not hand them the pool.
func TestExportFDClosesOnExec(t *testing.T) {
	f := ltSetup(t)
	pool, err := f.ctx.NewExportableMemPool()
	require.NoError(t, err)
	defer pool.Close()
	file, err := pool.ExportFD()
	require.NoError(t, err)
	defer file.Close()
	rc, err := file.SyscallConn()
	require.NoError(t, err)
	var flags uintptr
	var errno syscall.Errno
	require.NoError(t, rc.Control(func(fd uintptr) {
		flags, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFD, 0)
	}))
	require.Zero(t, errno)
	assert.NotZero(t, flags&syscall.FD_CLOEXEC, "FD_CLOEXEC")
}
