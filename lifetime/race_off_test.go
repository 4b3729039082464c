//go:build !race

package lifetime_test

// raceEnabled reports whether the race detector is on; allocation counts
// are not meaningful then (as in internal/gputest).
const raceEnabled = false
