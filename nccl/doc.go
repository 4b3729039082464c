// Package nccl is purecuda's binding to NVIDIA's NCCL, the library that
// moves data between GPUs, within a machine (NVLink, NVSwitch, PCIe) and
// between machines (sockets, InfiniBand, RoCE), without cgo: libnccl is
// opened at run time, as the CUDA driver is.
//
// A communicator (Comm) joins one rank per GPU. Every rank makes the same
// collectives (AllReduce, Broadcast, Reduce, AllGather, ReduceScatter) in
// the same order; pairs of ranks exchange buffers with Send and Recv.
//
// One process per GPU (the usual way, and the only one across machines):
// one rank makes a UniqueID and sends it to the others, as bytes or text,
// by any means (a file, a TCP connection, the job launcher), and each rank
// calls InitRank with it:
//
//	dev, _ := driver.DeviceByOrdinal(localRank)
//	ctx, _ := dev.PrimaryContext()
//	comm, err := nccl.InitRank(context.Background(), ctx, id, worldSize, rank, nil)
//	if err != nil {
//		return err
//	}
//	defer comm.Close()
//	s, _ := ctx.NewStream(driver.StreamNonBlocking)
//	err = nccl.AllReduce(comm, s, grads, grads, nccl.Sum) // in place
//
// One process driving several GPUs: InitAll makes every rank at once, and
// the operations for the GPUs go into one Group (otherwise the first would
// wait for the others). Inside Group an operation is checked and recorded;
// NCCL sees the group's operations together when Group returns (in one
// call into C, for speed), and a refusal of NCCL's is in Group's error:
//
//	comms, err := nccl.InitAll(ctx0, ctx1)
//	err = nccl.Group(func() error {
//		return errors.Join(
//			nccl.AllReduce(comms[0], s0, x0, x0, nccl.Sum),
//			nccl.AllReduce(comms[1], s1, x1, x1, nccl.Sum))
//	})
//
// # Operations
//
// What every operation promises:
//
//   - it is queued on the stream it is given, in that stream's order: it
//     reads its send buffer once the work queued on the stream before it has
//     run, and work queued after it sees the receive buffer written. Work on
//     other streams is ordered with events, as for a kernel. The call itself
//     returns once the operation is queued: Synchronize the stream, or use
//     Comm.Wait, which also returns when a peer is gone;
//   - the stream and every buffer belong to the communicator's context (the
//     primary context of its device); the buffers' element type picks NCCL's
//     data type;
//   - the buffers and the communicator stay allocated until the stream has
//     passed the operation, whatever is closed meanwhile; inside a capture
//     (package graph), the graph holds them, as it holds a kernel's
//     buffers;
//   - a refused call queues nothing: a mismatched argument or a wrong count
//     returns an error matching ErrInvalidArgument (and
//     driver.ErrInvalidArgument), a nil stream driver.ErrNilStream, a closed
//     communicator, stream or buffer driver.ErrClosed.
//
// # Graphs
//
// Operations queued on a stream being captured (graph.Capture) go into the
// graph, which then holds the communicator and the buffers: a graph that
// all-reduces and then runs a kernel replays both at every launch. NCCL
// requires every rank to capture the same operations (each rank launches
// its own graph, and the graphs' collectives meet), and recommends one GPU
// per process when capturing. One process driving several GPUs captures
// each rank's stream with graph.BeginCapture (not graph.Capture, which
// captures one stream), queues the ranks' operations inside Group, ends
// every capture, and then launches every rank's executable in turn each
// round (rank 0's, rank 1's, …): a rank's collective waits on the GPU for
// the others', and a stream queues only so much work before a launch
// blocks the host, so a long run of one rank's launches could wait for
// launches not yet made. A graph must not
// be launched after its communicator failed or was aborted.
//
// # Failure
//
// A peer that dies leaves the survivors' kernels waiting for it. NCCL
// notices (a closed connection) and reports it on the communicator; a
// watchdog of this package polls every communicator and aborts a failed
// one, which ends those kernels: Synchronize on their streams returns,
// Comm.Err, Comm.Wait and every later call return the error (ErrRemote,
// ErrSystem, ...). Abort does the same on request, waiting at most
// Config.AbortTimeout for NCCL. Where NCCL cannot notice (a peer stopped
// but its connections open), bound the wait with Comm.Wait's Go context,
// and then Abort.
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
// NCCL's own kernels read 8-bit data in 4-byte words: an all-reduce of
// int8 or uint8 elements whose count is no multiple of 4 may read up to 3
// bytes past the end of the send or receive buffer (seen on 2 H200s with
// NCCL 2.28.3 under compute-sanitizer, and in C with no purecuda:
// tests/libnccl/tail_overread.c). Nothing is written there, and an
// allocation of its own always has those bytes mapped, but memcheck
// reports the read, and with a Buffer.Slice the bytes read are the next
// elements of its parent. A count that is a multiple of 4 avoids it.
//
// # Errors
//
// A failed NCCL call returns an *Error: the C function, NCCL's result
// (a Status, such as ErrInvalidUsage or ErrRemote, matched with errors.Is),
// NCCL's description of it and the last error message NCCL recorded,
// which says more. Arguments this package refuses itself match
// ErrInvalidArgument and driver.ErrInvalidArgument.
package nccl
