package cublas

import (
	"math"
	"unsafe"

	"github.com/purecuda/cuda/internal/cublasraw"
)

// Half is an IEEE 754 half-precision float (binary16), stored as its 16
// bits: the element type of FP16 matrices (CUDA_R_16F).
type Half uint16

// BFloat16 is a bfloat16 float (the upper 16 bits of a float32), stored as
// its bits: the element type of BF16 matrices (CUDA_R_16BF).
type BFloat16 uint16

// HalfOf rounds f to the nearest Half (ties to even); values too large
// become ±Inf, NaN stays NaN.
func HalfOf(f float32) Half {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	switch {
	case exp == 0xff: // Inf or NaN
		if mant != 0 {
			return Half(sign | 0x7e00)
		}
		return Half(sign | 0x7c00)
	case exp-127 > 15: // too large
		return Half(sign | 0x7c00)
	case exp-127 >= -14: // normal
		e := uint32(exp - 127 + 15)
		v := e<<10 | mant>>13
		rest := mant & 0x1fff
		if rest > 0x1000 || (rest == 0x1000 && v&1 == 1) {
			v++ // may carry into the exponent, up to Inf: correct
		}
		return Half(uint32(sign) | v)
	case exp-127 >= -25: // subnormal half
		m := mant | 0x800000
		shift := uint32(-14 - (exp - 127) + 13)
		v := m >> shift
		rest := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rest > half || (rest == half && v&1 == 1) {
			v++
		}
		return Half(uint32(sign) | v)
	}
	return Half(sign) // underflows to ±0
}

// Float32 is h's value.
func (h Half) Float32() float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		f := float32(mant) / (1 << 24) // mant · 2^-24
		if sign != 0 {
			return -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// BFloat16Of rounds f to the nearest BFloat16 (ties to even); NaN stays
// NaN.
func BFloat16Of(f float32) BFloat16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep it one
		return BFloat16(b>>16 | 0x40)
	}
	b += 0x7fff + (b>>16)&1
	return BFloat16(b >> 16)
}

// Float32 is b's value.
func (b BFloat16) Float32() float32 { return math.Float32frombits(uint32(b) << 16) }

// Float is the element types of the routines that exist for the four
// BLAS types: float32 (S), float64 (D), complex64 (C), complex128 (Z).
type Float interface {
	float32 | float64 | complex64 | complex128
}

// Real is float32 and float64.
type Real interface{ float32 | float64 }

// Element is every element type a matrix or vector view may have: the
// BLAS types, the 16-bit floats, the integer types of GemmEx and the 8-bit
// floats of FP8 MatmulPlans.
type Element interface {
	float32 | float64 | complex64 | complex128 | Half | BFloat16 | int8 | uint8 | int32 | Float8E4M3 | Float8E5M2
}

// kind is the BLAS type of a Float type parameter.
type kind uint8

const (
	kS kind = iota // float32
	kD             // float64
	kC             // complex64
	kZ             // complex128
)

// kindOf is T's BLAS type.
func kindOf[T Float]() kind {
	var z T
	switch any(z).(type) {
	case float32:
		return kS
	case float64:
		return kD
	case complex64:
		return kC
	}
	return kZ
}

// isComplex reports whether T is complex64 or complex128.
func isComplex[T Element]() bool {
	var z T
	switch any(z).(type) {
	case complex64, complex128:
		return true
	}
	return false
}

// dataType is T's CUDA data type (cudaDataType).
func dataType[T Element]() cublasraw.CudaDataType {
	var z T
	switch any(z).(type) {
	case float32:
		return cublasraw.CUDA_R_32F
	case float64:
		return cublasraw.CUDA_R_64F
	case complex64:
		return cublasraw.CUDA_C_32F
	case complex128:
		return cublasraw.CUDA_C_64F
	case Half:
		return cublasraw.CUDA_R_16F
	case BFloat16:
		return cublasraw.CUDA_R_16BF
	case int8:
		return cublasraw.CUDA_R_8I
	case uint8:
		return cublasraw.CUDA_R_8U
	case Float8E4M3:
		return cublasraw.CUDA_R_8F_E4M3
	case Float8E5M2:
		return cublasraw.CUDA_R_8F_E5M2
	}
	return cublasraw.CUDA_R_32I
}

// sizeOf is the size of one T in bytes.
func sizeOf[T any]() uintptr {
	var z T
	return unsafe.Sizeof(z)
}
