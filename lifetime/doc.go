// Package lifetime is purecuda's lifetime core: it decides when a CUDA
// object may be destroyed and makes sure nothing a call, a stream or a graph
// still names is freed before then.
//
// It imports no CUDA package, so every part of it is tested on a CPU. Package
// driver builds its objects on it (contexts, streams, events, buffers,
// modules, pools, host registrations, prepared arguments), and package graph
// attaches owner tables to CUDA graphs with it.
//
// The public pieces:
//
//   - Object: the lifetime of one CUDA object. The owner holds one
//     reference, every call in flight and every dependent holds another;
//     Close marks the object closed and drops only the owner's reference, and
//     the destroy function runs exactly once, when the last reference goes.
//     A reference is never taken again once the count reached zero.
//   - Ref and Owner: a reference handed to someone else (a graph, prepared
//     launch arguments), released exactly once; OwnerFunc makes any
//     release function an Owner.
//   - ReadStats, Errors, Flush: counters and kept release errors that prove
//     nothing leaks, and a wait for the queued releases.
//   - SetPollWindow: how long the host-function server polls.
//
// The machinery behind them lives in internal packages, where purecuda's
// other packages reach it but users do not: internal/release (the release
// queue that never blocks its caller, KeepForever, Pin), internal/hostfn
// (the one C-callable trampoline for CUhostFn with its polling fast path,
// integer ids instead of Go pointers, callback panics and Goexit
// contained, InCallback) and internal/tables (the owners of a graph's
// nodes, kept in a CUDA user object).
//
// The invariants these keep are numbered in DESIGN.md beside this file; the
// tests name the invariant each proves.
package lifetime
