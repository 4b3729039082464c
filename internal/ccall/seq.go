package ccall

import (
	"runtime"
	"unsafe"
)

// SeqArgs is how many integer arguments a Step passes at most.
const SeqArgs = 24

// Step is one C call of a sequence that Run makes in a single foreign
// call: a context switch, the library call that needs it and the switch
// back cost one crossing into C instead of three. The layout is read by
// the assembly trampoline.
type Step struct {
	Fn uintptr
	// R1 is the step's integer result once it ran (its low 32 bits for a
	// C function returning int).
	R1 uintptr
	// Stop, when nonzero, ends the sequence after this step if its result
	// (the low 32 bits) is not 0.
	Stop uintptr
	// N is how many of Args the function takes: the assembly trampoline
	// passes the first six in registers whatever N is (a callee reads
	// only its own) and copies only Args[6:N] to the stack; elsewhere
	// each call passes N.
	N    uintptr
	Args [SeqArgs]uintptr
}

// seqHeader is what the trampoline reads: the steps, how many, and how
// many ran, which it counts.
type seqHeader struct {
	first *Step
	n     uintptr
	done  uintptr
}

// StepSize is the size of a Step, as the trampoline steps through them.
const StepSize = unsafe.Sizeof(Step{})

// runEach is Run one foreign call per step. The calling goroutine is
// locked to its thread meanwhile, so that every step runs on one thread,
// as in the single crossing of the trampoline (a context one step makes
// current is the next step's).
func runEach(steps []Step) int {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for i := range steps {
		s := &steps[i]
		f := Get(s.Fn)
		n := int(min(s.N, SeqArgs))
		copy(f.Args[:n], s.Args[:n])
		s.R1 = f.Call(n)
		Put(f)
		if s.Stop != 0 && int32(s.R1) != 0 {
			return i + 1
		}
	}
	return len(steps)
}
