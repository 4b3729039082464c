package driver

import (
	"fmt"
	"sync"

	"github.com/purecuda/cuda/internal/cu"
)

// Device is a CUDA device (CUdevice). It owns nothing and never changes:
// its methods are safe for concurrent use, and it needs no Close.
type Device struct {
	ok      bool // made by this package (a zero Device is refused)
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
	cid, err := cstring("DeviceByPCIBusID", "PCI bus id", id)
	if err != nil {
		return nil, err
	}
	var h cu.CUdevice
	if err := cu.DeviceGetByPCIBusId(&h, cid); err != nil {
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
	d := &Device{ok: true, h: h, ordinal: ordinal}
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

// check refuses a nil or zero Device.
func (d *Device) check(op string) error {
	if d == nil {
		return invalid(op, "nil device")
	}
	if !d.ok {
		return invalid(op, "zero Device: use DeviceByOrdinal or DeviceByPCIBusID")
	}
	return nil
}

// scratch is pooled heap memory for out-parameters, so that calls that
// read a value back allocate nothing (a local whose address goes to C would
// escape to the heap on every call).
type scratch [4]uintptr

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

func putScratch(s *scratch) { *s = scratch{}; scratchPool.Put(s) }

// Ordinal is the device's index (-1 for a nil or zero Device).
func (d *Device) Ordinal() int {
	if d == nil || !d.ok {
		return -1
	}
	return d.ordinal
}

// Attribute reads any device attribute (cuDeviceGetAttribute).
func (d *Device) Attribute(a DeviceAttribute) (int, error) {
	if err := d.check("Device.Attribute"); err != nil {
		return 0, err
	}
	var v int32
	if err := cu.DeviceGetAttribute(&v, cu.CUdevice_attribute(a), d.h); err != nil {
		return 0, err
	}
	return int(v), nil
}

// Name is the device's name (cuDeviceGetName).
func (d *Device) Name() (string, error) {
	if err := d.check("Device.Name"); err != nil {
		return "", err
	}
	buf := make([]byte, 256)
	if err := cu.DeviceGetName(&buf[0], int32(len(buf)), d.h); err != nil {
		return "", err
	}
	return gostring(buf), nil
}

// UUID is the device's 16-byte UUID (cuDeviceGetUuid).
func (d *Device) UUID() ([16]byte, error) {
	if err := d.check("Device.UUID"); err != nil {
		return [16]byte{}, err
	}
	var u cu.CUuuid
	if err := cu.DeviceGetUuid(&u, d.h); err != nil {
		return [16]byte{}, err
	}
	return u.Bytes, nil
}

// ComputeCapability is the device's compute capability, e.g. 9, 0.
// It is 0, 0 for a nil or zero Device.
func (d *Device) ComputeCapability() (major, minor int) {
	if d == nil {
		return 0, 0
	}
	return int(d.major), int(d.minor)
}

// Arch is the device's real architecture for compilers, e.g. "sm_90".
// It is "" for a nil or zero Device.
func (d *Device) Arch() string {
	if d == nil || !d.ok {
		return ""
	}
	return fmt.Sprintf("sm_%d%d", d.major, d.minor)
}

// TotalMemory is the device's memory in bytes (cuDeviceTotalMem).
func (d *Device) TotalMemory() (int, error) {
	if err := d.check("Device.TotalMemory"); err != nil {
		return 0, err
	}
	var n uintptr
	if err := cu.DeviceTotalMem(&n, d.h); err != nil {
		return 0, err
	}
	return int(n), nil
}

// SMCount is the number of streaming multiprocessors (SMs) on the device
// (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT). Context.SMCount is how many a
// context may use.
func (d *Device) SMCount() (int, error) { return d.Attribute(AttrMultiprocessorCount) }

// CanAccessPeer reports whether d can map peer's memory (cuDeviceCanAccessPeer).
func (d *Device) CanAccessPeer(peer *Device) (bool, error) {
	if err := d.check("Device.CanAccessPeer"); err != nil {
		return false, err
	}
	if err := peer.check("Device.CanAccessPeer"); err != nil {
		return false, err
	}
	var v int32
	if err := cu.DeviceCanAccessPeer(&v, d.h, peer.h); err != nil {
		return false, err
	}
	return v != 0, nil
}

// String names the device by ordinal.
func (d *Device) String() string {
	if d == nil || !d.ok {
		return "cuda:<none>"
	}
	return fmt.Sprintf("cuda:%d", d.ordinal)
}
