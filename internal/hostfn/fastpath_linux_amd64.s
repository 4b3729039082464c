//go:build linux && amd64

#include "textflag.h"

// Slot states and server states: see fastpath.go.
#define FREE 0
#define CLAIMED 1
#define POSTED 2
#define TAKEN 3
#define WAITING 4
#define DONE 5
#define ASLEEP 0
#define NSLOTS 8
#define SLOTSIZE 64

// TSC ticks (about 1 GHz or more) to wait for the server to take a posted
// slot, and to spin on a taken one before sleeping on it.
#define TAKETICKS 50000
#define DONETICKS 60000

#define SYS_futex 202
#define SYS_sched_yield 24
#define FUTEX_WAIT_PRIVATE 128

GLOBL ·fastHostFnABI0(SB), NOPTR|RODATA, $8
DATA ·fastHostFnABI0(SB)/8, $purecuda_fastHostFn(SB)

// purecuda_fastHostFn(void *userData) is the CUhostFn CUDA calls. It is
// called with the C calling convention (userData in DI) on a thread of
// CUDA's, and never enters Go while the server is awake: it posts userData
// in a free slot and waits until the server has run the callback. When the
// server sleeps, when every slot is taken, or when the server does not take
// the slot in time (it is running a long callback), it calls the portable
// trampoline (fastCold) instead. It uses only registers the
// C convention lets a callee clobber, besides BP, which the prologue saves.
// The frame (16 bytes of locals, plus the saved BP and the return address)
// keeps SP 16-byte aligned at the CALL.
TEXT purecuda_fastHostFn(SB), NOSPLIT, $16
	MOVQ DI, 0(SP)
	MOVL ·fastServer(SB), AX
	CMPL AX, $ASLEEP
	JEQ  cold

	// Claim a free slot.
	LEAQ ·fastSlots(SB), R8
	MOVQ $NSLOTS, CX
claim:
	MOVL $FREE, AX
	MOVL $CLAIMED, DX
	LOCK
	CMPXCHGL DX, 0(R8)
	JEQ  claimed
	ADDQ $SLOTSIZE, R8
	DECQ CX
	JNZ  claim
	JMP  cold

claimed:
	MOVQ DI, 8(R8)
	MOVL $POSTED, AX
	XCHGL AX, 0(R8) // publishes data; a full barrier before the load below
	MOVL ·fastServer(SB), AX
	CMPL AX, $ASLEEP
	JEQ  reclaim

	// Wait for the server to take the slot.
	RDTSC
	SHLQ $32, DX
	ORQ  DX, AX
	LEAQ TAKETICKS(AX), R9
	XORQ R11, R11
waittake:
	PAUSE
	MOVL 0(R8), AX
	CMPL AX, $POSTED
	JNE  taken
	INCQ R11
	TESTQ $63, R11
	JNZ  2(PC)
	CALL yield<>(SB)
	RDTSC
	SHLQ $32, DX
	ORQ  DX, AX
	CMPQ AX, R9
	JLT  waittake

reclaim:
	// Take the slot back unless the server took it meanwhile.
	MOVL $POSTED, AX
	MOVL $FREE, DX
	LOCK
	CMPXCHGL DX, 0(R8)
	JEQ  cold

taken:
	// The server runs the callback: spin a while, then sleep.
	RDTSC
	SHLQ $32, DX
	ORQ  DX, AX
	LEAQ DONETICKS(AX), R9
	XORQ R11, R11
waitdone:
	MOVL 0(R8), AX
	CMPL AX, $DONE
	JEQ  done
	PAUSE
	INCQ R11
	TESTQ $63, R11
	JNZ  2(PC)
	CALL yield<>(SB)
	RDTSC
	SHLQ $32, DX
	ORQ  DX, AX
	CMPQ AX, R9
	JLT  waitdone

	MOVL $TAKEN, AX
	MOVL $WAITING, DX
	LOCK
	CMPXCHGL DX, 0(R8)
	JNE  done // not TAKEN: DONE

sleep:
	// futex(&slot.state, FUTEX_WAIT_PRIVATE, WAITING, NULL): returns at
	// once if the state is no longer WAITING. The kernel keeps R8.
	MOVQ R8, DI
	MOVL $FUTEX_WAIT_PRIVATE, SI
	MOVL $WAITING, DX
	XORQ R10, R10
	MOVL $SYS_futex, AX
	SYSCALL
	MOVL 0(R8), AX
	CMPL AX, $DONE
	JNE  sleep

done:
	MOVL $FREE, 0(R8)
	XORL AX, AX
	RET

cold:
	MOVQ 0(SP), DI
	MOVQ ·fastCold(SB), AX
	CALL AX
	XORL AX, AX
	RET

// yield gives the CPU to another thread (sched_yield), so that where
// threads outnumber CPUs the server gets to run while we wait for it. It
// keeps R8 and R9 (the kernel keeps all but AX, CX and R11; R11 is
// restored from the stack).
TEXT yield<>(SB), NOSPLIT|NOFRAME, $0
	PUSHQ R11
	MOVL $SYS_sched_yield, AX
	SYSCALL
	POPQ R11
	RET

GLOBL ·nopABI0(SB), NOPTR|RODATA, $8
DATA ·nopABI0(SB)/8, $purecuda_nop(SB)

// purecuda_nop is a C function that does nothing: see raceSync.
TEXT purecuda_nop(SB), NOSPLIT|NOFRAME, $0
	RET
