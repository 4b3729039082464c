package loader

import "github.com/purecuda/cuda/internal/loadspec"

// OpenIn is Open's search in a made-up environment and file system, opened
// afresh (not once per process).
func OpenIn(k Kind, env loadspec.Env) (*Library, error) { return openIn(k, env) }
