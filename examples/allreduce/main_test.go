package main

import (
	"context"
	"flag"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/exampletest"
	"github.com/purecuda/cuda/nccl"
)

func TestMain(m *testing.M) { exampletest.Main(m, main) }

func TestNoGPU(t *testing.T) { exampletest.NoGPU(t, "allreduce") }

// TestOnThisMachine runs the example for real, one process on every GPU,
// where there is a GPU (and must, under PURECUDA_REQUIRE_GPU).
func TestOnThisMachine(t *testing.T) {
	stdout := exampletest.OnThisMachine(t)
	assert.Contains(t, stdout, "allreduce: 1048576 sums right on each of ")
}

// TestOptionsFromTorchrunEnvironment: the flags default to torchrun's
// variables; flags win.
func TestOptionsFromTorchrunEnvironment(t *testing.T) {
	env := map[string]string{"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29501"}
	var o options
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	o.register(fs, func(k string) string { return env[k] })
	require.NoError(t, fs.Parse(nil))
	assert.Equal(t, options{rank: 3, world: 4, localRank: 1, n: 1 << 20, addr: "10.0.0.1:29501", timeout: 2 * time.Minute}, o)
	require.NoError(t, o.check())

	o = options{}
	fs = flag.NewFlagSet("t", flag.ContinueOnError)
	o.register(fs, func(k string) string { return env[k] })
	require.NoError(t, fs.Parse([]string{"-rank", "0", "-addr", "[::1]:1234"}))
	assert.Equal(t, 0, o.rank)
	assert.Equal(t, "[::1]:1234", o.addr)
	assert.Equal(t, 1, o.localRank, "LOCAL_RANK still")

	o = options{}
	fs = flag.NewFlagSet("t", flag.ContinueOnError)
	o.register(fs, func(string) string { return "" })
	require.NoError(t, fs.Parse(nil))
	assert.Equal(t, options{world: 1, n: 1 << 20, timeout: 2 * time.Minute}, o, "one process by default")
	require.NoError(t, o.check())

	for _, bad := range []options{{world: 0, n: 1}, {rank: 2, world: 2, n: 1, addr: "a:1"}, {world: 2, n: 1}, {world: 1, n: 0}, {world: 1, n: 1, localRank: -1}} {
		assert.Error(t, bad.check(), "%+v", bad)
	}
}

// TestRendezvousOverTCP: rank 0 serves the ID to every other rank, which
// may start first (it retries); no GPU or NCCL is needed to serve a given
// ID, so the server is tested with one made here.
func TestRendezvousOverTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // the port is free again: the others start before rank 0
	var id nccl.UniqueID
	for i := range id {
		id[i] = byte(i * 3)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const others = 3
	got := make([]nccl.UniqueID, others)
	errs := make([]error, others)
	var wg sync.WaitGroup
	for i := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = fetchID(ctx, addr)
		}()
	}
	time.Sleep(150 * time.Millisecond) // some dial before the server is up
	ln, err = net.Listen("tcp", addr)
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { serveID(ln, id, others); close(done) }()
	wg.Wait()
	for i := range others {
		require.NoError(t, errs[i])
		assert.Equal(t, id, got[i])
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop after serving every rank")
	}

	// Nobody serves: the fetch gives up when its context ends.
	short, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	_, err = fetchID(short, addr)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}
