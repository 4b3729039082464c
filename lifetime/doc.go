// Package lifetime is purecuda's lifetime core: it decides when a CUDA
// object may be destroyed and makes sure nothing a call, a stream or a graph
// still names is freed before then.
//
// It imports no CUDA package, so every part of it is tested on a CPU. Package
// driver builds its objects on it (contexts, streams, events, buffers,
// modules, pools, host registrations, prepared arguments), and package graph
// attaches owner tables to CUDA graphs with it.
//
// The pieces:
//
//   - Object: the lifetime of one CUDA object. The owner holds one
//     reference, every call in flight and every dependent holds another;
//     Close marks the object closed and drops only the owner's reference, and
//     the destroy function runs exactly once, when the last reference goes.
//     A reference is never taken again once the count reached zero.
//   - Ref and Owner: a reference handed to someone else (a graph, prepared
//     launch arguments), released exactly once.
//   - Map: integer ids for Go values, so that C receives an integer as
//     userData, never a Go pointer.
//   - Callbacks and HostFn: the one C-callable trampoline for CUhostFn,
//     shared by stream host functions and user-object destructors. Panics
//     and runtime.Goexit in a callback are contained. Cancel releases what
//     a callback CUDA will never call holds. On linux/amd64, after Expect,
//     a polling goroutine serves the trampoline without the CUDA thread
//     entering Go (SetPollWindow), so a host function costs about what it
//     costs in C.
//   - Defer: a release queue that never blocks its caller, for releases
//     that must not run where they are noticed (a cleanup, a CUDA thread).
//   - Table: the owners of a graph's nodes, released per node or all at once.
//   - Pin: runtime.Pinner for Go memory that CUDA keeps using after a call.
//   - ReadStats: counters that prove nothing leaks.
//
// The invariants these keep are numbered in DESIGN.md beside this file; the
// tests name the invariant each proves.
package lifetime
