//go:build linux && amd64

#include "textflag.h"

// Frame layout (see Frame): Fn at 0, R1 at 8, Args[i] at 16+8*i.

GLOBL ·callFrameABI0(SB), NOPTR|RODATA, $8
DATA ·callFrameABI0(SB)/8, $purecuda_callFrame(SB)

// purecuda_callFrame(frame *Frame) is called by runtime.cgocall on the system
// stack with the C calling convention: frame in DI. It passes Args[0..5] in
// registers and Args[6..11] on the stack (System V AMD64), calls Fn and
// stores RAX in R1. The frame of 64 bytes plus the saved BP and the return
// address keeps SP 16-byte aligned at the CALL.
TEXT purecuda_callFrame(SB), NOSPLIT, $64
	MOVQ DI, 56(SP)
	MOVQ DI, R11
	MOVQ 64(R11), AX // Args[6]
	MOVQ AX, 0(SP)
	MOVQ 72(R11), AX // Args[7]
	MOVQ AX, 8(SP)
	MOVQ 80(R11), AX // Args[8]
	MOVQ AX, 16(SP)
	MOVQ 88(R11), AX // Args[9]
	MOVQ AX, 24(SP)
	MOVQ 96(R11), AX // Args[10]
	MOVQ AX, 32(SP)
	MOVQ 104(R11), AX // Args[11]
	MOVQ AX, 40(SP)
	MOVQ 16(R11), DI // Args[0]
	MOVQ 24(R11), SI // Args[1]
	MOVQ 32(R11), DX // Args[2]
	MOVQ 40(R11), CX // Args[3]
	MOVQ 48(R11), R8 // Args[4]
	MOVQ 56(R11), R9 // Args[5]
	XORL AX, AX      // no vector registers used (for variadic callees)
	MOVQ 0(R11), R10 // Fn
	CALL R10
	MOVQ 56(SP), DI
	MOVQ AX, 8(DI) // R1
	RET
