//go:build !amd64 || windows

package ccall

import "unsafe"

// CallStruct calls f.Fn with a struct of size bytes, read from s, passed by
// value as argument number pos, and the n other (integer) arguments in
// f.Args[:n] in order, the struct left out. f must come from Get (it is on
// the heap). It allocates nothing. A call that StructFits refuses (or a pos
// outside 0..n) is not made: the result is Refused.
//
// AAPCS64 (arm64) and the Windows x64 convention pass such a struct by
// reference: the caller makes a copy, which the callee may change, and
// passes its address in the argument's place. The copy is kept at the end
// of the frame's arguments, which the call does not pass; the frame stays
// where it is until the call returns, and the callee cannot keep the
// address (the argument is a value to it).
func (f *Frame) CallStruct(n, pos int, s unsafe.Pointer, size uintptr) uintptr {
	if !StructFits(n, size) || pos < 0 || pos > n {
		return Refused
	}
	at := MaxArgs - int(size/wordSize)
	copy(bytesAt(unsafe.Pointer(&f.Args[at]), size), bytesAt(s, size))
	copy(f.Args[pos+1:n+1], f.Args[pos:n])
	f.Args[pos] = uintptr(unsafe.Pointer(&f.Args[at]))
	return f.Call(n + 1)
}
