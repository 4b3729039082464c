//go:build linux && amd64

#include "textflag.h"

// func getg() uintptr: the calling goroutine's g, from thread-local storage.
TEXT ·getg(SB), NOSPLIT, $0-8
	MOVQ (TLS), AX
	MOVQ AX, ret+0(FP)
	RET
