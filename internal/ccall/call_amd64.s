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

GLOBL ·callFrameLongABI0(SB), NOPTR|RODATA, $8
DATA ·callFrameLongABI0(SB)/8, $purecuda_callFrameLong(SB)

// purecuda_callFrameLong(frame *Frame) is purecuda_callFrame for up to
// MaxArgs (32) arguments: Args[6..31] go on the stack, 26 slots. The frame
// of 224 bytes (208 for them, the saved DI at 216) plus the saved BP and
// the return address keeps SP 16-byte aligned at the CALL. A callee reads
// only its own arguments; the slots past them hold whatever the frame has.
TEXT purecuda_callFrameLong(SB), NOSPLIT, $224
	MOVQ DI, 216(SP)
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
	MOVQ 112(R11), AX // Args[12]
	MOVQ AX, 48(SP)
	MOVQ 120(R11), AX // Args[13]
	MOVQ AX, 56(SP)
	MOVQ 128(R11), AX // Args[14]
	MOVQ AX, 64(SP)
	MOVQ 136(R11), AX // Args[15]
	MOVQ AX, 72(SP)
	MOVQ 144(R11), AX // Args[16]
	MOVQ AX, 80(SP)
	MOVQ 152(R11), AX // Args[17]
	MOVQ AX, 88(SP)
	MOVQ 160(R11), AX // Args[18]
	MOVQ AX, 96(SP)
	MOVQ 168(R11), AX // Args[19]
	MOVQ AX, 104(SP)
	MOVQ 176(R11), AX // Args[20]
	MOVQ AX, 112(SP)
	MOVQ 184(R11), AX // Args[21]
	MOVQ AX, 120(SP)
	MOVQ 192(R11), AX // Args[22]
	MOVQ AX, 128(SP)
	MOVQ 200(R11), AX // Args[23]
	MOVQ AX, 136(SP)
	MOVQ 208(R11), AX // Args[24]
	MOVQ AX, 144(SP)
	MOVQ 216(R11), AX // Args[25]
	MOVQ AX, 152(SP)
	MOVQ 224(R11), AX // Args[26]
	MOVQ AX, 160(SP)
	MOVQ 232(R11), AX // Args[27]
	MOVQ AX, 168(SP)
	MOVQ 240(R11), AX // Args[28]
	MOVQ AX, 176(SP)
	MOVQ 248(R11), AX // Args[29]
	MOVQ AX, 184(SP)
	MOVQ 256(R11), AX // Args[30]
	MOVQ AX, 192(SP)
	MOVQ 264(R11), AX // Args[31]
	MOVQ AX, 200(SP)
	MOVQ 16(R11), DI // Args[0]
	MOVQ 24(R11), SI // Args[1]
	MOVQ 32(R11), DX // Args[2]
	MOVQ 40(R11), CX // Args[3]
	MOVQ 48(R11), R8 // Args[4]
	MOVQ 56(R11), R9 // Args[5]
	XORL AX, AX      // no vector registers used (for variadic callees)
	MOVQ 0(R11), R10 // Fn
	CALL R10
	MOVQ 216(SP), DI
	MOVQ AX, 8(DI) // R1
	RET
