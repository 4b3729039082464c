//go:build race

package gputest

// RaceEnabled reports whether the race detector is on: sync.Pool then drops
// items at random, so allocation counts are not meaningful.
const RaceEnabled = true
