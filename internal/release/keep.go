package release

import (
	"fmt"
	"sync"
)

// kept holds the owners KeepForever was given.
var kept struct {
	sync.Mutex
	owners []Owner
}

// KeepForever holds o for good instead of releasing it: for an owner whose
// release could never be proven safe, because work that may still use what
// it holds could not be waited for (a stream that cannot be synchronised
// for a reason that is not fatal to its context). It is a leak, never a use
// after free: counted in Stats.Kept, and why is reported through Errors
// (and counted in Stats.ReleaseErrors). A nil o does nothing.
func KeepForever(o Owner, why error) {
	if o == nil {
		return
	}
	kept.Lock()
	kept.owners = append(kept.owners, o)
	kept.Unlock()
	Counters.Kept.Add(1)
	if why == nil {
		why = fmt.Errorf("lifetime: %T kept for good", o)
	}
	NoteError(why)
}
