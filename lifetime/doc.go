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
// Behind them, and not part of the API: releases noticed where they cannot
// run (in a cleanup, or on a thread CUDA owns) are queued and run by a
// goroutine of purecuda's, so queuing never blocks the caller; C code is
// handed integer ids, never Go pointers; and a panic or runtime.Goexit in a
// host function ends only a goroutine of purecuda's.
//
// All of it is safe for concurrent use. How it works, for contributors, is
// in DESIGN.md beside this file.
package lifetime
