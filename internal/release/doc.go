// Package release is the base of purecuda's lifetime core: the counters
// that package lifetime reports, the release queue (Defer, Flush), the
// errors of releases nobody waits for, pins of Go memory CUDA uses, and
// owners kept for good. It imports nothing of purecuda's and is not part of
// the public API: lifetime/DESIGN.md says what each piece guarantees (I8,
// I10, I11).
package release
