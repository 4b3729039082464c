package cublas_test

import (
	"math"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/internal/cublasraw"
)

// halfValue is h's value, decoded from the IEEE 754 binary16 fields in
// float64 arithmetic (exact): the reference for Half.Float32.
func halfValue(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, mant := int(h>>10)&0x1f, float64(h&0x3ff)
	switch exp {
	case 0x1f:
		if mant != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	case 0:
		return sign * math.Ldexp(mant, -24)
	}
	return sign * math.Ldexp(1+mant/1024, exp-15)
}

// TestHalfFloat32Exhaustive: every one of the 65536 Halfs decodes to the
// float32 its fields say (bit for bit: -0, subnormals, ±Inf; a NaN to a
// NaN of the same sign and payload), and rounds back to itself (a NaN to
// a NaN of its sign).
func TestHalfFloat32Exhaustive(t *testing.T) {
	bad := 0
	for i := 0; i < 1<<16; i++ {
		h := cublas.Half(i)
		f := h.Float32()
		want := halfValue(uint16(i))
		if math.IsNaN(want) {
			bits := math.Float32bits(f)
			ok := math.IsNaN(float64(f)) && bits>>31 == uint32(i>>15) && (bits>>13)&0x3ff == uint32(i&0x3ff)
			back := cublas.HalfOf(f)
			ok = ok && back&0x7c00 == 0x7c00 && back&0x3ff != 0 && back&0x8000 == h&0x8000
			if !ok && bad < 10 {
				t.Errorf("NaN %#04x: Float32 %#08x, back %#04x", i, bits, uint16(back))
			}
			if !ok {
				bad++
			}
			continue
		}
		if math.Float32bits(f) != math.Float32bits(float32(want)) || cublas.HalfOf(f) != h {
			if bad < 10 {
				t.Errorf("%#04x: Float32 %#08x (want %#08x), back %#04x", i, math.Float32bits(f), math.Float32bits(float32(want)), uint16(cublas.HalfOf(f)))
			}
			bad++
		}
	}
	assert.Zero(t, bad, "Halfs that do not decode or round-trip")
}

// positiveHalfs are the finite non-negative Half values in order (their
// bits 0 to 0x7bff are ordered as their values), then 2^16 for the bits
// of +Inf, the next step up, for rounding.
var positiveHalfs = func() []float64 {
	v := make([]float64, 0x7c01)
	for i := range v {
		v[i] = halfValue(uint16(i))
	}
	v[0x7c00] = 65536
	return v
}()

// refHalfOf rounds f to the nearest Half by searching the table of Half
// values, ties to the even bit pattern, beyond 65520 (the midpoint of the
// largest Half, 65504, and 2^16) to Inf.
func refHalfOf(f float32) cublas.Half {
	var sign cublas.Half
	if math.Signbit(float64(f)) {
		sign = 0x8000
	}
	a := math.Abs(float64(f))
	if math.IsNaN(a) {
		return sign | 0x7e00
	}
	if a >= 65520 {
		return sign | 0x7c00
	}
	hi := sort.SearchFloat64s(positiveHalfs, a) // first >= a
	if positiveHalfs[hi] == a {
		return sign | cublas.Half(hi)
	}
	lo := hi - 1
	switch dl, dh := a-positiveHalfs[lo], positiveHalfs[hi]-a; {
	case dl < dh:
		return sign | cublas.Half(lo)
	case dh < dl:
		return sign | cublas.Half(hi)
	}
	if lo%2 == 0 {
		return sign | cublas.Half(lo)
	}
	return sign | cublas.Half(hi)
}

// halfProbes are float32 values at and around every Half, every midpoint
// of two neighbouring Halfs (the ties), and the float32s around the
// limits, of both signs.
func halfProbes() []float32 {
	var out []float32
	add := func(f float32) {
		out = append(out, f, math.Nextafter32(f, float32(math.Inf(1))), math.Nextafter32(f, float32(math.Inf(-1))))
	}
	for i := 0; i < 0x7c00; i++ {
		add(float32(positiveHalfs[i]))
		if i+1 < 0x7c00 {
			add(float32((positiveHalfs[i] + positiveHalfs[i+1]) / 2)) // exact: 12 significant bits
		}
	}
	for _, f := range []float32{65520, 65536, 1e6, math.MaxFloat32, float32(math.Ldexp(1, -25)), float32(math.Ldexp(1, -26)), float32(math.Ldexp(3, -26)), math.SmallestNonzeroFloat32} {
		add(f)
	}
	n := len(out)
	for i := 0; i < n; i++ {
		out = append(out, -out[i])
	}
	return out
}

// TestHalfOfRounding: HalfOf rounds to nearest, ties to even, at every
// Half and every tie between two (subnormals, the normal range, the
// largest finite value and overflow to Inf included), and on a sweep of
// float32 bit patterns, as the table search does.
func TestHalfOfRounding(t *testing.T) {
	bad := 0
	check := func(f float32) {
		if math.IsNaN(float64(f)) {
			return
		}
		if got, want := cublas.HalfOf(f), refHalfOf(f); got != want {
			if bad < 10 {
				t.Errorf("HalfOf(%g = %#08x) = %#04x, want %#04x", f, math.Float32bits(f), uint16(got), uint16(want))
			}
			bad++
		}
	}
	probes := halfProbes()
	require.Greater(t, len(probes), 300000)
	for _, f := range probes {
		check(f)
	}
	for b := uint64(0); b < 1<<32; b += 7919 { // a sweep of every exponent and sign
		check(math.Float32frombits(uint32(b)))
	}
	assert.Zero(t, bad)

	// The cases by name.
	assert.Equal(t, cublas.Half(0x3c00), cublas.HalfOf(1))
	assert.Equal(t, cublas.Half(0xc000), cublas.HalfOf(-2))
	assert.Equal(t, cublas.Half(0x3c00), cublas.HalfOf(1+1.0/2048), "the tie above 1 goes down, to the even 1")
	assert.Equal(t, cublas.Half(0x3c02), cublas.HalfOf(1+3.0/2048), "the tie above 1+2^-10 goes up, to the even one")
	assert.Equal(t, cublas.Half(0x7bff), cublas.HalfOf(65504))
	assert.Equal(t, cublas.Half(0x7bff), cublas.HalfOf(65519.996))
	assert.Equal(t, cublas.Half(0x7c00), cublas.HalfOf(65520), "the tie above the largest goes to Inf (even)")
	assert.Equal(t, cublas.Half(0xfc00), cublas.HalfOf(-1e30))
	assert.Equal(t, cublas.Half(0x0001), cublas.HalfOf(float32(math.Ldexp(1, -24))), "the smallest subnormal")
	assert.Equal(t, cublas.Half(0x0000), cublas.HalfOf(float32(math.Ldexp(1, -25))), "half of it ties to 0 (even)")
	assert.Equal(t, cublas.Half(0x0001), cublas.HalfOf(math.Nextafter32(float32(math.Ldexp(1, -25)), 1)))
	assert.Equal(t, cublas.Half(0x0002), cublas.HalfOf(float32(math.Ldexp(3, -25))), "1.5 subnormal steps tie to 2")
	assert.Equal(t, cublas.Half(0x03ff), cublas.HalfOf(float32(math.Ldexp(1023, -24))), "the largest subnormal")
	assert.Equal(t, cublas.Half(0x0400), cublas.HalfOf(float32(math.Ldexp(2047, -25))), "the tie below the smallest normal goes up (even)")
	assert.Equal(t, cublas.Half(0x8000), cublas.HalfOf(float32(math.Copysign(0, -1))))
	assert.Equal(t, cublas.Half(0x8000), cublas.HalfOf(-1e-30))
	assert.Equal(t, cublas.Half(0x7c00), cublas.HalfOf(float32(math.Inf(1))))
	assert.Equal(t, cublas.Half(0xfc00), cublas.HalfOf(float32(math.Inf(-1))))
	for _, nan := range []uint32{0x7fc00000, 0x7f800001, 0xffc00000, 0x7fbfffff, 0xff800001} {
		h := cublas.HalfOf(math.Float32frombits(nan))
		assert.True(t, h&0x7c00 == 0x7c00 && h&0x3ff != 0, "NaN %#08x stays NaN: %#04x", nan, uint16(h))
		assert.Equal(t, nan>>31 == 1, h&0x8000 != 0, "NaN %#08x keeps its sign", nan)
		assert.True(t, math.IsNaN(float64(h.Float32())))
	}
}

// refBFloat16Of rounds f to the nearest BFloat16 in float64 arithmetic
// from its two neighbours (f's bits with the low 16 cleared, and the next),
// ties to even; the neighbour above the largest finite is Inf, taken as
// 2^128 for the distance.
func refBFloat16Of(f float32) cublas.BFloat16 {
	bits := math.Float32bits(f)
	lo := bits &^ 0xffff
	hi := lo + 0x10000
	a := math.Abs(float64(f))
	vlo := math.Abs(float64(math.Float32frombits(lo)))
	vhi := math.Abs(float64(math.Float32frombits(hi)))
	if hi&0x7fffffff == 0x7f800000 {
		vhi = math.Ldexp(1, 128)
	}
	switch dl, dh := a-vlo, vhi-a; {
	case dl < dh:
		return cublas.BFloat16(lo >> 16)
	case dh < dl:
		return cublas.BFloat16(hi >> 16)
	}
	if (lo>>16)&1 == 0 {
		return cublas.BFloat16(lo >> 16)
	}
	return cublas.BFloat16(hi >> 16)
}

// TestBFloat16Exhaustive: every BFloat16 is the upper half of its float32
// and rounds back to itself (a NaN to a NaN of its sign); BFloat16Of
// rounds to nearest, ties to even, at every BFloat16, every tie and a
// sweep of float32 bit patterns.
func TestBFloat16Exhaustive(t *testing.T) {
	bad := 0
	report := func(format string, args ...any) {
		if bad < 10 {
			t.Errorf(format, args...)
		}
		bad++
	}
	for i := 0; i < 1<<16; i++ {
		b := cublas.BFloat16(i)
		f := b.Float32()
		if math.Float32bits(f) != uint32(i)<<16 {
			report("%#04x: Float32 %#08x", i, math.Float32bits(f))
		}
		back := cublas.BFloat16Of(f)
		if math.IsNaN(float64(f)) {
			if back&0x7f80 != 0x7f80 || back&0x7f == 0 || back&0x8000 != b&0x8000 {
				report("NaN %#04x back as %#04x", i, uint16(back))
			}
			continue
		}
		if back != b {
			report("%#04x back as %#04x", i, uint16(back))
		}
		// The tie above b and its neighbours (within the finite range).
		if i&0x7fff < 0x7f80 {
			tie := math.Float32frombits(uint32(i)<<16 | 0x8000)
			for _, g := range []float32{tie, math.Nextafter32(tie, 0), math.Float32frombits(math.Float32bits(tie) + 1)} {
				if got, want := cublas.BFloat16Of(g), refBFloat16Of(g); got != want {
					report("BFloat16Of(%#08x) = %#04x, want %#04x", math.Float32bits(g), uint16(got), uint16(want))
				}
			}
		}
	}
	for b := uint64(0); b < 1<<32; b += 6151 {
		f := math.Float32frombits(uint32(b))
		if math.IsNaN(float64(f)) {
			continue
		}
		if got, want := cublas.BFloat16Of(f), refBFloat16Of(f); got != want {
			report("BFloat16Of(%#08x) = %#04x, want %#04x", uint32(b), uint16(got), uint16(want))
		}
	}
	assert.Zero(t, bad)
	assert.Equal(t, cublas.BFloat16(0x3f80), cublas.BFloat16Of(1))
	assert.Equal(t, cublas.BFloat16(0x3f80), cublas.BFloat16Of(math.Float32frombits(0x3f808000)), "a tie goes to even (down)")
	assert.Equal(t, cublas.BFloat16(0x3f82), cublas.BFloat16Of(math.Float32frombits(0x3f818000)), "a tie goes to even (up)")
	assert.Equal(t, cublas.BFloat16(0x7f80), cublas.BFloat16Of(math.MaxFloat32), "beyond the largest: Inf")
	assert.Equal(t, cublas.BFloat16(0x0001), cublas.BFloat16Of(math.Float32frombits(0x00010000)), "a subnormal")
	assert.Equal(t, cublas.BFloat16(0xff80), cublas.BFloat16Of(float32(math.Inf(-1))))
	for _, nan := range []uint32{0x7fc00000, 0x7f800001, 0xffc00000, 0x7f80ffff} {
		b := cublas.BFloat16Of(math.Float32frombits(nan))
		assert.True(t, math.IsNaN(float64(b.Float32())), "NaN %#08x stays NaN: %#04x", nan, uint16(b))
		assert.Equal(t, nan>>31 == 1, b&0x8000 != 0, "NaN %#08x keeps its sign", nan)
	}
}

// TestConstantsAreCUBLASs: the math modes, compute types and statuses are
// the values of cuBLAS's header (the generated table's constants).
func TestConstantsAreCUBLASs(t *testing.T) {
	assert.EqualValues(t, cublasraw.CUBLAS_DEFAULT_MATH, cublas.DefaultMath)
	assert.EqualValues(t, cublasraw.CUBLAS_PEDANTIC_MATH, cublas.PedanticMath)
	assert.EqualValues(t, cublasraw.CUBLAS_TF32_TENSOR_OP_MATH, cublas.TF32Math)
	assert.EqualValues(t, cublasraw.CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION, cublas.DisallowReducedPrecisionReduction)
	for got, want := range map[cublas.ComputeType]cublasraw.ComputeType{
		cublas.Compute16F: cublasraw.CUBLAS_COMPUTE_16F, cublas.Compute16FPedantic: cublasraw.CUBLAS_COMPUTE_16F_PEDANTIC,
		cublas.Compute32F: cublasraw.CUBLAS_COMPUTE_32F, cublas.Compute32FPedantic: cublasraw.CUBLAS_COMPUTE_32F_PEDANTIC,
		cublas.Compute32FFast16F: cublasraw.CUBLAS_COMPUTE_32F_FAST_16F, cublas.Compute32FFast16BF: cublasraw.CUBLAS_COMPUTE_32F_FAST_16BF,
		cublas.Compute32FFastTF32: cublasraw.CUBLAS_COMPUTE_32F_FAST_TF32, cublas.Compute64F: cublasraw.CUBLAS_COMPUTE_64F,
		cublas.Compute64FPedantic: cublasraw.CUBLAS_COMPUTE_64F_PEDANTIC, cublas.Compute32I: cublasraw.CUBLAS_COMPUTE_32I,
		cublas.Compute32IPedantic: cublasraw.CUBLAS_COMPUTE_32I_PEDANTIC,
	} {
		assert.EqualValues(t, want, got, want.String())
	}
	for got, want := range map[cublas.Status]cublasraw.Status{
		cublas.StatusNotInitialized: cublasraw.CUBLAS_STATUS_NOT_INITIALIZED, cublas.StatusAllocFailed: cublasraw.CUBLAS_STATUS_ALLOC_FAILED,
		cublas.StatusInvalidValue: cublasraw.CUBLAS_STATUS_INVALID_VALUE, cublas.StatusArchMismatch: cublasraw.CUBLAS_STATUS_ARCH_MISMATCH,
		cublas.StatusMappingError: cublasraw.CUBLAS_STATUS_MAPPING_ERROR, cublas.StatusExecutionFailed: cublasraw.CUBLAS_STATUS_EXECUTION_FAILED,
		cublas.StatusInternalError: cublasraw.CUBLAS_STATUS_INTERNAL_ERROR, cublas.StatusNotSupported: cublasraw.CUBLAS_STATUS_NOT_SUPPORTED,
		cublas.StatusLicenseError: cublasraw.CUBLAS_STATUS_LICENSE_ERROR,
	} {
		assert.EqualValues(t, want, got, want.String())
	}
}
