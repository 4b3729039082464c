package driver

import (
	"fmt"

	"github.com/purecuda/cuda/internal/cu"
)

// Device is a CUDA device (CUdevice).
type Device struct {
	h       cu.CUdevice
	ordinal int
	major   int32
	minor   int32
	lim     dimLimits
}

// dimLimits are the launch-shape limits of a device. Streams keep a copy, so
// that the launch check reads only the stream.
type dimLimits struct {
	maxThreads int32
	maxBlock   [3]int32
	maxGrid    [3]int32
}

// DeviceCount returns the number of CUDA devices (cuDeviceGetCount).
func DeviceCount() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var n int32
	if err := cu.DeviceGetCount(&n); err != nil {
		return 0, err
	}
	return int(n), nil
}

// DeviceByOrdinal returns device i (cuDeviceGet).
func DeviceByOrdinal(i int) (*Device, error) {
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	if i < 0 || i >= n {
		return nil, invalid("DeviceByOrdinal", "ordinal %d, this machine has %d devices", i, n)
	}
	var h cu.CUdevice
	if err := cu.DeviceGet(&h, int32(i)); err != nil {
		return nil, err
	}
	return newDevice(h, i)
}

// DeviceByPCIBusID returns the device at a PCI bus id such as
// "0000:3b:00.0" (cuDeviceGetByPCIBusId).
func DeviceByPCIBusID(id string) (*Device, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	var h cu.CUdevice
	if err := cu.DeviceGetByPCIBusId(&h, cstring(id)); err != nil {
		return nil, fmt.Errorf("driver: no device at PCI bus id %q: %w", id, err)
	}
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		var d cu.CUdevice
		if cu.DeviceGet(&d, int32(i)) == nil && d == h {
			return newDevice(h, i)
		}
	}
	return newDevice(h, int(h))
}

func newDevice(h cu.CUdevice, ordinal int) (*Device, error) {
	d := &Device{h: h, ordinal: ordinal}
	attrs := []struct {
		a   DeviceAttribute
		dst *int32
	}{
		{AttrComputeCapabilityMajor, &d.major}, {AttrComputeCapabilityMinor, &d.minor},
		{AttrMaxThreadsPerBlock, &d.lim.maxThreads},
		{AttrMaxBlockDimX, &d.lim.maxBlock[0]}, {AttrMaxBlockDimY, &d.lim.maxBlock[1]}, {AttrMaxBlockDimZ, &d.lim.maxBlock[2]},
		{AttrMaxGridDimX, &d.lim.maxGrid[0]}, {AttrMaxGridDimY, &d.lim.maxGrid[1]}, {AttrMaxGridDimZ, &d.lim.maxGrid[2]},
	}
	for _, a := range attrs {
		v, err := d.Attribute(a.a)
		if err != nil {
			return nil, err
		}
		*a.dst = int32(v)
	}
	return d, nil
}

// Ordinal is the device's index.
func (d *Device) Ordinal() int { return d.ordinal }

// Attribute reads any device attribute (cuDeviceGetAttribute).
func (d *Device) Attribute(a DeviceAttribute) (int, error) {
	var v int32
	if err := cu.DeviceGetAttribute(&v, a, d.h); err != nil {
		return 0, err
	}
	return int(v), nil
}

// Name is the device's name (cuDeviceGetName).
func (d *Device) Name() (string, error) {
	buf := make([]byte, 256)
	if err := cu.DeviceGetName(&buf[0], int32(len(buf)), d.h); err != nil {
		return "", err
	}
	return gostring(buf), nil
}

// UUID is the device's 16-byte UUID (cuDeviceGetUuid).
func (d *Device) UUID() ([16]byte, error) {
	var u cu.CUuuid
	if err := cu.DeviceGetUuid(&u, d.h); err != nil {
		return [16]byte{}, err
	}
	return u.Bytes, nil
}

// ComputeCapability is the device's compute capability, e.g. 9, 0.
func (d *Device) ComputeCapability() (major, minor int) { return int(d.major), int(d.minor) }

// Arch is the device's real architecture for compilers, e.g. "sm_90".
func (d *Device) Arch() string { return fmt.Sprintf("sm_%d%d", d.major, d.minor) }

// TotalMemory is the device's memory in bytes (cuDeviceTotalMem).
func (d *Device) TotalMemory() (uint64, error) {
	var n uintptr
	if err := cu.DeviceTotalMem(&n, d.h); err != nil {
		return 0, err
	}
	return uint64(n), nil
}

// MultiprocessorCount is the number of streaming multiprocessors.
func (d *Device) MultiprocessorCount() (int, error) { return d.Attribute(AttrMultiprocessorCount) }

// CanAccessPeer reports whether d can map peer's memory (cuDeviceCanAccessPeer).
func (d *Device) CanAccessPeer(peer *Device) (bool, error) {
	if peer == nil {
		return false, invalid("CanAccessPeer", "nil device")
	}
	var v int32
	if err := cu.DeviceCanAccessPeer(&v, d.h, peer.h); err != nil {
		return false, err
	}
	return v != 0, nil
}

// String names the device by ordinal.
func (d *Device) String() string { return fmt.Sprintf("cuda:%d", d.ordinal) }
