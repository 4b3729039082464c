package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/purecuda/cuda/internal/ccall"
	"github.com/purecuda/cuda/internal/gen/cheader"
)

// hotFuncs are called on launch hot paths. Each also gets XxxShort, which
// calls through a frame on the stack (ccall.Short) with the entry point the
// caller resolved once (XxxProc), so the hot path touches neither the frame
// pool nor the entry-point table, and takes no frame another call could
// want; Xxx resolves the entry point and calls XxxShort.
var hotFuncs = map[string]bool{"cuLaunchKernel": true, "cuGraphLaunch": true, "ncclGroupStart": true, "ncclGroupEnd": true}

// seqFuncs are called in sequences of C calls made in one foreign call
// (ccall.Run: a context switch, the call, the switch back; a whole NCCL
// group). Each also gets XxxProc, which resolves its entry point, and
// XxxStatus, which turns a result into the error Xxx returns.
var seqFuncs = map[string]bool{
	"cuCtxPushCurrent": true, "cuCtxSetCurrent": true,
	"ncclAllReduce": true, "ncclBroadcast": true, "ncclReduce": true, "ncclAllGather": true,
	"ncclReduceScatter": true, "ncclSend": true, "ncclRecv": true,
	"cublasSgemm_v2": true, "cublasDgemm_v2": true, "cublasCgemm_v2": true, "cublasZgemm_v2": true,
	"cublasSgemm_v2_64": true, "cublasDgemm_v2_64": true, "cublasCgemm_v2_64": true, "cublasZgemm_v2_64": true,
	"cublasGemmEx": true, "cublasGemmEx_64": true, "cublasLtMatmul": true,
}

// locals used by generated function bodies; parameters with these names are renamed.
var reservedLocals = map[string]bool{"fn": true, "err": true, "r1": true, "cf": true, "unsafe": true, "purego": true}

type param struct {
	name, goType string
	arg          string // expression converting it to uintptr ("" for special kinds)
	kind         string // "int", "float", "small", "big"
	size         int64
}

func (e *emitter) params(b binding) ([]param, error) {
	var ps []param
	for i, p := range b.Fn.Params {
		name := p.Name
		if name == "" {
			name = fmt.Sprintf("a%d", i)
		}
		if goKeywords[name] || reservedLocals[name] {
			name += "_"
		}
		gt, err := e.goType(p.Type)
		if err != nil {
			return nil, fmt.Errorf("%s parameter %s: %w", b.CName, name, err)
		}
		if opaqueUserData(b.CName, p.Name, p.Type) || e.address != nil && e.address(b.CName, p.Name, p.Type) {
			gt = "uintptr"
		}
		pr := param{name: name, goType: gt, kind: "int"}
		rt := p.Type.Resolve()
		switch {
		case rt.Kind == cheader.Float:
			pr.kind = "float"
		case rt.Kind == cheader.Record:
			size, _, err := rt.SizeAlign()
			if err != nil {
				return nil, err
			}
			pr.size = size
			switch {
			case size == 8:
				pr.kind = "small"
				pr.arg = fmt.Sprintf("*(*uintptr)(unsafe.Pointer(&%s))", name)
				e.imports["unsafe"] = true
			case size > 16 && size%8 == 0:
				pr.kind = "big"
			default:
				return nil, fmt.Errorf("%s: by-value struct of %d bytes has no lowering", b.CName, size)
			}
		case strings.HasPrefix(gt, "*"):
			pr.arg = fmt.Sprintf("uintptr(unsafe.Pointer(%s))", name)
			e.imports["unsafe"] = true
		case gt == "bool":
			return nil, fmt.Errorf("%s: bool parameter", b.CName)
		default:
			pr.arg = fmt.Sprintf("uintptr(%s)", name)
		}
		ps = append(ps, pr)
	}
	return ps, nil
}

// frameCall emits the body of a call through a pooled frame cf: the
// argument stores, the call, the frame's return to the pool, and the
// KeepAlive of pointer arguments.
func (e *emitter) frameCall(w *bytes.Buffer, ps []param) {
	e.callBody(w, ps, "ccall.Escape", "\tcf := ccall.Get(fn)\n", fmt.Sprintf("cf.Call(%d)", len(ps)))
}

// callBody emits a call through the frame cf: each pointer argument passed
// through escape, setup (which makes cf, if it needs making), the
// argument stores, r1 := call, the pool's Put for a pooled frame, and
// the KeepAlive of pointer arguments.
func (e *emitter) callBody(w *bytes.Buffer, ps []param, escape, setup, call string) {
	var keep []string
	for _, p := range ps {
		if strings.HasPrefix(p.goType, "*") || p.goType == "unsafe.Pointer" {
			conv := p.name
			if p.goType != "unsafe.Pointer" {
				conv = "unsafe.Pointer(" + p.name + ")"
			}
			fmt.Fprintf(w, "\t%s(%s)\n", escape, conv)
			keep = append(keep, p.name)
		}
	}
	fmt.Fprint(w, setup)
	for i, p := range ps {
		arg := p.arg
		if p.goType == "unsafe.Pointer" {
			arg = "uintptr(" + p.name + ")"
		}
		fmt.Fprintf(w, "\tcf.Args[%d] = %s\n", i, arg)
	}
	fmt.Fprintf(w, "\tr1 := %s\n", call)
	if strings.Contains(setup, "ccall.Get") {
		fmt.Fprintf(w, "\tccall.Put(cf)\n")
	}
	if len(keep) > 0 {
		e.imports["runtime"] = true
		for _, k := range keep {
			fmt.Fprintf(w, "\truntime.KeepAlive(%s)\n", k)
		}
	}
}

// shortFunctions ends a hot function's body with a call of its XxxShort,
// and emits XxxShort and XxxProc.
func (e *emitter) shortFunctions(w *bytes.Buffer, b binding, ps []param, sig []string) error {
	if len(ps) > 12 { // ccall.ShortArgs
		return fmt.Errorf("%s: %d arguments do not fit a short frame", b.CName, len(ps))
	}
	procName := "proc" + b.GoName
	names := []string{"fn"}
	for _, p := range ps {
		names = append(names, p.name)
	}
	fmt.Fprintf(w, "\treturn %sShort(%s)\n}\n\n", b.GoName, strings.Join(names, ", "))
	procFunctions(w, b, "a ccall.Short frame of the caller's own")
	fmt.Fprintf(w, "// %sShort calls %s, resolved by %sProc into fn, through\n", b.GoName, b.CName, b.GoName)
	fmt.Fprintf(w, "// a frame on the stack (ccall.Short). Where ccall.StackFrames is true,\n")
	fmt.Fprintf(w, "// pointer arguments may point into the caller's stack: nothing between\n")
	fmt.Fprintf(w, "// their conversion here and the call can move it.\n")
	fmt.Fprintf(w, "func %sShort(%s) error {\n", b.GoName, strings.Join(append([]string{"fn uintptr"}, sig...), ", "))
	e.callBody(w, ps, "ccall.EscapeShort", "\tvar cf ccall.Short\n\tcf.Fn = fn\n", "cf.Call()")
	fmt.Fprintf(w, "\treturn %s.check(r1)\n}\n\n", procName)
	return nil
}

// procFunctions emits XxxProc and XxxStatus, for calls of b made through
// how (a frame or sequence of the caller's own).
func procFunctions(w *bytes.Buffer, b binding, how string) {
	procName := "proc" + b.GoName
	fmt.Fprintf(w, "// %sProc resolves %s, for calls through %s.\n", b.GoName, b.CName, how)
	fmt.Fprintf(w, "func %sProc() (uintptr, error) { return %s.find() }\n\n", b.GoName, procName)
	fmt.Fprintf(w, "// %sStatus is the error for status r of %s called through\n", b.GoName, b.CName)
	fmt.Fprintf(w, "// %s (nil for success).\n", how)
	fmt.Fprintf(w, "func %sStatus(r uintptr) error { return %s.check(r) }\n\n", b.GoName, procName)
}

// function emits the Go function for one binding.
func (e *emitter) function(w *bytes.Buffer, b binding) error {
	ps, err := e.params(b)
	if err != nil {
		return err
	}
	var sig []string
	hasFloat, big := false, -1
	for i, p := range ps {
		sig = append(sig, p.name+" "+p.goType)
		if p.kind == "float" {
			hasFloat = true
		}
		if p.kind == "big" {
			if big >= 0 {
				return fmt.Errorf("%s: two large by-value structs", b.CName)
			}
			big = i
		}
	}
	if hasFloat && big >= 0 {
		return fmt.Errorf("%s: floats and large structs together", b.CName)
	}
	procName := "proc" + b.GoName
	resultIsStatus := b.Fn.Result.Kind == cheader.Named && e.rename(b.Fn.Result.Name) == e.result
	retGo := ""
	if !resultIsStatus {
		var err error
		retGo, err = e.goType(b.Fn.Result)
		if err != nil {
			return fmt.Errorf("%s result: %w", b.CName, err)
		}
	}
	abiNote := ""
	if b.ABI != 0 {
		abiNote = fmt.Sprintf(" at ABI version %d", b.ABI)
	}
	fmt.Fprintf(w, "var %s = proc{name: %q, abi: %d, export: %q%s}\n\n", procName, b.CName, b.ABI, b.Export, e.procFields)
	fmt.Fprintf(w, "// %s calls the C function %s%s.\n", b.GoName, b.CName, abiNote)
	if resultIsStatus {
		fmt.Fprintf(w, "// A status other than success is returned as *Error.\n")
		fmt.Fprintf(w, "func %s(%s) error {\n", b.GoName, strings.Join(sig, ", "))
		fmt.Fprintf(w, "\tfn, err := %s.find()\n\tif err != nil {\n\t\treturn err\n\t}\n", procName)
	} else {
		fmt.Fprintf(w, "// The error is only set when the function cannot be resolved.\n")
		fmt.Fprintf(w, "func %s(%s) (%s, error) {\n", b.GoName, strings.Join(sig, ", "), retGo)
		fmt.Fprintf(w, "\tfn, err := %s.find()\n\tif err != nil {\n\t\tvar zero %s\n\t\treturn zero, err\n\t}\n", procName, retGo)
	}
	var call string
	switch {
	case hasFloat:
		var names, types []string
		for _, p := range ps {
			names = append(names, p.name)
			types = append(types, p.goType)
		}
		ret := e.result
		if !resultIsStatus {
			ret = retGo
		}
		fnVar := "fn" + b.GoName
		fmt.Fprintf(w, "\t%s.once.Do(func() { purego.RegisterFunc(&%s, fn) })\n", procName, fnVar)
		call = fmt.Sprintf("%s(%s)", fnVar, strings.Join(names, ", "))
		defer fmt.Fprintf(w, "// %s is bound with purego.RegisterFunc on first use: the C function takes a float by value, which SyscallN cannot pass.\nvar %s func(%s) %s\n\n", fnVar, fnVar, strings.Join(types, ", "), ret)
		if resultIsStatus {
			fmt.Fprintf(w, "\treturn %s.check(uintptr(%s))\n}\n\n", procName, call)
		} else {
			fmt.Fprintf(w, "\treturn %s, nil\n}\n\n", call)
		}
		return nil
	case big >= 0 && e.structFrames:
		// The other arguments fill the frame in order; CallStruct places
		// the struct as the platform's ABI wants it.
		rest := append(append([]param(nil), ps[:big]...), ps[big+1:]...)
		if !ccall.StructFits(len(rest), uintptr(ps[big].size)) {
			return fmt.Errorf("%s: a by-value struct of %d bytes beside %d arguments has no lowering", b.CName, ps[big].size, len(rest))
		}
		e.imports["unsafe"] = true
		e.imports["github.com/purecuda/cuda/internal/ccall"] = true
		e.callBody(w, rest, "ccall.Escape", "\tcf := ccall.Get(fn)\n",
			fmt.Sprintf("cf.CallStruct(%d, %d, unsafe.Pointer(&%s), %d)", len(rest), big, ps[big].name, ps[big].size))
	case big >= 0:
		var args []string
		for i, p := range ps {
			if i != big {
				args = append(args, p.arg)
			}
		}
		e.imports["unsafe"] = true
		call = fmt.Sprintf("syscallStructArg(fn, %d, unsafe.Pointer(&%s), %d, %s)", big, ps[big].name, ps[big].size, strings.Join(args, ", "))
	default:
		if len(ps) > 32 {
			return fmt.Errorf("%s: %d arguments", b.CName, len(ps))
		}
		if len(ps) == 0 && !(hotFuncs[b.CName] && resultIsStatus) {
			e.imports["github.com/ebitengine/purego"] = true
			fmt.Fprintf(w, "\tr1, _, _ := purego.SyscallN(fn)\n")
			break
		}
		e.imports["github.com/purecuda/cuda/internal/ccall"] = true
		if hotFuncs[b.CName] && resultIsStatus {
			return e.shortFunctions(w, b, ps, sig)
		}
		e.frameCall(w, ps)
	}
	if call != "" {
		fmt.Fprintf(w, "\tr1, _, _ := %s\n", call)
	}
	if resultIsStatus {
		fmt.Fprintf(w, "\treturn %s.check(r1)\n}\n\n", procName)
		if seqFuncs[b.CName] {
			procFunctions(w, b, "a sequence of C calls (ccall.Run)")
		}
		return nil
	}
	conv := fmt.Sprintf("%s(r1)", retGo)
	if strings.HasPrefix(retGo, "*") {
		e.imports["unsafe"] = true
		conv = fmt.Sprintf("*(*%s)(unsafe.Pointer(&r1))", retGo)
	}
	fmt.Fprintf(w, "\treturn %s, nil\n}\n\n", conv)
	return nil
}
