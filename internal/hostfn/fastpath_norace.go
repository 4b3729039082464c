//go:build !(race && linux && amd64)

package hostfn

// raceSync is needed only under the race detector (see
// fastpath_race_linux_amd64.go).
func raceSync() {}
