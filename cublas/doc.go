// Package cublas binds NVIDIA's cuBLAS, found at run time like the driver
// (libcublas.so.13 or .so.12 with its libcublasLt, from
// PURECUDA_LIBCUBLAS, the CUDA toolkit, the system's search or the
// nvidia-cublas Python wheel), with a typed API that cannot read or write
// past a buffer.
//
// # Handles
//
// A Handle is bound, when it is made, to one stream (and so one context),
// a math mode, an atomics mode and a workspace of its own: every routine
// called on it is queued on that stream, with those settings, whichever
// goroutine calls it. See Handle for concurrency and lifetime.
//
// # Views
//
// Routines take matrices and vectors as views over *driver.Buffer values
// (Matrix, Vector): a shape, an offset, a leading dimension or increment,
// a layout (ColMajor as cuBLAS, or RowMajor, as Go programs usually store
// matrices, with no copy: see Layout) and an operation. Every view is
// checked against its buffer before cuBLAS is called: a dimension,
// leading dimension, stride, batch count or offset that would reach past
// the buffer, shapes that do not agree, an output overlapping an input,
// a buffer of another context or a closed one are refused with an error
// that names the routine and the operand, and nothing is queued.
//
//	a := cublas.RowMajorMatrix(bufA, m, k) // []float32 of m*k, row by row
//	b := cublas.RowMajorMatrix(bufB, k, n)
//	c := cublas.RowMajorMatrix(bufC, m, n)
//	err := cublas.Gemm(h, 1, a, b, 0, c) // C = A·B
//
// # Routines
//
// Level 3: Gemm, GemmStridedBatched, GemmBatched (matrices anywhere,
// pointer arrays built and held here), GemmGrouped (groups of batches of
// different shapes in one call, float32 and float64), Syrk, Symm, Trsm,
// Trmm for float32, float64, complex64 and complex128; GemmEx and
// GemmStridedBatchedEx with mixed types (Half, BFloat16, int8 inputs) and
// a compute type. Level 2:
// Gemv, Ger, Gerc, Trsv. Level 1: Axpy, Scal, Copy, Swap, and the
// reductions Dot, Dotc, Nrm2, Asum, Iamax, whose result comes back to the
// caller (waiting for the stream) or, in their To forms, goes to device
// memory in stream order.
//
// # cuBLASLt
//
// A MatmulPlan is a cuBLASLt matmul with an epilogue (ReLU, GELU, a bias,
// or both) whose descriptors and algorithm are chosen once, optionally by
// timing the heuristic's candidates (MatmulOptions.Autotune), and reused by
// every Run on the handle's stream, with the handle's workspace. Each of
// its matrices starts on a 16-byte boundary (a view's first element; any
// allocation's start is one), its bias at any element (an FP8 plan's on
// a 16-byte boundary too).
//
// Training has epilogues of its own (EpilogueReLUAux and those after it):
// forward ones that also store what the backward pass needs (a ReLU bit
// mask, GELU's input), backward ones that apply the activation's gradient
// from it, and bias gradients. Their extra operands go to RunWith
// (MatmulExtras), checked against their buffers and held like A, B, C
// and D. A plan whose A and B are Float8E4M3 or Float8E5M2 is an FP8
// matmul (compute capability 8.9 and later) with A's and B's scale factors
// in device memory (MatmulScales) and a D of Half, BFloat16 or float32, or
// of 8-bit floats: such a D is scaled (D's scale) and rounded, saturating,
// to its type, its amax optionally written (MatmulOptions.AmaxD), and it
// adds no C (beta 0). NewMatmulPlan refuses, before cuBLASLt sees them,
// the layouts, sizes, types and epilogues cuBLASLt refuses for FP8.
//
// # Streams, lifetimes and graphs
//
// Routines are stream-ordered like kernels: they read their inputs after
// the work queued before them on the handle's stream and their outputs
// are ready for the work queued after. The buffers they name, the
// handle's workspace and the handle stay allocated until the stream has
// passed the routine, whatever is closed meanwhile. Called inside a
// capture (graph.Capture on the handle's stream), a routine is recorded
// into the graph, which holds its buffers, the workspace and the handle
// until the graph and its executables are gone; alpha and beta are read
// at the call. The reductions that return their result to the host wait
// for the stream and so cannot be captured: use their To forms.
//
// # Errors
//
// Refused views match ErrShape, ErrOutOfBounds or ErrAlias (and
// driver.ErrInvalidArgument); a nil buffer or one of another context
// matches driver.ErrInvalidArgument, a closed buffer or handle
// driver.ErrClosed; a routine that waits for its result refused inside a
// capture matches driver.ErrStreamCaptureUnsupported. cuBLAS's own
// failures are *Error values matching their Status. ErrNotSupported is
// matched both by a missing cuBLAS (then also loader.ErrNotFound) and by
// a request the loaded cuBLAS does not support (StatusNotSupported).
//
// # Capture modes
//
// Every routine may be captured in any capture mode, except GemmBatched
// and GemmGrouped, which allocate pinned memory during the call and need
// graph.CaptureRelaxed, and the routines that return their result to the
// host, which no capture allows.
package cublas
