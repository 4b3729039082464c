//go:build linux

package nccl

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/ccall"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/internal/ncclraw"
)

// TestGroupStepsFromFake: the sequence of C calls of a group whose
// operations are in two contexts (what one process driving two GPUs
// makes): ncclGroupStart and the first context's push stop the sequence
// when they fail; a switch is made only where the context changes, and a
// later switch does not stop it (the group goes on whole); a refused
// operation has no step; ncclGroupEnd and the clearing end it. The fake
// has one device, so this checks the plan, not its run.
func TestGroupStepsFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	proc := func(f func() (uintptr, error)) uintptr {
		fn, err := f()
		require.NoError(t, err)
		return fn
	}
	start, end := proc(ncclraw.GroupStartProc), proc(ncclraw.GroupEndProc)
	push, set := proc(cu.CtxPushCurrentProc), proc(cu.CtxSetCurrentProc)
	allReduce, send := proc(ncclraw.AllReduceProc), proc(ncclraw.SendProc)
	st := &commState{}
	op := func(ctx cu.CUcontext, k kind, send uintptr) pendingOp {
		return pendingOp{c: st, cuctx: ctx, native: nativeCall{name: "op", kind: k, comm: 7, stream: 9, send: send, recv: send, count: 3, peer: 1}}
	}
	pending := []pendingOp{op(11, opAllReduce, 100), {}, op(22, opAllReduce, 200), op(22, opSend, 300), op(11, opAllReduce, 400)}
	steps, err := groupSteps(nil, pending, new(groupFns))
	require.NoError(t, err)
	type want struct {
		fn, stop, n, arg0 uintptr
	}
	var got []want
	for _, s := range steps {
		got = append(got, want{s.Fn, s.Stop, s.N, s.Args[0]})
	}
	assert.Equal(t, []want{
		{start, 1, 0, 0},
		{push, 1, 1, 11},
		{allReduce, 0, 7, 100},
		{set, 0, 1, 22},
		{allReduce, 0, 7, 200},
		{send, 0, 6, 300},
		{set, 0, 1, 11},
		{allReduce, 0, 7, 400},
		{end, 0, 0, 0},
		{set, 0, 1, 0},
	}, got)
	assert.Equal(t, []int{2, -1, 4, 5, 7}, []int{pending[0].step, pending[1].step, pending[2].step, pending[3].step, pending[4].step})
	assert.Equal(t, []bool{true, false, true, false, true}, []bool{pending[0].switched, pending[1].switched, pending[2].switched, pending[3].switched, pending[4].switched})
	assert.Equal(t, [ccall.SeqArgs]uintptr{300, 3, 0, 1, 7, 9}, steps[5].Args, "ncclSend(sendbuff, count, datatype, peer, comm, stream)")

	steps, err = groupSteps(steps[:0], []pendingOp{{}, {}}, new(groupFns))
	require.NoError(t, err)
	assert.Empty(t, steps, "a group of refused operations calls nothing")
}
