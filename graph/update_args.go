package graph

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/seam"
)

// Updating a kernel node's arguments
//
// cuGraphExecKernelNodeSetParams takes a node's whole parameters, and CUDA
// has no call that reads them back from an executable. So the Exec keeps,
// per kernel node it changed (or read), what it last gave CUDA: the
// kernel, its shape and a copy of every argument's bytes (kernelArgs). The
// first change of a node the executable never changed reads the node's
// parameters from the graph it was made from, which are the executable's
// until a whole-graph Update; after one, only a node set again as a whole
// (SetKernel, SetKernelWith, SetKernelArgs) is known.
//
// What SetKernelArg gives a node (a buffer's memory) is kept per argument
// and retired, as owner sets are, when a later change replaces it; the
// owners of a whole change stay in e.own, as before.

// kernelArgs is what an executable last gave one kernel node.
type kernelArgs struct {
	kp    cu.CUDA_KERNEL_NODE_PARAMS_v2 // kernel, shape and shared memory; KernelParams unset
	sizes []uintptr                     // each argument's size in bytes
	vals  [][]byte                      // each argument's bytes
	own   []*ownerSet                   // per argument: what SetKernelArg gave it, or nil
}

// paramSizes reads the sizes of the parameters of kp's kernel
// (cuKernelGetParamInfo or cuFuncGetParamInfo, CUDA 12.4+). The context is
// bound.
func paramSizes(op string, kp *cu.CUDA_KERNEL_NODE_PARAMS_v2) ([]uintptr, error) {
	var sizes []uintptr
	for i := uintptr(0); ; i++ {
		var off, size uintptr
		var err error
		if kp.Kern != 0 {
			err = cu.KernelGetParamInfo(kp.Kern, i, &off, &size)
		} else {
			err = cu.FuncGetParamInfo(kp.Func, i, &off, &size)
		}
		switch {
		case err == nil:
			sizes = append(sizes, size)
		case errors.Is(err, driver.ErrInvalidValue):
			return sizes, nil // past the last parameter
		default:
			return nil, fmt.Errorf("graph: %s: the driver does not tell the kernel's parameters (CUDA 12.4+ does): %w", op, err)
		}
	}
}

// newKernelArgs copies kp, whose KernelParams point to the argument values,
// as the node's known parameters. The context is bound.
func newKernelArgs(op string, kp *cu.CUDA_KERNEL_NODE_PARAMS_v2) (*kernelArgs, error) {
	sizes, err := paramSizes(op, kp)
	if err != nil {
		return nil, err
	}
	k := &kernelArgs{kp: *kp, sizes: sizes, vals: make([][]byte, len(sizes)), own: make([]*ownerSet, len(sizes))}
	k.kp.KernelParams = nil
	if len(sizes) > 0 && kp.KernelParams == nil {
		return nil, invalid(op, "the kernel node has no argument values to read")
	}
	ptrs := unsafe.Slice(kp.KernelParams, len(sizes))
	for i, size := range sizes {
		k.vals[i] = slices.Clone(unsafe.Slice((*byte)(ptrs[i]), size))
	}
	return k, nil
}

// set gives node n of e the parameters of k with vals as the argument
// values (cuGraphExecKernelNodeSetParams).
func (k *kernelArgs) set(e *Exec, n Node, vals [][]byte) error {
	ptrs := make([]unsafe.Pointer, len(vals))
	for i, v := range vals {
		if len(v) > 0 {
			ptrs[i] = unsafe.Pointer(&v[0])
		}
	}
	kp := k.kp
	if len(ptrs) > 0 {
		kp.KernelParams = &ptrs[0]
	}
	return cu.GraphExecKernelNodeSetParams(e.h, n.h, &kp)
}

// retireArgs retires what SetKernelArg gave k's arguments. e.mu is held.
func (e *execCore) retireArgs(k *kernelArgs) {
	if k == nil {
		return
	}
	var old []release.Owner
	for i, o := range k.own {
		if o != nil {
			old = append(old, o)
			k.own[i] = nil
		}
	}
	e.retire(old)
}

// argOwners appends what SetKernelArg gave the kernel nodes to os and
// forgets every node's parameters (the executable is destroyed, or updated
// as a whole). e.mu is held.
func (e *execCore) argOwners(os []release.Owner) []release.Owner {
	for _, k := range e.kargs {
		if k == nil {
			continue
		}
		for _, o := range k.own {
			if o != nil {
				os = append(os, o)
			}
		}
	}
	e.kargs = nil
	return os
}

// kernelArgsOf returns what the executable knows of kernel node n's
// parameters, reading them from the source graph the first time. e.mu and
// the family lock are held, the context bound.
func (e *Exec) kernelArgsOf(op string, n Node) (*kernelArgs, error) {
	if k, ok := e.kargs[n.h]; ok {
		if k == nil {
			return nil, invalid(op, "the node's kernel parameters are not known (the driver did not tell them when it was set)")
		}
		return k, nil
	}
	if e.updated {
		return nil, invalid(op, "the executable was updated from another graph (Exec.Update): set the node's whole kernel with SetKernel or SetKernelArgs first")
	}
	t := new(cu.CUgraphNodeType)
	if err := cu.GraphNodeGetType(n.h, t); err != nil {
		return nil, err
	}
	if Kind(*t) != KindKernel {
		return nil, invalid(op, "a %s node has no kernel arguments", Kind(*t))
	}
	kp := new(cu.CUDA_KERNEL_NODE_PARAMS_v2)
	if err := cu.GraphKernelNodeGetParams(n.h, kp); err != nil {
		return nil, err
	}
	k, err := newKernelArgs(op, kp)
	if err != nil {
		return nil, err
	}
	e.remember(n, k)
	return k, nil
}

// remember records k as node n's parameters (nil: not known). e.mu is held.
func (e *execCore) remember(n Node, k *kernelArgs) {
	if e.kargs == nil {
		e.kargs = map[cu.CUgraphNode]*kernelArgs{}
	}
	e.kargs[n.h] = k
}

// setKernelParams gives kernel node n the whole parameters kp
// (cuGraphExecKernelNodeSetParams) and records them for SetKernelArg;
// what SetKernelArg gave the node before is retired. e.mu and the family
// lock are held, the context bound.
func (e *Exec) setKernelParams(op string, n Node, kp *cu.CUDA_KERNEL_NODE_PARAMS_v2) error {
	k, kerr := newKernelArgs(op, kp) // before the change: kp's values are read here
	if err := cu.GraphExecKernelNodeSetParams(e.h, n.h, kp); err != nil {
		return err
	}
	e.retireArgs(e.kargs[n.h])
	if kerr != nil {
		k = nil // the node changed, but a later SetKernelArg cannot know its parameters
	}
	e.remember(n, k)
	return nil
}

// SetKernelArg changes argument i of kernel node n of the executable to v
// (cuGraphExecKernelNodeSetParams), keeping its kernel, shape and other
// arguments, without instantiating again. v is checked as Graph.Kernel
// checks an argument, and must have the size of the kernel's parameter i;
// a buffer is held for as long as the executable may run with it, and the
// value it replaces is let go once the launches before the change are
// done. The executable's nodes are known from the graph it was made from
// and from its own changes: after Update, set the node's whole kernel with
// SetKernel or SetKernelArgs first. The kernel's parameters are read from
// the driver (CUDA 12.4+). On failure nothing changed.
func (e *Exec) SetKernelArg(n Node, i int, v any) error {
	const op = "Exec.SetKernelArg"
	if err := e.check(op); err != nil {
		return err
	}
	if err := e.singleContext(op); err != nil {
		return err
	}
	val, ref, err := seam.MarshalArg(op, e.ctx, i, v)
	if err != nil {
		return err
	}
	kept := false
	err = e.setNode(op, n, nil, nil, false, func() ([]release.Owner, error) {
		k, err := e.kernelArgsOf(op, n)
		if err != nil {
			return nil, err
		}
		if i < 0 || i >= len(k.sizes) {
			return nil, invalid(op, "argument %d of a kernel of %d", i, len(k.sizes))
		}
		if uintptr(len(val)) != k.sizes[i] {
			return nil, invalid(op, "argument %d: the kernel expects %d bytes, %T is %d", i, k.sizes[i], v, len(val))
		}
		vals := slices.Clone(k.vals)
		vals[i] = val
		if err := k.set(e, n, vals); err != nil {
			return nil, err
		}
		k.vals = vals
		old := k.own[i]
		k.own[i] = nil
		if ref.Valid() {
			k.own[i] = newOwnerSet([]release.Owner{ref})
			kept = true
		}
		if old != nil {
			e.retire([]release.Owner{old})
		}
		return nil, nil
	})
	if !kept {
		_ = ref.Release() // the zero Ref releases nothing
	}
	return err
}

// SetKernelArgs changes kernel node n of the executable to launch a's
// kernel with a's arguments (cuGraphExecKernelNodeSetParams), keeping its
// grid, block and shared memory, without instantiating again: the way to
// update a node from Args prepared once (Function.NewArgs, SetArg). The
// node reads the values a holds now; a later SetArg on a changes the node
// only through another SetKernelArgs. a, and with it its buffers and the
// kernel's module or library, is held for as long as the executable may
// run them, even after a.Close. After Update, set the node's whole kernel
// with SetKernel first. On failure nothing changed.
func (e *Exec) SetKernelArgs(n Node, a *driver.Args) error {
	const op = "Exec.SetKernelArgs"
	if err := e.check(op); err != nil {
		return err
	}
	if err := e.singleContext(op); err != nil {
		return err
	}
	if a == nil {
		return invalid(op, "nil args")
	}
	if err := seam.ArgsUsableIn(a, e.ctx); err != nil {
		return err
	}
	ref, err := seam.Hold(a)
	if err != nil {
		return err
	}
	fh, kern := seam.Function(a.Function())
	return e.setNode(op, n, []release.Owner{ref}, nil, true, func() ([]release.Owner, error) {
		k, err := e.kernelArgsOf(op, n)
		if err != nil {
			return nil, err
		}
		return nil, a.Raw(func(_ uintptr, params unsafe.Pointer) error {
			kp := k.kp
			kp.Func, kp.Kern, kp.Ctx = cu.CUfunction(fh), 0, 0
			if kern != 0 {
				kp.Func, kp.Kern, kp.Ctx = 0, cu.CUkernel(kern), cu.CUcontext(seam.Context(e.ctx))
			}
			kp.KernelParams = (*unsafe.Pointer)(params)
			return e.setKernelParams(op, n, &kp)
		})
	})
}
