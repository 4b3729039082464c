//go:build amd64 && !windows

package ccall

import "unsafe"

// CallStruct calls f.Fn with a struct of size bytes, read from s, passed by
// value as argument number pos, and the n other (integer) arguments in
// f.Args[:n] in order, the struct left out. f must come from Get (it is on
// the heap). It allocates nothing. A call that StructFits refuses (or a pos
// outside 0..n) is not made: the result is Refused.
//
// System V x86-64: a struct over 16 bytes is of class MEMORY. The caller
// copies it into the stack argument area and the integer arguments still
// take the six registers, whatever the struct's position. So the frame gets
// the n arguments padded to six, then the struct's words, which the call
// places on the stack in order. The struct is copied byte by byte: s need
// not be aligned.
func (f *Frame) CallStruct(n, pos int, s unsafe.Pointer, size uintptr) uintptr {
	if !StructFits(n, size) || pos < 0 || pos > n {
		return Refused
	}
	for i := n; i < maxRegArgs; i++ {
		f.Args[i] = 0
	}
	copy(bytesAt(unsafe.Pointer(&f.Args[maxRegArgs]), size), bytesAt(s, size))
	return f.Call(maxRegArgs + int(size/wordSize))
}
