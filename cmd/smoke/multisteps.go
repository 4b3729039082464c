package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/nccl"
)

// multiN is the number of elements the peer and NCCL steps move: 1 MiB of
// float32, and then some.
const multiN = 1<<18 + 7

// stepPeer, with several GPUs: the peer access matrix, then a copy from the
// chosen device to another and back, checked element by element (with
// peer access enabled where the devices allow it). Skipped with one GPU.
func stepPeer(st *state) (summary string, err error) {
	count, err := driver.DeviceCount()
	if err != nil {
		return "", err
	}
	if count < 2 {
		return "", skipped("one device: no peer to copy to")
	}
	devs := make([]*driver.Device, count)
	for i := range devs {
		if devs[i], err = driver.DeviceByOrdinal(i); err != nil {
			return "", err
		}
	}
	var rows []string
	for _, a := range devs {
		var row strings.Builder
		for _, b := range devs {
			switch ok, err := a.CanAccessPeer(b); {
			case a == b || a.Ordinal() == b.Ordinal():
				row.WriteString(" -")
			case err != nil:
				return "", err
			case ok:
				row.WriteString(" Y")
			default:
				row.WriteString(" N")
			}
		}
		rows = append(rows, fmt.Sprintf("device %d can access:%s", a.Ordinal(), row.String()))
	}
	for _, r := range rows {
		st.note("%s", r)
	}
	other := devs[0]
	if other.Ordinal() == st.cfg.device {
		other = devs[1]
	}
	octx, err := other.PrimaryContext()
	if err != nil {
		return "", err
	}
	defer closeKeep(&err, octx)
	access, err := st.dev.CanAccessPeer(other)
	if err != nil {
		return "", err
	}
	how := "without peer access"
	if access {
		if err := st.ctx.EnablePeerAccess(octx); err != nil && !errors.Is(err, driver.ErrPeerAccessAlreadyEnabled) {
			return "", err
		}
		how = "with peer access"
	}
	s, err := st.ctx.NewStream(driver.StreamNonBlocking)
	if err != nil {
		return "", err
	}
	defer closeKeep(&err, s)
	in := make([]float32, multiN)
	for i := range in {
		in[i] = float32(i%65536) - 7
	}
	src, err := driver.AllocCopy(s, in)
	if err != nil {
		return "", err
	}
	defer closeKeep(&err, src)
	there, err := driver.Alloc[float32](octx, multiN)
	if err != nil {
		return "", err
	}
	defer closeKeep(&err, there)
	back, err := driver.AllocZeroed[float32](s, multiN)
	if err != nil {
		return "", err
	}
	defer closeKeep(&err, back)
	if err := there.CopyFrom(s, src); err != nil {
		return "", fmt.Errorf("device %d to %d: %w", st.cfg.device, other.Ordinal(), err)
	}
	if err := back.CopyFrom(s, there); err != nil {
		return "", fmt.Errorf("device %d to %d: %w", other.Ordinal(), st.cfg.device, err)
	}
	out, err := back.ToHost(s)
	if err != nil {
		return "", err
	}
	for i := range out {
		if out[i] != in[i] {
			return "", fmt.Errorf("element %d came back as %v, want %v", i, out[i], in[i])
		}
	}
	return fmt.Sprintf("%d floats copied to device %d and back, %s: exact", multiN, other.Ordinal(), how), nil
}

// stepNCCL, where libnccl is found: a communicator over every device from
// this process (ncclCommInitAll) and an all-reduce, checked element by
// element. Skipped without NCCL.
func stepNCCL(st *state) (summary string, err error) {
	major, minor, patch, err := nccl.Version()
	if err != nil {
		if errors.Is(err, nccl.ErrNotSupported) {
			st.detail("%v", err)
			return "", skipped("no libnccl here (pip install nvidia-nccl-cu13, or NVIDIA's libnccl2 package; PURECUDA_LIBNCCL names one)")
		}
		return "", err
	}
	count, err := driver.DeviceCount()
	if err != nil {
		return "", err
	}
	ctxs := make([]*driver.Context, 0, count)
	streams := make([]*driver.Stream, 0, count)
	bufs := make([]*driver.Buffer[float32], 0, count)
	defer func() {
		for i := len(bufs) - 1; i >= 0; i-- {
			closeKeep(&err, bufs[i])
		}
		for i := len(streams) - 1; i >= 0; i-- {
			closeKeep(&err, streams[i])
		}
		for i := len(ctxs) - 1; i >= 0; i-- {
			closeKeep(&err, ctxs[i])
		}
	}()
	for i := 0; i < count; i++ {
		dev, err := driver.DeviceByOrdinal(i)
		if err != nil {
			return "", err
		}
		ctx, err := dev.PrimaryContext()
		if err != nil {
			return "", err
		}
		ctxs = append(ctxs, ctx)
		s, err := ctx.NewStream(driver.StreamNonBlocking)
		if err != nil {
			return "", err
		}
		streams = append(streams, s)
		v := make([]float32, multiN)
		for j := range v {
			v[j] = float32(i + j%1024)
		}
		b, err := driver.AllocCopy(s, v)
		if err != nil {
			return "", err
		}
		bufs = append(bufs, b)
	}
	comms, err := nccl.InitAll(ctxs...)
	if err != nil {
		return "", err
	}
	defer func() {
		for _, c := range comms {
			closeKeep(&err, c)
		}
	}()
	err = nccl.Group(func() error {
		for i, c := range comms {
			if err := nccl.AllReduce(c, streams[i], bufs[i], bufs[i], nccl.Sum); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	wait, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i, c := range comms {
		if err := c.Wait(wait, streams[i]); err != nil {
			return "", fmt.Errorf("rank %d: %w", i, err)
		}
	}
	for i := range comms {
		out, err := bufs[i].ToHost(streams[i])
		if err != nil {
			return "", err
		}
		for j, x := range out {
			if want := float32(count*(j%1024) + count*(count-1)/2); x != want {
				return "", fmt.Errorf("rank %d: element %d is %v, want %v", i, j, x, want)
			}
		}
	}
	return fmt.Sprintf("NCCL %d.%d.%d: all-reduce of %d floats over %s (one process): exact", major, minor, patch, multiN, plural(count, "GPU")), nil
}
