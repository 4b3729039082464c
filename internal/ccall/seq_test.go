//go:build linux

package ccall_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/internal/ccall"
	"github.com/purecuda/cuda/internal/gputest"
)

// TestStepLayout pins the offsets the assembly trampoline reads.
func TestStepLayout(t *testing.T) {
	var s ccall.Step
	assert.Equal(t, uintptr(0), unsafe.Offsetof(s.Fn))
	assert.Equal(t, uintptr(8), unsafe.Offsetof(s.R1))
	assert.Equal(t, uintptr(16), unsafe.Offsetof(s.Stop))
	assert.Equal(t, uintptr(24), unsafe.Offsetof(s.N))
	assert.Equal(t, uintptr(32), unsafe.Offsetof(s.Args))
	assert.Equal(t, uintptr(224), ccall.StepSize)
}

// snprintfStep fills s to format n integers (first, first+1, ...) into
// buf: 3+n arguments.
func snprintfStep(s *ccall.Step, fn uintptr, buf, format []byte, n, first int) {
	s.Fn, s.N = fn, uintptr(3+n)
	s.Args[0] = uintptr(unsafe.Pointer(&buf[0]))
	s.Args[1] = uintptr(len(buf))
	s.Args[2] = uintptr(unsafe.Pointer(&format[0]))
	for i := range n {
		s.Args[3+i] = uintptr(first + i)
	}
}

// TestRunPassesEveryArgument: a sequence of snprintf calls, each with its
// own buffer and up to SeqArgs arguments (6 in registers and 18 on the
// stack on amd64), each result in its step.
func TestRunPassesEveryArgument(t *testing.T) {
	snprintf := libc(t, "snprintf")
	counts := []int{1, 3, 9, 15, ccall.SeqArgs - 3}
	steps := make([]ccall.Step, len(counts))
	bufs := make([][]byte, len(counts))
	formats := make([][]byte, len(counts))
	for i, n := range counts {
		bufs[i] = make([]byte, 256)
		formats[i] = []byte(strings.Repeat("%d ", n) + "\x00")
		snprintfStep(&steps[i], snprintf, bufs[i], formats[i], n, 10*i)
	}
	assert.Equal(t, len(steps), ccall.Run(steps))
	runtime.KeepAlive(bufs)
	runtime.KeepAlive(formats)
	for i, n := range counts {
		var want strings.Builder
		for j := range n {
			fmt.Fprintf(&want, "%d ", 10*i+j)
		}
		assert.Equal(t, want.String(), string(bufs[i][:steps[i].R1]), "step %d, %d arguments", i, 3+n)
	}
}

// TestRunStops: a step with Stop set and a nonzero result ends the
// sequence (the steps after it keep their R1); a zero result, or a
// result whose low 32 bits are zero (a C int's), or a step without Stop,
// goes on.
func TestRunStops(t *testing.T) {
	labs := libc(t, "labs")
	step := func(v uintptr, stop bool) ccall.Step {
		s := ccall.Step{Fn: labs, N: 1, R1: 12345}
		s.Args[0] = v
		if stop {
			s.Stop = 1
		}
		return s
	}
	steps := []ccall.Step{step(0, true), step(7, false), step(1<<32, true), step(3, true), step(4, false)}
	assert.Equal(t, 4, ccall.Run(steps))
	assert.Equal(t, []uintptr{0, 7, 1 << 32, 3, 12345}, []uintptr{steps[0].R1, steps[1].R1, steps[2].R1, steps[3].R1, steps[4].R1})
	assert.Zero(t, ccall.Run(nil))
	one := []ccall.Step{step(9, true)}
	assert.Equal(t, 1, ccall.Run(one))
	assert.Equal(t, uintptr(9), one[0].R1)
}

// runOnStack runs three steps kept in the caller's stack frame.
func runOnStack(labs uintptr) (int, uintptr) {
	var steps [3]ccall.Step
	for i := range steps {
		steps[i].Fn, steps[i].N = labs, 1
		steps[i].Args[0] = uintptr(i + 1)
	}
	n := ccall.Run(steps[:])
	return n, steps[2].R1
}

// TestRunOnTheStackAllocatesNothing: steps in a local array work and cost
// no allocation.
func TestRunOnTheStackAllocatesNothing(t *testing.T) {
	labs := libc(t, "labs")
	n, r := runOnStack(labs)
	assert.Equal(t, 3, n)
	assert.Equal(t, uintptr(3), r)
	if gputest.RaceEnabled {
		return
	}
	assert.Zero(t, testing.AllocsPerRun(1000, func() { runOnStack(labs) }))
}
