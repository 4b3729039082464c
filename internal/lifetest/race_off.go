//go:build !race

package lifetest

// RaceEnabled reports whether the race detector is on; allocation counts
// are not meaningful then.
const RaceEnabled = false
