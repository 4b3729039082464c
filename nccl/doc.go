// Package nccl is purecuda's binding to NVIDIA's NCCL, the library that
// moves data between GPUs, within a machine (NVLink, NVSwitch, PCIe) and
// between machines (sockets, InfiniBand, RoCE), without cgo: libnccl is
// opened at run time, as the CUDA driver is.
//
// So far the package holds what every use of NCCL starts from: the
// library's Version, the UniqueID that names a communicator's rendezvous
// and travels between processes as bytes or text, the reductions (Op), and
// NCCL's errors.
//
//	id, err := nccl.NewUniqueID() // on one rank
//	if err != nil {
//		return err // errors.Is(err, nccl.ErrNotSupported): no libnccl here
//	}
//	text, _ := id.MarshalText() // send it to every other rank
//
// # Finding NCCL
//
// NCCL is libnccl.so.2, for Linux only. It is found, on first use, in
// PURECUDA_LIBNCCL (a full path: when set, the only candidate), then
// through the system's search (LD_LIBRARY_PATH, the ld.so cache, where
// NVIDIA's libnccl2 package puts it), then in NVIDIA's Python wheel
// (pip install nvidia-nccl-cu12 or nvidia-nccl-cu13:
// site-packages/nvidia/nccl/lib)
// in the active virtual or conda environment, the user's site-packages and
// the system's; package loader gives the full order. Without it every call
// returns an error matching ErrNotSupported and loader.ErrNotFound that
// lists every place searched; on an operating system without NCCL, one
// matching ErrNotSupported that says so. Nothing panics.
//
// # Element types
//
// NCCL reduces and moves elements of int8, uint8, int32, uint32, int64,
// uint64, float32 and float64, and of types defined on them (type Celsius
// float32 travels as float32). Any other element type is refused with an
// error matching ErrInvalidArgument before NCCL is called.
//
// # Errors
//
// A failed NCCL call returns an *Error: the C function, NCCL's result
// (a Status, such as ErrInvalidUsage or ErrRemote, matched with errors.Is),
// NCCL's description of it and the last error message NCCL recorded,
// which says more. Arguments this package refuses itself match
// ErrInvalidArgument and driver.ErrInvalidArgument.
package nccl
