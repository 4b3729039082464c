package cublas

import (
	"math"
	"sort"
)

// Float8E4M3 is an 8-bit float with 4 exponent bits and 3 mantissa bits
// (the OCP FP8 E4M3 format, CUDA_R_8F_E4M3), stored as its bits: finite
// values up to ±448, no infinities, and NaN in two bit patterns, 0x7f and
// 0xff (one per sign). Conversion to it saturates: Float8E4M3Of gives
// ±448 for anything larger, infinities included, where Float8E5M2Of
// overflows to ±Inf. It is an element type of FP8 MatmulPlans (on GPUs of
// compute capability 8.9 and later).
type Float8E4M3 uint8

// Float8E5M2 is an 8-bit float with 5 exponent bits and 2 mantissa bits
// (the OCP FP8 E5M2 format, CUDA_R_8F_E5M2), stored as its bits: finite
// values up to ±57344, infinities (0x7c, 0xfc) and NaNs as in IEEE 754.
// Conversion to it overflows: Float8E5M2Of gives ±Inf from 61440 (the
// midpoint past 57344) on, where Float8E4M3Of saturates at ±448. It is an
// element type of FP8 MatmulPlans.
type Float8E5M2 uint8

// Float32 is f's value (NaN for its NaN patterns).
func (f Float8E4M3) Float32() float32 {
	exp, man := int(f>>3)&0xf, float64(f&7)
	var v float64
	switch {
	case exp == 0xf && man == 7:
		return float32(math.NaN())
	case exp == 0:
		v = math.Ldexp(man, -9) // man/8 · 2^-6
	default:
		v = math.Ldexp(1+man/8, exp-7)
	}
	if f&0x80 != 0 {
		v = -v
	}
	return float32(v)
}

// Float32 is f's value.
func (f Float8E5M2) Float32() float32 {
	exp, man := int(f>>2)&0x1f, float64(f&3)
	var v float64
	switch {
	case exp == 0x1f && man != 0:
		return float32(math.NaN())
	case exp == 0x1f:
		v = math.Inf(1)
	case exp == 0:
		v = math.Ldexp(man, -16) // man/4 · 2^-14
	default:
		v = math.Ldexp(1+man/4, exp-15)
	}
	if f&0x80 != 0 {
		v = -v
	}
	return float32(v)
}

// e4m3Pos and e5m2Pos are the non-negative finite values of each format,
// indexed by their bits (which order them), and one more: the value where
// rounding stops being to a finite value (E4M3: none, it saturates; E5M2:
// 2^16, which is infinity).
var e4m3Pos, e5m2Pos = func() ([]float64, []float64) {
	var a, b []float64
	for c := 0; c < 0x7f; c++ {
		a = append(a, float64(Float8E4M3(c).Float32()))
	}
	for c := 0; c < 0x7c; c++ {
		b = append(b, float64(Float8E5M2(c).Float32()))
	}
	return a, append(b, 65536)
}()

// nearest is the index of the value of pos nearest to a (a ≥ 0, not NaN),
// ties to the even index: round to nearest even on the bit patterns.
func nearest(pos []float64, a float64) int {
	i := sort.SearchFloat64s(pos, a) // the first value ≥ a
	if i == len(pos) {
		return i - 1
	}
	if i == 0 || pos[i] == a {
		return i
	}
	lo, hi := a-pos[i-1], pos[i]-a
	if lo < hi || (lo == hi && (i-1)%2 == 0) {
		return i - 1
	}
	return i
}

// Float8E4M3Of rounds f to the nearest Float8E4M3 (ties to even); values
// beyond ±448, infinities included, saturate to ±448 (the format has no
// infinity; NVIDIA's __NV_SATFINITE conversion); NaN stays NaN.
func Float8E4M3Of(f float32) Float8E4M3 {
	if f != f {
		return 0x7f
	}
	sign := Float8E4M3(0)
	a := float64(f)
	if math.Signbit(a) {
		sign, a = 0x80, -a
	}
	return sign | Float8E4M3(nearest(e4m3Pos, a))
}

// Float8E5M2Of rounds f to the nearest Float8E5M2 (ties to even); values
// too large become ±Inf, NaN stays NaN.
func Float8E5M2Of(f float32) Float8E5M2 {
	if f != f {
		return 0x7e
	}
	sign := Float8E5M2(0)
	a := float64(f)
	if math.Signbit(a) {
		sign, a = 0x80, -a
	}
	return sign | Float8E5M2(nearest(e5m2Pos, a)) // index 0x7c is the infinity
}
