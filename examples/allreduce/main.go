// Command allreduce sums a vector across GPUs with NCCL and checks every
// element: on every GPU of this machine from one process, or with one
// process per GPU across machines.
//
// One process, every visible GPU:
//
//	go run github.com/purecuda/cuda/examples/allreduce@latest
//
// One process per GPU, on one machine or several: every process gets its
// rank, the number of processes, and where rank 0 listens, from flags or
// from the environment variables torchrun sets (RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT, LOCAL_RANK for the GPU on its machine):
//
//	RANK=0 WORLD_SIZE=2 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 allreduce   # on the first machine
//	RANK=1 WORLD_SIZE=2 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 allreduce   # on the second
//
// Rank 0 makes NCCL's UniqueID and serves it, as text, to every other
// rank that connects to MASTER_ADDR:MASTER_PORT (rendezvous.go); the others
// fetch it, retrying until rank 0 is up. Then every rank creates its
// communicator and all-reduces.
//
// Exit status: 0 when every sum is right, 1 when a step fails, 2 when
// there is no usable GPU or no NCCL (cmd/smoke says what to install).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/nccl"
)

func main() {
	var o options
	fs := flag.NewFlagSet("allreduce", flag.ExitOnError)
	o.register(fs, os.Getenv)
	_ = fs.Parse(os.Args[1:])
	if err := o.check(); err != nil {
		fmt.Fprintf(os.Stderr, "allreduce: %v\n", err)
		os.Exit(1)
	}
	if n, err := driver.DeviceCount(); err != nil || n == 0 {
		if err == nil {
			err = errors.New("the CUDA driver reports no device")
		}
		fmt.Fprintf(os.Stderr, "allreduce: no usable GPU: %v\n", err)
		fmt.Fprintln(os.Stderr, "Run `go run github.com/purecuda/cuda/cmd/smoke@latest` to see where purecuda looked and what to install.")
		os.Exit(2)
	}
	if _, _, _, err := nccl.Version(); err != nil {
		fmt.Fprintf(os.Stderr, "allreduce: no usable NCCL: %v\n", err)
		os.Exit(2)
	}
	var err error
	if o.world == 1 && o.addr == "" {
		err = oneProcess(os.Stdout, o.n)
	} else {
		err = oneRank(os.Stdout, o)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "allreduce: %v\n", err)
		os.Exit(1)
	}
}

// oneProcess all-reduces across every visible GPU from this process.
func oneProcess(w io.Writer, n int) error {
	count, err := driver.DeviceCount()
	if err != nil {
		return err
	}
	ctxs := make([]*driver.Context, count)
	streams := make([]*driver.Stream, count)
	bufs := make([]*driver.Buffer[float32], count)
	defer func() {
		for i := range ctxs {
			closeAll(bufs[i], streams[i], ctxs[i])
		}
	}()
	for i := range ctxs {
		dev, err := driver.DeviceByOrdinal(i)
		if err != nil {
			return err
		}
		if ctxs[i], err = dev.PrimaryContext(); err != nil {
			return err
		}
		if streams[i], err = ctxs[i].NewStream(driver.StreamNonBlocking); err != nil {
			return err
		}
		if bufs[i], err = driver.AllocCopy(streams[i], values(i, n)); err != nil {
			return err
		}
	}
	comms, err := nccl.InitAll(ctxs...)
	if err != nil {
		return err
	}
	defer func() {
		for _, c := range comms {
			_ = c.Close()
		}
	}()
	start := time.Now()
	// One process driving several GPUs groups their operations.
	err = nccl.Group(func() error {
		for i, c := range comms {
			if err := nccl.AllReduce(c, streams[i], bufs[i], bufs[i], nccl.Sum); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, c := range comms {
		if err := c.Wait(context.Background(), streams[i]); err != nil {
			return err
		}
	}
	elapsed := time.Since(start)
	for i := range comms {
		got, err := bufs[i].ToHost(streams[i])
		if err != nil {
			return err
		}
		if err := checkSums(got, count); err != nil {
			return fmt.Errorf("GPU %d: %w", i, err)
		}
	}
	fmt.Fprintf(w, "allreduce: %d sums right on each of %d GPUs (one process) in %v\n", n, count, elapsed)
	return nil
}

// oneRank is this process's part of an all-reduce with one process per
// GPU.
func oneRank(w io.Writer, o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	id, stop, err := rendezvous(ctx, o)
	if err != nil {
		return err
	}
	defer stop()
	dev, err := driver.DeviceByOrdinal(o.localRank)
	if err != nil {
		return err
	}
	dctx, err := dev.PrimaryContext()
	if err != nil {
		return err
	}
	s, err := dctx.NewStream(driver.StreamNonBlocking)
	if err != nil {
		closeAll(dctx)
		return err
	}
	buf, err := driver.AllocCopy(s, values(o.rank, o.n))
	if err != nil {
		closeAll(s, dctx)
		return err
	}
	defer closeAll(buf, s, dctx)
	// Non-blocking, so that ctx (the -timeout) bounds the join: a blocking
	// communicator's InitRank waits for every rank, however long.
	comm, err := nccl.InitRank(ctx, dctx, id, o.world, o.rank, &nccl.Config{NonBlocking: true})
	if err != nil {
		return err
	}
	defer comm.Close()
	start := time.Now()
	if err := nccl.AllReduce(comm, s, buf, buf, nccl.Sum); err != nil {
		return err
	}
	// Wait returns when a peer is gone, where Synchronize would wait for good.
	if err := comm.Wait(ctx, s); err != nil {
		return err
	}
	elapsed := time.Since(start)
	got, err := buf.ToHost(s)
	if err != nil {
		return err
	}
	if err := checkSums(got, o.world); err != nil {
		return fmt.Errorf("rank %d: %w", o.rank, err)
	}
	fmt.Fprintf(w, "allreduce: rank %d of %d (GPU %d): %d sums right in %v\n", o.rank, o.world, o.localRank, o.n, elapsed)
	return nil
}

// values is rank r's vector: element i is r+i (small integers, exact in
// float32 for the vector sizes used here).
func values(r, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r + i%4096)
	}
	return v
}

// checkSums checks the sum over ranks 0..world-1 of values.
func checkSums(got []float32, world int) error {
	for i, x := range got {
		want := float32(world*(i%4096) + world*(world-1)/2)
		if x != want {
			return fmt.Errorf("element %d is %v, want %v", i, x, want)
		}
	}
	return nil
}

// closeAll closes what it is given, in order, ignoring nil ones.
func closeAll(cs ...interface{ Close() error }) {
	for _, c := range cs {
		if c != nil {
			_ = c.Close()
		}
	}
}
