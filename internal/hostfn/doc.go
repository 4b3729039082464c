// Package hostfn is purecuda's one C-callable trampoline for CUhostFn (host
// functions and user-object destructors) and the handle map its userData
// ids index: a C caller never holds a Go pointer (lifetime/DESIGN.md I5-I7),
// and a callback's panic or Goexit never escapes into C. It is not part of
// purecuda's public API; lifetime.SetPollWindow tunes it.
package hostfn
