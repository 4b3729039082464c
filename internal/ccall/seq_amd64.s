//go:build linux && amd64

#include "textflag.h"

// Step layout (see Step): Fn at 0, R1 at 8, Stop at 16, N at 24, Args[i]
// at 32+8*i (24 of them): 224 bytes. Header (seqHeader): first at 0, n at
// 8, done at 16.

GLOBL ·callSeqABI0(SB), NOPTR|RODATA, $8
DATA ·callSeqABI0(SB)/8, $purecuda_callSeq(SB)

// purecuda_callSeq(h *seqHeader) is called by runtime.cgocall on the system
// stack with the C calling convention: h in DI. It calls the steps in
// order (System V AMD64: Args[0..5] in registers, Args[6..23] on the
// stack, only the N the step has), storing each result (RAX) in the
// step's R1 and counting it in done, and stops after a step with Stop set
// whose result's low 32 bits are not 0. Locals: the 18 stack argument slots (0..143), h at 144, the
// current step at 152. The frame of 160 bytes plus the saved BP and the
// return address keeps SP 16-byte aligned at the CALL. Only registers a C
// callee may clobber are used (BP is saved by the prologue).
TEXT purecuda_callSeq(SB), NOSPLIT, $160
	MOVQ DI, 144(SP)
	MOVQ 0(DI), R11
	MOVQ R11, 152(SP)

loop:
	MOVQ 144(SP), DI
	MOVQ 16(DI), AX
	CMPQ AX, 8(DI)
	JAE  done
	MOVQ 152(SP), R11
	// The stack arguments the step has: Args[6:N], at most 18.
	MOVQ 24(R11), CX  // N
	SUBQ $6, CX
	JLE  regs
	CMPQ CX, $18
	JLE  copy0
	MOVQ $18, CX

copy0:
	XORQ DX, DX

copy:
	MOVQ 80(R11)(DX*8), AX // Args[6+DX]
	MOVQ AX, 0(SP)(DX*8)
	INCQ DX
	CMPQ DX, CX
	JLT  copy

regs:
	MOVQ 32(R11), DI  // Args[0]
	MOVQ 40(R11), SI  // Args[1]
	MOVQ 48(R11), DX  // Args[2]
	MOVQ 56(R11), CX  // Args[3]
	MOVQ 64(R11), R8  // Args[4]
	MOVQ 72(R11), R9  // Args[5]
	XORL AX, AX       // no vector registers used (for variadic callees)
	MOVQ 0(R11), R10  // Fn
	CALL R10
	MOVQ 144(SP), DI
	INCQ 16(DI)       // done
	MOVQ 152(SP), R11
	MOVQ AX, 8(R11)   // R1
	MOVQ 16(R11), CX  // Stop
	ADDQ $224, R11
	MOVQ R11, 152(SP)
	TESTQ CX, CX
	JEQ  loop
	TESTL AX, AX
	JEQ  loop

done:
	RET
