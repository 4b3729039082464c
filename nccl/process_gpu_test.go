//go:build linux

package nccl_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/nccl"
)

// Two processes, one GPU each, a communicator made with InitRank: the way
// NCCL runs across machines. Each test starts two children of the test
// binary (rank 0 and rank 1, each with the environment under test, which
// NCCL reads once per process); rank 0 makes the UniqueID and hands it to
// rank 1 through a file.

// exitMark is what a rank that exits in the middle prints first.
const exitMark = "rank 1 exits now"

const (
	rankEnv = "PURECUDA_NCCL_TEST_RANK" // the child's rank
	dirEnv  = "PURECUDA_NCCL_TEST_DIR"  // where rank 0 writes the ID
)

// socketEnv forces NCCL's network transport over loopback: the path it
// takes between machines.
var socketEnv = []string{"NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1", "NCCL_NET=Socket", "NCCL_SOCKET_IFNAME=lo"}

// twoRanks runs t's body in two children (it returns the child's rank, or
// -1 in the parent, which waits for both and reports them). Skips with
// fewer than two GPUs. With dies, rank 1 may end by printing exitMark and
// exiting in the middle.
func twoRanks(t *testing.T, dies bool, env ...string) int {
	t.Helper()
	if r := os.Getenv(rankEnv); r != "" && os.Getenv(childEnv) == t.Name() {
		rank, err := strconv.Atoi(r)
		require.NoError(t, err)
		return rank
	}
	gputest.Require(t)
	if n, err := driver.DeviceCount(); err != nil || n < 2 {
		t.Skipf("two processes need two GPUs; this machine has %d (%v)", n, err)
	}
	if _, _, _, err := nccl.Version(); err != nil {
		if gputest.Required() {
			t.Fatalf("PURECUDA_REQUIRE_GPU is set and NCCL is not usable: %v", err)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	var wg sync.WaitGroup
	outs := make([][]byte, 2)
	errs := make([]error, 2)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v", "-test.timeout=120s")
			cmd.Env = append(append(os.Environ(), childEnv+"="+t.Name(), rankEnv+"="+strconv.Itoa(r), dirEnv+"="+dir,
				"NCCL_NVLS_ENABLE=0"), env...)
			outs[r], errs[r] = cmd.CombinedOutput()
		}()
	}
	wg.Wait()
	for r := range 2 {
		switch {
		case dies && r == 1:
			assert.Contains(t, string(outs[r]), exitMark, "rank 1 got as far as its exit:\n%s", outs[r])
		case assert.NoError(t, errs[r], "rank %d:\n%s", r, outs[r]):
			assert.Contains(t, string(outs[r]), "--- PASS: "+t.Name(), "rank %d ran:\n%s", r, outs[r])
		}
		t.Logf("rank %d:\n%s", r, outs[r])
	}
	return -1
}

// joinRank makes this child's rank of a two-rank communicator on GPU rank.
func joinRank(t *testing.T, rank int) (*driver.Context, *driver.Stream, *nccl.Comm) {
	t.Helper()
	path := filepath.Join(os.Getenv(dirEnv), "id")
	var id nccl.UniqueID
	if rank == 0 {
		var err error
		id, err = nccl.NewUniqueID()
		require.NoError(t, err)
		text, err := id.MarshalText()
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path+".tmp", text, 0o600))
		require.NoError(t, os.Rename(path+".tmp", path))
	} else {
		deadline := time.Now().Add(60 * time.Second)
		for {
			text, err := os.ReadFile(path)
			if err == nil {
				require.NoError(t, id.UnmarshalText([]byte(strings.TrimSpace(string(text)))))
				break
			}
			require.True(t, time.Now().Before(deadline), "rank 0 wrote no ID")
			time.Sleep(10 * time.Millisecond)
		}
	}
	dev, err := driver.DeviceByOrdinal(rank)
	require.NoError(t, err)
	ctx, err := dev.PrimaryContext()
	require.NoError(t, err)
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	ictx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := nccl.InitRank(ictx, ctx, id, 2, rank, nil)
	require.NoError(t, err)
	return ctx, s, c
}

// exchange checks an all-reduce of every type, a broadcast and a send and
// receive each way between the two ranks.
func exchange(t *testing.T, rank int, s *driver.Stream, c *nccl.Comm) {
	t.Helper()
	const n = 65537
	checkAllReduce[int8](t, rank, s, c, n)
	checkAllReduce[uint8](t, rank, s, c, n)
	checkAllReduce[int32](t, rank, s, c, n)
	checkAllReduce[uint32](t, rank, s, c, n)
	checkAllReduce[int64](t, rank, s, c, n)
	checkAllReduce[uint64](t, rank, s, c, n)
	checkAllReduce[float32](t, rank, s, c, n)
	checkAllReduce[float64](t, rank, s, c, n)

	v := make([]float64, n)
	for j := range v {
		v[j] = float64(rank*1000 + j)
	}
	b, err := driver.AllocCopy(s, v)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, nccl.Broadcast(c, s, b, b, 1))
	got, err := b.ToHost(s)
	require.NoError(t, err)
	for j, x := range got {
		require.Equal(t, float64(1000+j), x, "Broadcast element %d", j)
	}
	in, err := driver.AllocZeroed[float64](s, n)
	require.NoError(t, err)
	defer in.Close()
	out, err := driver.AllocCopy(s, v)
	require.NoError(t, err)
	defer out.Close()
	require.NoError(t, nccl.Group(func() error {
		return errors.Join(nccl.Send(c, s, out, 1-rank), nccl.Recv(c, s, in, 1-rank))
	}))
	got, err = in.ToHost(s)
	require.NoError(t, err)
	for j, x := range got {
		require.Equal(t, float64((1-rank)*1000+j), x, "Recv element %d", j)
	}
}

func checkAllReduce[T ~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64](t *testing.T, rank int, s *driver.Stream, c *nccl.Comm, n int) {
	t.Helper()
	v := make([]T, n)
	for j := range v {
		v[j] = T(rank + j%60)
	}
	b, err := driver.AllocCopy(s, v)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, nccl.AllReduce(c, s, b, b, nccl.Sum))
	got, err := b.ToHost(s)
	require.NoError(t, err)
	for j, x := range got {
		if want := T(2*(j%60) + 1); x != want {
			t.Fatalf("%T element %d: %v, want %v", x, j, x, want)
		}
	}
}

// TestTwoProcessesOnGPUs: InitRank in two processes, NCCL's own choice of
// transport (NVLink or PCIe between the GPUs).
func TestTwoProcessesOnGPUs(t *testing.T) {
	rank := twoRanks(t, false)
	if rank < 0 {
		return
	}
	ctx, s, c := joinRank(t, rank)
	exchange(t, rank, s, c)
	require.NoError(t, c.Close())
	require.NoError(t, s.Close())
	require.NoError(t, ctx.Close())
}

// TestTwoProcessesOverSocketsOnGPUs: the same through NCCL's network
// transport on loopback, the path between machines.
func TestTwoProcessesOverSocketsOnGPUs(t *testing.T) {
	rank := twoRanks(t, false, socketEnv...)
	if rank < 0 {
		return
	}
	ctx, s, c := joinRank(t, rank)
	exchange(t, rank, s, c)
	require.NoError(t, c.Close())
	require.NoError(t, s.Close())
	require.NoError(t, ctx.Close())
}

// TestKilledPeerOnGPUs: rank 1 exits in the middle (after one all-reduce,
// before the second); rank 0's second all-reduce waits for it, NCCL sees
// the connection close, and the watchdog aborts: Wait returns the error
// within 30 s, later calls fail, and closing leaves nothing behind.
func TestKilledPeerOnGPUs(t *testing.T) {
	rank := twoRanks(t, true, socketEnv...)
	if rank < 0 {
		return
	}
	ctx, s, c := joinRank(t, rank)
	b, err := driver.AllocZeroed[float32](s, 1<<16)
	require.NoError(t, err)
	require.NoError(t, nccl.AllReduce(c, s, b, b, nccl.Sum))
	require.NoError(t, c.Wait(context.Background(), s))
	if rank == 1 {
		fmt.Println(exitMark)
		os.Exit(0) // gone, without closing anything
	}
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, nccl.AllReduce(c, s, b, b, nccl.Sum))
	start := time.Now()
	wctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = c.Wait(wctx, s)
	t.Logf("Wait after %v: %v", time.Since(start), err)
	require.Error(t, err)
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "the failure was not noticed")
	assert.Less(t, time.Since(start), 30*time.Second)
	require.NoError(t, s.Synchronize(), "the aborted kernel ended")
	assert.Error(t, nccl.AllReduce(c, s, b, b, nccl.Sum))
	require.NoError(t, b.Close())
	require.NoError(t, c.Close())
	require.NoError(t, s.Close())
	require.NoError(t, ctx.Close())
}
