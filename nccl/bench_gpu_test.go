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
	streams, comms := benchRanks(b, n)
	for _, size := range []int{8, 1 << 30} {
		bufs := make([]*driver.Buffer[float32], n)
		for i := range bufs {
			bufs[i], err = driver.AllocZeroed[float32](streams[i], size/4)
			require.NoError(b, err)
		}
		b.Run(fmt.Sprintf("bytes=%d", size), func(b *testing.B) {
			run := groupedAllReduce(b, comms, streams, bufs)
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
	streams, comms := benchRanks(b, n)
	bufs := make([]*driver.Buffer[float32], n)
	for i := range bufs {
		bufs[i], err = driver.AllocZeroed[float32](streams[i], 2)
		require.NoError(b, err)
		defer bufs[i].Close()
	}
	run := groupedAllReduce(b, comms, streams, bufs)
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
	streams, comms := benchRanks(b, 1)
	s := streams[0]
	buf, err := driver.AllocZeroed[float32](s, 2)
	require.NoError(b, err)
	defer buf.Close()
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

// benchRanks makes a communicator over the first n GPUs from one process
// (InitAll), with a stream per GPU; everything is closed when b's run
// ends, the communicators first.
func benchRanks(b *testing.B, n int) ([]*driver.Stream, []*nccl.Comm) {
	b.Helper()
	ctxs := make([]*driver.Context, n)
	streams := make([]*driver.Stream, n)
	for i := range ctxs {
		dev, err := driver.DeviceByOrdinal(i)
		require.NoError(b, err)
		ctxs[i], err = dev.PrimaryContext()
		require.NoError(b, err)
		b.Cleanup(func() { _ = ctxs[i].Close() })
		streams[i], err = ctxs[i].NewStream(driver.StreamNonBlocking)
		require.NoError(b, err)
		b.Cleanup(func() { _ = streams[i].Close() })
	}
	comms, err := nccl.InitAll(ctxs...)
	require.NoError(b, err)
	b.Cleanup(func() {
		for _, c := range comms {
			_ = c.Close()
		}
	})
	return streams, comms
}

// groupedAllReduce returns a function that all-reduces bufs[i] in place on
// every rank, in one Group.
func groupedAllReduce(b *testing.B, comms []*nccl.Comm, streams []*driver.Stream, bufs []*driver.Buffer[float32]) func() {
	return func() {
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
}
