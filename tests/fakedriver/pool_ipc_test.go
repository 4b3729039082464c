//go:build linux

package fakedriver_test

// Pool access (MemPool.SetAccess, Access) and sharing stream-ordered
// memory between processes (exportable pools, ExportFD/ImportMemPool,
// ExportBuffer/ImportBuffer, IPC events, SendFD/ReceiveFD), against
// fakecuda, which models the export and the import within one process.

import (
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/lifetime"
)

// ipcPair is a connected pair of Unix stream sockets, closed when t ends.
func ipcPair(t *testing.T) (a, b *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

// ipcCounters are fakecuda's gauges a sharing test must leave as it found
// them.
var ipcCounters = []string{"fake_live_allocations", "fake_live_pools", "fake_live_events",
	"fake_live_pool_imports", "fake_live_ipc_event_opens"}

func ipcLive(t *testing.T) map[string]int64 {
	m := map[string]int64{}
	for _, c := range ipcCounters {
		m[c] = fcall(t, c)
	}
	return m
}

// ipcBackTo waits for the gauges and the lifetime objects to come back to
// what they were.
func ipcBackTo(t *testing.T, live map[string]int64, objects int64) {
	t.Helper()
	ok := ltSettle(func() bool {
		for c, v := range live {
			if fcall(t, c) != v {
				return false
			}
		}
		return lifetime.ReadStats().Objects == objects
	})
	if !ok {
		for c, v := range live {
			assert.Equal(t, v, fcall(t, c), c)
		}
		assert.Equal(t, objects, lifetime.ReadStats().Objects, "lifetime objects")
	}
}

// exporter is the exporting side of a test: an exportable pool, a buffer
// of it filled with want, and an interprocess event recorded after.
type exporter struct {
	pool *driver.MemPool
	buf  *driver.Buffer[int32]
	ev   *driver.Event
	want []int32
}

func newExporter(t *testing.T, f *fixture, n int) *exporter {
	t.Helper()
	x := &exporter{want: make([]int32, n)}
	for i := range x.want {
		x.want[i] = int32(3*i + 1)
	}
	var err error
	x.pool, err = f.ctx.NewExportableMemPool()
	require.NoError(t, err)
	x.buf, err = driver.AllocFromPool[int32](f.s, x.pool, n)
	require.NoError(t, err)
	require.NoError(t, x.buf.CopyFromHostAsync(f.s, x.want))
	x.ev, err = f.ctx.NewEvent(driver.EventInterprocess | driver.EventDisableTiming)
	require.NoError(t, err)
	require.NoError(t, x.ev.Record(f.s))
	return x
}

// TestPoolAccessChecks: the pool's own device reads as read-write and its
// access cannot change; nil and zero devices, unknown flags, nil, zero and
// closed pools are refused; fakecuda has one device, so another ordinal
// cannot be named.
func TestPoolAccessChecks(t *testing.T) {
	f := ltSetup(t)
	dev := f.ctx.Device()
	for _, mk := range []func() (*driver.MemPool, error){f.ctx.NewMemPool, f.ctx.DefaultMemPool, f.ctx.NewExportableMemPool} {
		p, err := mk()
		require.NoError(t, err)
		acc, err := p.Access(dev)
		require.NoError(t, err)
		assert.Equal(t, driver.PoolAccessReadWrite, acc)
		for _, a := range []driver.PoolAccess{driver.PoolAccessNone, driver.PoolAccessRead, driver.PoolAccessReadWrite} {
			assert.ErrorIs(t, p.SetAccess(dev, a), driver.ErrInvalidArgument, "the owner's access (%v)", a)
		}
		assert.ErrorIs(t, p.SetAccess(nil, driver.PoolAccessRead), driver.ErrInvalidArgument)
		assert.ErrorIs(t, p.SetAccess(new(driver.Device), driver.PoolAccessRead), driver.ErrInvalidArgument)
		assert.ErrorIs(t, p.SetAccess(dev, driver.PoolAccess(2)), driver.ErrInvalidArgument)
		assert.ErrorIs(t, p.SetAccess(dev, driver.PoolAccess(7)), driver.ErrInvalidArgument)
		_, err = p.Access(nil)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument)
		_, err = p.Access(new(driver.Device))
		assert.ErrorIs(t, err, driver.ErrInvalidArgument)
		require.NoError(t, p.Close())
		assert.ErrorIs(t, p.SetAccess(dev, driver.PoolAccessRead), driver.ErrClosed)
		_, err = p.Access(dev)
		assert.ErrorIs(t, err, driver.ErrClosed)
	}
	var nilPool *driver.MemPool
	_, err := nilPool.Access(dev)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	assert.ErrorIs(t, new(driver.MemPool).SetAccess(dev, driver.PoolAccessRead), driver.ErrClosed)
	_, err = driver.DeviceByOrdinal(1)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "fakecuda has one device")
	assert.Equal(t, "read-write", driver.PoolAccessReadWrite.String())
	assert.Equal(t, "none", driver.PoolAccessNone.String())
	assert.Equal(t, "read", driver.PoolAccessRead.String())
	assert.Equal(t, "PoolAccess(9)", driver.PoolAccess(9).String())
}

// TestOnlyExportablePoolsShare: memory of Alloc, AllocAsync, the default
// pool and a pool made with NewMemPool cannot be exported, nor can a view
// or those pools themselves: errors matching ErrInvalidArgument, nothing
// reaches the driver.
func TestOnlyExportablePoolsShare(t *testing.T) {
	f := ltSetup(t)
	plain, err := driver.Alloc[int32](f.ctx, 16)
	require.NoError(t, err)
	defer plain.Close()
	async, err := driver.AllocAsync[int32](f.s, 16)
	require.NoError(t, err)
	defer async.Close()
	def, err := f.ctx.DefaultMemPool()
	require.NoError(t, err)
	defer def.Close()
	fromDef, err := driver.AllocFromPool[int32](f.s, def, 16)
	require.NoError(t, err)
	defer fromDef.Close()
	mp, err := f.ctx.NewMemPool()
	require.NoError(t, err)
	defer mp.Close()
	fromMP, err := driver.AllocFromPool[int32](f.s, mp, 16)
	require.NoError(t, err)
	defer fromMP.Close()
	for name, b := range map[string]*driver.Buffer[int32]{"Alloc": plain, "AllocAsync": async, "default pool": fromDef, "NewMemPool": fromMP} {
		_, err := driver.ExportBuffer(b)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, name)
		assert.Contains(t, err.Error(), "NewExportableMemPool", name)
	}
	for name, p := range map[string]*driver.MemPool{"default pool": def, "NewMemPool": mp} {
		file, err := p.ExportFD()
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, name)
		assert.Nil(t, file)
	}
	x := newExporter(t, f, 16)
	defer x.pool.Close()
	defer x.ev.Close()
	defer x.buf.Close()
	view, err := x.buf.Slice(4, 8)
	require.NoError(t, err)
	defer view.Close()
	_, err = driver.ExportBuffer(view)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "a view")
	_, err = driver.ExportBuffer[int32](nil)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	_, err = driver.ExportBuffer(new(driver.Buffer[int32]))
	assert.ErrorIs(t, err, driver.ErrClosed)
	_, err = driver.ExportBuffer(x.buf)
	assert.NoError(t, err, "the control")
	require.NoError(t, f.s.Synchronize())
}

// TestPoolIPCRoundTrip: the whole path, over a Unix socket pair: the
// pool's descriptor passed with SendFD, the buffer's export data and the
// event's handle marshalled; the importer waits for the event and reads
// exactly what the exporter wrote, writes its answer, and closes its side
// before the exporter closes its own. Nothing is left.
func TestPoolIPCRoundTrip(t *testing.T) {
	f := ltSetup(t)
	lifetime.Flush()
	live, objects := ipcLive(t), lifetime.ReadStats().Objects
	const n = 1000
	x := newExporter(t, f, n)
	a, b := ipcPair(t)

	// Exporter: the pool's descriptor, then the data.
	file, err := x.pool.ExportFD()
	require.NoError(t, err)
	require.NoError(t, driver.SendFD(a, file))
	require.NoError(t, file.Close(), "the exporter's copy of the descriptor")
	exp, err := driver.ExportBuffer(x.buf)
	require.NoError(t, err)
	assert.Equal(t, 4*n, exp.Bytes())
	msg, err := exp.MarshalBinary()
	require.NoError(t, err)
	require.Len(t, msg, 72)
	evh, err := x.ev.IPCHandle()
	require.NoError(t, err)

	// Importer.
	got, err := driver.ReceiveFD(b)
	require.NoError(t, err)
	ipool, err := f.ctx.ImportMemPool(got)
	require.NoError(t, err)
	require.NoError(t, got.Close(), "the importer's descriptor, once imported")
	var exp2 driver.BufferExport
	require.NoError(t, exp2.UnmarshalBinary(msg))
	assert.Equal(t, exp, exp2)
	ibuf, err := driver.ImportBuffer[int32](ipool, exp2)
	require.NoError(t, err)
	assert.Equal(t, n, ibuf.Len())
	iev, err := f.ctx.OpenIPCEvent(evh)
	require.NoError(t, err)
	s2, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	require.NoError(t, s2.WaitEvent(iev))
	read, err := ibuf.ToHost(s2)
	require.NoError(t, err)
	assert.Equal(t, x.want, read, "the importer reads what the exporter wrote")
	_, err = driver.AllocFromPool[int32](s2, ipool, 4)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "an imported pool allocates nothing")
	_, err = ipool.ExportFD()
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "an imported pool is not exportable")
	// The importer writes its answer through the import.
	answer := make([]int32, n)
	for i := range answer {
		answer[i] = -int32(i)
	}
	require.NoError(t, ibuf.CopyFromHost(s2, answer))
	require.NoError(t, iev.Record(s2))
	// The importer closes everything; then the exporter reads the answer.
	require.NoError(t, ibuf.Close())
	assert.Equal(t, live["fake_live_pool_imports"], fcall(t, "fake_live_pool_imports"), "the import was freed by Close")
	require.NoError(t, ipool.Close())
	require.NoError(t, x.ev.Synchronize())
	require.NoError(t, iev.Close())
	back, err := x.buf.ToHost(f.s)
	require.NoError(t, err)
	assert.Equal(t, answer, back, "the exporter reads the importer's answer")
	require.NoError(t, x.buf.Close())
	require.NoError(t, x.ev.Close())
	require.NoError(t, x.pool.Close())
	require.NoError(t, f.s.Synchronize())
	require.NoError(t, s2.Close())
	ipcBackTo(t, live, objects)
}

// TestPoolIPCExporterClosesPoolFirst: the exporter closes its pool (and
// descriptor) at once after exporting; the pool lives on for its buffer,
// the importer works, and the importer's pool closed before its buffer
// waits for it.
func TestPoolIPCExporterClosesPoolFirst(t *testing.T) {
	f := ltSetup(t)
	lifetime.Flush()
	live, objects := ipcLive(t), lifetime.ReadStats().Objects
	x := newExporter(t, f, 64)
	file, err := x.pool.ExportFD()
	require.NoError(t, err)
	exp, err := driver.ExportBuffer(x.buf)
	require.NoError(t, err)
	evh, err := x.ev.IPCHandle()
	require.NoError(t, err)
	require.NoError(t, x.pool.Close(), "the exporter's pool, first")
	assert.Equal(t, live["fake_live_pools"]+1, fcall(t, "fake_live_pools"), "destroyed only once its buffer is freed")

	ipool, err := f.ctx.ImportMemPool(file)
	require.NoError(t, err)
	require.NoError(t, file.Close())
	ibuf, err := driver.ImportBuffer[int32](ipool, exp)
	require.NoError(t, err)
	require.NoError(t, ipool.Close(), "the imported pool before its buffer")
	iev, err := f.ctx.OpenIPCEvent(evh)
	require.NoError(t, err)
	require.NoError(t, iev.Synchronize())
	read, err := ibuf.ToHost(f.s)
	require.NoError(t, err)
	assert.Equal(t, x.want, read)
	assert.Equal(t, live["fake_live_pools"]+2, fcall(t, "fake_live_pools"), "the imported pool waits for its buffer")
	require.NoError(t, ibuf.Close())
	assert.Equal(t, live["fake_live_pools"]+1, fcall(t, "fake_live_pools"), "the imported pool went with its buffer")
	require.NoError(t, iev.Close())
	require.NoError(t, x.buf.Close())
	require.NoError(t, x.ev.Close())
	require.NoError(t, f.s.Synchronize())
	ipcBackTo(t, live, objects)
}

// TestPoolIPCDroppedWithoutClose: an imported pool, an imported buffer
// and an opened event that become unreachable without Close are released
// by cleanups, the buffer before its pool; then the exporter frees its
// memory with no bad use.
func TestPoolIPCDroppedWithoutClose(t *testing.T) {
	f := ltSetup(t)
	lifetime.Flush()
	live, objects := ipcLive(t), lifetime.ReadStats().Objects
	x := newExporter(t, f, 64)
	func() {
		file, err := x.pool.ExportFD()
		require.NoError(t, err)
		defer file.Close()
		exp, err := driver.ExportBuffer(x.buf)
		require.NoError(t, err)
		evh, err := x.ev.IPCHandle()
		require.NoError(t, err)
		ipool, err := f.ctx.ImportMemPool(file)
		require.NoError(t, err)
		ibuf, err := driver.ImportBuffer[int32](ipool, exp)
		require.NoError(t, err)
		iev, err := f.ctx.OpenIPCEvent(evh)
		require.NoError(t, err)
		require.NoError(t, iev.Synchronize())
		read, err := ibuf.ToHost(f.s)
		require.NoError(t, err)
		assert.Equal(t, x.want, read)
		runtime.KeepAlive(ipool)
	}()
	assert.True(t, ltSettle(func() bool {
		return fcall(t, "fake_live_pool_imports") == live["fake_live_pool_imports"] &&
			fcall(t, "fake_live_ipc_event_opens") == live["fake_live_ipc_event_opens"] &&
			fcall(t, "fake_live_pools") == live["fake_live_pools"]+1
	}), "the dropped import, imported pool and opened event are released")
	require.NoError(t, x.buf.Close())
	require.NoError(t, x.ev.Close())
	require.NoError(t, x.pool.Close())
	require.NoError(t, f.s.Synchronize())
	ipcBackTo(t, live, objects)
}

// TestImportChecks: bad input to the import side is refused with an error
// matching ErrInvalidArgument (or ErrClosed for closed objects), and
// leaves nothing made.
func TestImportChecks(t *testing.T) {
	f := ltSetup(t)
	lifetime.Flush()
	live, objects := ipcLive(t), lifetime.ReadStats().Objects
	x := newExporter(t, f, 10)
	file, err := x.pool.ExportFD()
	require.NoError(t, err)
	defer file.Close()
	exp, err := driver.ExportBuffer(x.buf)
	require.NoError(t, err)
	ipool, err := f.ctx.ImportMemPool(file)
	require.NoError(t, err)

	_, err = f.ctx.ImportMemPool(nil)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	_, err = f.ctx.ImportMemPool(new(os.File))
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "a zero os.File")
	closed, err := os.Open(os.DevNull)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	_, err = f.ctx.ImportMemPool(closed)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "a closed file")
	other, err := os.Open(os.DevNull)
	require.NoError(t, err)
	_, err = f.ctx.ImportMemPool(other)
	assert.ErrorIs(t, err, driver.ErrInvalidValue, "a file that is no exported pool: CUDA refuses it")
	require.NoError(t, other.Close())
	_, err = new(driver.Context).ImportMemPool(file)
	assert.ErrorIs(t, err, driver.ErrClosed)

	_, err = driver.ImportBuffer[int32](ipool, driver.BufferExport{})
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "the zero export")
	_, err = driver.ImportBuffer[int32](nil, exp)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	_, err = driver.ImportBuffer[int32](new(driver.MemPool), exp)
	assert.ErrorIs(t, err, driver.ErrClosed)
	_, err = driver.ImportBuffer[int32](x.pool, exp)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "a pool that was not imported")
	_, err = driver.ImportBuffer[[3]int32](ipool, exp)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "40 bytes are not whole 12-byte elements")
	_, err = driver.ImportBuffer[*int](ipool, exp)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "Go pointers")
	asBytes, err := driver.ImportBuffer[byte](ipool, exp)
	require.NoError(t, err, "the same memory, as bytes")
	assert.Equal(t, 40, asBytes.Len())
	require.NoError(t, asBytes.Close())

	var e driver.BufferExport
	assert.ErrorIs(t, e.UnmarshalBinary(make([]byte, 71)), driver.ErrInvalidArgument)
	assert.Equal(t, driver.BufferExport{}, e, "left as it was")
	assert.ErrorIs(t, (*driver.BufferExport)(nil).UnmarshalBinary(make([]byte, 72)), driver.ErrInvalidArgument)
	damaged, err := exp.MarshalBinary()
	require.NoError(t, err)
	damaged[0] ^= 0xff
	require.NoError(t, e.UnmarshalBinary(damaged))
	_, err = driver.ImportBuffer[int32](ipool, e)
	assert.ErrorIs(t, err, driver.ErrInvalidValue, "damaged export data: CUDA refuses it")

	_, err = f.ctx.OpenIPCEvent(driver.IPCEventHandle{})
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "the zero handle")
	plainEv, err := f.ctx.NewEvent(driver.EventDisableTiming)
	require.NoError(t, err)
	_, err = plainEv.IPCHandle()
	assert.ErrorIs(t, err, driver.ErrInvalidValue, "an event made without EventInterprocess")
	require.NoError(t, plainEv.Close())
	_, err = plainEv.IPCHandle()
	assert.ErrorIs(t, err, driver.ErrClosed)
	_, err = new(driver.Event).IPCHandle()
	assert.ErrorIs(t, err, driver.ErrClosed)
	_, err = (*driver.Event)(nil).IPCHandle()
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)

	require.NoError(t, ipool.Close())
	_, err = driver.ImportBuffer[int32](ipool, exp)
	assert.ErrorIs(t, err, driver.ErrClosed)
	control, err := x.pool.ExportFD()
	if assert.NoError(t, err, "the control") {
		require.NoError(t, control.Close())
	}
	require.NoError(t, x.buf.Close())
	_, err = driver.ExportBuffer(x.buf)
	assert.ErrorIs(t, err, driver.ErrClosed)
	require.NoError(t, x.ev.Close())
	require.NoError(t, x.pool.Close())
	_, err = x.pool.ExportFD()
	assert.ErrorIs(t, err, driver.ErrClosed)
	require.NoError(t, f.s.Synchronize())
	ipcBackTo(t, live, objects)
}

// TestImportRacesClose: imports, reads and closes of imported buffers race
// the Close of the imported pool and of the opened event; every call
// succeeds or fails with ErrClosed, and nothing is left or misused.
func TestImportRacesClose(t *testing.T) {
	f := ltSetup(t)
	lifetime.Flush()
	live, objects := ipcLive(t), lifetime.ReadStats().Objects
	x := newExporter(t, f, 32)
	exp, err := driver.ExportBuffer(x.buf)
	require.NoError(t, err)
	evh, err := x.ev.IPCHandle()
	require.NoError(t, err)
	for round := 0; round < 20; round++ {
		file, err := x.pool.ExportFD()
		require.NoError(t, err)
		ipool, err := f.ctx.ImportMemPool(file)
		require.NoError(t, err)
		require.NoError(t, file.Close())
		iev, err := f.ctx.OpenIPCEvent(evh)
		require.NoError(t, err)
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					b, err := driver.ImportBuffer[int32](ipool, exp)
					if err != nil {
						ltClosedOr(t, "ImportBuffer", err)
						ltClosedOr(t, "Event.Synchronize", iev.Synchronize())
						continue
					}
					ltClosedOr(t, "Stream.WaitEvent", f.s.WaitEvent(iev))
					got, err := b.ToHost(f.s)
					if assert.NoError(t, err) {
						assert.Equal(t, x.want, got)
					}
					if g%2 == 0 {
						assert.NoError(t, b.Close())
					} // the others are dropped
				}
			}()
		}
		ltClosedOr(t, "MemPool.Close", ipool.Close())
		ltClosedOr(t, "Event.Close", iev.Close())
		wg.Wait()
	}
	assert.True(t, ltSettle(func() bool { return fcall(t, "fake_live_pool_imports") == live["fake_live_pool_imports"] }),
		"every import freed before the exporter's buffer")
	require.NoError(t, x.buf.Close())
	require.NoError(t, x.ev.Close())
	require.NoError(t, x.pool.Close())
	require.NoError(t, f.s.Synchronize())
	ipcBackTo(t, live, objects)
}

// TestSendReceiveFD: a descriptor passes over a socket pair as a new
// descriptor of the same file; a nil, zero or closed connection or file,
// a message without a descriptor, one with two, and the other end's close
// are errors, and leave no descriptor open.
func TestSendReceiveFD(t *testing.T) {
	a, b := ipcPair(t)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, driver.SendFD(a, w))
	require.NoError(t, w.Close())
	got, err := driver.ReceiveFD(b)
	require.NoError(t, err)
	_, err = got.Write([]byte("hello"))
	require.NoError(t, err)
	require.NoError(t, got.Close())
	buf := make([]byte, 5)
	_, err = io.ReadFull(r, buf)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(buf), "the received descriptor writes into the same pipe")

	assert.ErrorIs(t, driver.SendFD(nil, r), driver.ErrInvalidArgument)
	assert.ErrorIs(t, driver.SendFD(a, nil), driver.ErrInvalidArgument)
	assert.ErrorIs(t, driver.SendFD(a, new(os.File)), driver.ErrInvalidArgument)
	assert.Error(t, driver.SendFD(new(net.UnixConn), r), "a zero connection")
	closedFile, err := os.Open(os.DevNull)
	require.NoError(t, err)
	require.NoError(t, closedFile.Close())
	assert.ErrorIs(t, driver.SendFD(a, closedFile), driver.ErrInvalidArgument)
	_, err = driver.ReceiveFD(nil)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	_, err = driver.ReceiveFD(new(net.UnixConn))
	assert.Error(t, err, "a zero connection")

	// A message with no descriptor; one with two (both closed).
	fds0 := openFDs(t)
	_, err = a.Write([]byte{'x'})
	require.NoError(t, err)
	_, err = driver.ReceiveFD(b)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "no descriptor")
	_, _, err = a.WriteMsgUnix([]byte{'y'}, syscall.UnixRights(int(r.Fd()), int(r.Fd())), nil)
	require.NoError(t, err)
	_, err = driver.ReceiveFD(b)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "two descriptors")
	assert.Equal(t, fds0, openFDs(t), "the received descriptors were closed")

	// The other end closes; then this end.
	require.NoError(t, a.Close())
	_, err = driver.ReceiveFD(b)
	assert.ErrorIs(t, err, io.EOF)
	assert.Error(t, driver.SendFD(a, r), "a closed connection")
	require.NoError(t, b.Close())
	_, err = driver.ReceiveFD(b)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "a closed connection")
}

// openFDs counts the process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}
