package ccall

import "unsafe"

// Refused is what CallStruct returns, without calling anything, for a
// call it cannot make (StructFits is false). As a C status (an int32 of
// -1) it is a failure for every library purecuda binds.
const Refused = ^uintptr(0)

// maxRegArgs is how many other integer arguments a call with a struct by
// value may have: System V x86-64 passes six in registers (the struct
// itself goes in memory, after them), and AAPCS64 eight, one of which is
// taken by the struct's copy.
const maxRegArgs = 6

// StructFits reports whether CallStruct can pass a struct of size bytes by
// value beside n integer arguments: size over 16 bytes (smaller structs go
// in registers, which CallStruct does not do) and a multiple of 8, at most
// six other arguments, and room for the struct's words in a Frame on every
// platform. The generator binds a function through CallStruct only when it
// is true.
func StructFits(n int, size uintptr) bool {
	w := int(size / wordSize)
	return size > 16 && size%8 == 0 && n >= 0 && n <= maxRegArgs &&
		maxRegArgs+w <= MaxArgs && n+1+w <= MaxArgs
}

// wordSize is the size of one argument in a Frame.
const wordSize = unsafe.Sizeof(uintptr(0))

// bytesAt is the n bytes at p.
func bytesAt(p unsafe.Pointer, n uintptr) []byte { return unsafe.Slice((*byte)(p), n) }
