//go:build linux

#include "textflag.h"

// The runtime's own access to the g of the running goroutine (its
// go_tls.h, which other packages cannot include).
#define get_tls(r) MOVQ TLS, r
#define g(r) 0(r)(TLS*1)

// func curg() uintptr
TEXT ·curg(SB), NOSPLIT, $0-8
	get_tls(CX)
	MOVQ	g(CX), AX
	MOVQ	AX, ret+0(FP)
	RET
