package cublas_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/cublas"
)

// TestFloat8Exhaustive: every bit pattern of both 8-bit formats decodes to
// the value the format defines (a formula in float64, apart from the
// decoder's) and encodes back to itself; the midpoint between two
// neighbours rounds to the even pattern, a value just past it away from it.
func TestFloat8Exhaustive(t *testing.T) {
	e4 := func(c int) float64 { // the OCP E4M3 definition
		e, m := c>>3&0xf, float64(c&7)
		v := math.Pow(2, float64(e-7)) * (1 + m/8)
		if e == 0 {
			v = math.Pow(2, -6) * m / 8
		}
		if c&0x80 != 0 {
			v = -v
		}
		return v
	}
	e5 := func(c int) float64 {
		e, m := c>>2&0x1f, float64(c&3)
		v := math.Pow(2, float64(e-15)) * (1 + m/4)
		if e == 0 {
			v = math.Pow(2, -14) * m / 4
		}
		if e == 0x1f {
			v = math.Inf(1)
		}
		if c&0x80 != 0 {
			v = -v
		}
		return v
	}
	for c := range 256 {
		f4 := cublas.Float8E4M3(c)
		if c&0x7f == 0x7f {
			assert.True(t, math.IsNaN(float64(f4.Float32())), "E4M3 %#x is NaN", c)
			assert.Equal(t, cublas.Float8E4M3(0x7f), cublas.Float8E4M3Of(f4.Float32()), "NaN stays NaN")
		} else {
			assert.Equal(t, e4(c), float64(f4.Float32()), "E4M3 %#x", c)
			assert.Equal(t, f4, cublas.Float8E4M3Of(f4.Float32()), "E4M3 %#x round trip", c)
		}
		f5 := cublas.Float8E5M2(c)
		if c&0x7c == 0x7c && c&3 != 0 {
			assert.True(t, math.IsNaN(float64(f5.Float32())), "E5M2 %#x is NaN", c)
			assert.Equal(t, cublas.Float8E5M2(0x7e), cublas.Float8E5M2Of(f5.Float32()), "NaN stays NaN")
		} else {
			assert.Equal(t, e5(c), float64(f5.Float32()), "E5M2 %#x", c)
			assert.Equal(t, f5, cublas.Float8E5M2Of(f5.Float32()), "E5M2 %#x round trip", c)
		}
	}
	// Ties to even between neighbours, both signs.
	for c := 0; c < 0x7e; c++ {
		lo, hi := e4(c), e4(c+1)
		mid := float32((lo + hi) / 2)
		even := cublas.Float8E4M3(c &^ 1)
		if c%2 == 1 {
			even = cublas.Float8E4M3(c + 1)
		}
		assert.Equal(t, even, cublas.Float8E4M3Of(mid), "E4M3 midpoint of %#x and %#x", c, c+1)
		assert.Equal(t, even|0x80, cublas.Float8E4M3Of(-mid), "E4M3 midpoint of -%#x and -%#x", c, c+1)
		assert.Equal(t, cublas.Float8E4M3(c+1), cublas.Float8E4M3Of(math.Nextafter32(mid, 1000)), "E4M3 past the midpoint")
		assert.Equal(t, cublas.Float8E4M3(c), cublas.Float8E4M3Of(math.Nextafter32(mid, -1)), "E4M3 short of the midpoint")
	}
	for c := 0; c < 0x7b; c++ {
		mid := float32((e5(c) + e5(c+1)) / 2)
		even := cublas.Float8E5M2(c)
		if c%2 == 1 {
			even = cublas.Float8E5M2(c + 1)
		}
		assert.Equal(t, even, cublas.Float8E5M2Of(mid), "E5M2 midpoint of %#x and %#x", c, c+1)
		assert.Equal(t, cublas.Float8E5M2(c+1), cublas.Float8E5M2Of(math.Nextafter32(mid, 1e6)), "E5M2 past the midpoint")
	}
}

// TestFloat8Limits: E4M3 saturates at ±448 (infinities too); E5M2 rounds
// to ±Inf from the midpoint past 57344 on; ties round to even; E4M3's NaN
// is 0x7f and 0xff.
func TestFloat8Limits(t *testing.T) {
	for _, f := range []float32{448, 464, 480, 1e6, float32(math.Inf(1))} {
		assert.Equal(t, cublas.Float8E4M3(0x7e), cublas.Float8E4M3Of(f), "%v", f)
		assert.Equal(t, cublas.Float8E4M3(0xfe), cublas.Float8E4M3Of(-f), "%v", -f)
	}
	assert.Equal(t, cublas.Float8E4M3(0x38), cublas.Float8E4M3Of(1))
	assert.Equal(t, cublas.Float8E4M3(0x01), cublas.Float8E4M3Of(0x1p-9))
	assert.Equal(t, cublas.Float8E4M3(0x00), cublas.Float8E4M3Of(0x1p-10), "half the smallest: a tie, to 0 (even)")
	assert.Equal(t, cublas.Float8E4M3(0x80), cublas.Float8E4M3Of(float32(math.Copysign(0, -1))))
	assert.Equal(t, cublas.Float8E5M2(0x7b), cublas.Float8E5M2Of(57344))
	assert.Equal(t, cublas.Float8E5M2(0x7b), cublas.Float8E5M2Of(61439))
	assert.Equal(t, cublas.Float8E5M2(0x7c), cublas.Float8E5M2Of(61440), "the tie rounds to even: Inf")
	assert.Equal(t, cublas.Float8E5M2(0xfc), cublas.Float8E5M2Of(float32(math.Inf(-1))))
	assert.Equal(t, cublas.Float8E5M2(0x3c), cublas.Float8E5M2Of(1))
	assert.Equal(t, cublas.Float8E5M2(0x01), cublas.Float8E5M2Of(0x1p-16))
	// Ties round to even, among normals and subnormals.
	assert.Equal(t, cublas.Float8E4M3(0x78), cublas.Float8E4M3Of(248), "between 240 (0x77) and 256 (0x78)")
	assert.Equal(t, cublas.Float8E4M3(0x02), cublas.Float8E4M3Of(0x1.8p-9), "between 0x01 and 0x02")
	assert.Equal(t, cublas.Float8E4M3(0x02), cublas.Float8E4M3Of(0x1.4p-8), "between 0x02 and 0x03")
	assert.Equal(t, cublas.Float8E5M2(0x02), cublas.Float8E5M2Of(0x1.8p-16), "between 0x01 and 0x02")
	assert.Equal(t, cublas.Float8E5M2(0x02), cublas.Float8E5M2Of(0x1.4p-15), "between 0x02 and 0x03")
	// E4M3's two NaN patterns, one per sign; E5M2's infinities.
	for _, c := range []cublas.Float8E4M3{0x7f, 0xff} {
		assert.True(t, math.IsNaN(float64(c.Float32())), "E4M3 %#02x", uint8(c))
	}
	assert.True(t, math.IsInf(float64(cublas.Float8E5M2(0x7c).Float32()), 1))
	assert.True(t, math.IsInf(float64(cublas.Float8E5M2(0xfc).Float32()), -1))
}
