//go:build linux

package nccl_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/nccl"
)

// BenchmarkAllReduce: bus bandwidth of an all-reduce of float32 over every
// GPU from one process (InitAll, grouped), as nccl-tests computes it
// (2(k-1)/k × bytes / time), at 8 bytes and 1 GiB.
func BenchmarkAllReduce(b *testing.B) {
	gputest.Require(b)
	n, err := driver.DeviceCount()
	require.NoError(b, err)
	ctxs := make([]*driver.Context, n)
	streams := make([]*driver.Stream, n)
	for i := range ctxs {
		dev, err := driver.DeviceByOrdinal(i)
		require.NoError(b, err)
		ctxs[i], err = dev.PrimaryContext()
		require.NoError(b, err)
		defer ctxs[i].Close()
		streams[i], err = ctxs[i].NewStream(driver.StreamNonBlocking)
		require.NoError(b, err)
		defer streams[i].Close()
	}
	comms, err := nccl.InitAll(ctxs...)
	require.NoError(b, err)
	defer func() {
		for _, c := range comms {
			_ = c.Close()
		}
	}()
	for _, size := range []int{8, 1 << 30} {
		bufs := make([]*driver.Buffer[float32], n)
		for i := range bufs {
			bufs[i], err = driver.AllocZeroed[float32](streams[i], size/4)
			require.NoError(b, err)
		}
		b.Run(fmt.Sprintf("bytes=%d", size), func(b *testing.B) {
			run := func() {
				if err := nccl.Group(func() error {
					for i, c := range comms {
						if err := nccl.AllReduce(c, streams[i], bufs[i], bufs[i], nccl.Sum); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			for range 5 {
				run()
			}
			for _, s := range streams {
				require.NoError(b, s.Synchronize())
			}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for b.Loop() {
				run()
			}
			for _, s := range streams {
				require.NoError(b, s.Synchronize())
			}
			per := time.Since(start).Seconds() / float64(b.N)
			b.ReportMetric(per*1e6, "µs/op")
			b.ReportMetric(2*float64(n-1)/float64(n)*float64(size)/per/1e9, "busGB/s")
		})
		for _, buf := range bufs {
			_ = buf.Close()
		}
	}
}

// BenchmarkAllReduceEnqueue: the host's cost of queuing a grouped 8-byte
// all-reduce on every GPU, the GPU's work not waited for inside the loop
// (ncclbench's AllReduceEnqueue in C).
func BenchmarkAllReduceEnqueue(b *testing.B) {
	gputest.Require(b)
	n, err := driver.DeviceCount()
	require.NoError(b, err)
	ctxs := make([]*driver.Context, n)
	streams := make([]*driver.Stream, n)
	bufs := make([]*driver.Buffer[float32], n)
	for i := range ctxs {
		dev, err := driver.DeviceByOrdinal(i)
		require.NoError(b, err)
		ctxs[i], err = dev.PrimaryContext()
		require.NoError(b, err)
		defer ctxs[i].Close()
		streams[i], err = ctxs[i].NewStream(driver.StreamNonBlocking)
		require.NoError(b, err)
		defer streams[i].Close()
		bufs[i], err = driver.AllocZeroed[float32](streams[i], 2)
		require.NoError(b, err)
		defer bufs[i].Close()
	}
	comms, err := nccl.InitAll(ctxs...)
	require.NoError(b, err)
	defer func() {
		for _, c := range comms {
			_ = c.Close()
		}
	}()
	run := func() {
		if err := nccl.Group(func() error {
			for i, c := range comms {
				if err := nccl.AllReduce(c, streams[i], bufs[i], bufs[i], nccl.Sum); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	for range 5 {
		run()
	}
	for _, s := range streams {
		require.NoError(b, s.Synchronize())
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run()
		if i%1000 == 999 {
			b.StopTimer()
			for _, s := range streams {
				require.NoError(b, s.Synchronize())
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	for _, s := range streams {
		require.NoError(b, s.Synchronize())
	}
}

// BenchmarkAllReduceOneRank: the host's cost of queuing one 8-byte
// all-reduce of a one-rank communicator (InitAll over device 0), not
// grouped, per call, the GPU's work waited for every 1000 calls; with
// PURECUDA_PROFILE_DIR, a fine-grained CPU profile (oneRank.prof).
func BenchmarkAllReduceOneRank(b *testing.B) {
	gputest.Require(b)
	dev, err := driver.DeviceByOrdinal(0)
	require.NoError(b, err)
	ctx, err := dev.PrimaryContext()
	require.NoError(b, err)
	defer ctx.Close()
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(b, err)
	defer s.Close()
	buf, err := driver.AllocZeroed[float32](s, 2)
	require.NoError(b, err)
	defer buf.Close()
	comms, err := nccl.InitAll(ctx)
	require.NoError(b, err)
	defer comms[0].Close()
	require.NoError(b, nccl.AllReduce(comms[0], s, buf, buf, nccl.Sum))
	require.NoError(b, s.Synchronize())
	b.ReportAllocs()
	defer gputest.Profile(b, "oneRank")()
	b.ResetTimer()
	for i := range b.N {
		if err := nccl.AllReduce(comms[0], s, buf, buf, nccl.Sum); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			require.NoError(b, s.Synchronize())
		}
	}
	require.NoError(b, s.Synchronize())
}
