package main

// Plain-Go references: numbers, host matrices, and the buffers and views a check uses.

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/cmplx"
	"slices"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
)

type num interface {
	float32 | float64 | complex64 | complex128
}

// mk is re (+ im·i for complex T) as a T.
func mk[T num](re, im float64) T {
	var z T
	switch p := any(&z).(type) {
	case *float32:
		*p = float32(re)
	case *float64:
		*p = re
	case *complex64:
		*p = complex64(complex(re, im))
	case *complex128:
		*p = complex(re, im)
	}
	return z
}

func toC[T num](x T) complex128 {
	switch v := any(x).(type) {
	case float32:
		return complex(float64(v), 0)
	case float64:
		return complex(v, 0)
	case complex64:
		return complex128(v)
	case complex128:
		return v
	}
	return 0
}

func conj[T num](x T) T {
	switch v := any(x).(type) {
	case complex64:
		return any(complex(real(v), -imag(v))).(T)
	case complex128:
		return any(cmplx.Conj(v)).(T)
	}
	return x
}

// hm is an r×c matrix, its values row by row.
type hm[T num] struct {
	r, c int
	v    []T
}

func (m hm[T]) at(i, j int) T { return m.v[i*m.c+j] }

// fill is an r×c matrix of small integers (−3…3, imaginary parts −2…2).
func fill[T num](r, c, seed int) hm[T] {
	m := hm[T]{r, c, make([]T, r*c)}
	for i := range r {
		for j := range c {
			m.v[i*c+j] = mk[T](float64((i*7+j*3+seed*5)%7-3), float64((i*3+j*5+seed)%5-2))
		}
	}
	return m
}

// stored is m as a packed buffer of layout l.
func (m hm[T]) stored(l cublas.Layout) []T {
	if l == cublas.RowMajor {
		return slices.Clone(m.v)
	}
	out := make([]T, len(m.v))
	for i := range m.r {
		for j := range m.c {
			out[i+j*m.r] = m.at(i, j)
		}
	}
	return out
}

// op is op(m).
func (m hm[T]) op(o cublas.Op) hm[T] {
	if o == cublas.NoTrans {
		return m
	}
	t := hm[T]{m.c, m.r, make([]T, len(m.v))}
	for i := range m.r {
		for j := range m.c {
			x := m.at(i, j)
			if o == cublas.ConjTrans {
				x = conj(x)
			}
			t.v[j*m.r+i] = x
		}
	}
	return t
}

func matmul[T num](a, b hm[T]) hm[T] {
	c := hm[T]{a.r, b.c, make([]T, a.r*b.c)}
	for i := range a.r {
		for j := range b.c {
			var s T
			for l := range a.c {
				s += a.at(i, l) * b.at(l, j)
			}
			c.v[i*b.c+j] = s
		}
	}
	return c
}

// compare checks got against want element by element: |got−want| ≤
// tol·max(1, |want|); NaN fails.
func compare[T num](got, want []T, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d elements, want %d", len(got), len(want))
	}
	for i := range want {
		w := toC(want[i])
		d := cmplx.Abs(toC(got[i]) - w)
		if !(d <= tol*math.Max(1, cmplx.Abs(w))) {
			return fmt.Errorf("element %d is %v, want %v (tolerance %g)", i, got[i], want[i], tol)
		}
	}
	return nil
}

// --- device buffers -----------------------------------------------------

// arena allocates buffers for one check, keeps the first error and closes
// them all at the end.
type arena struct {
	e   *env
	err error
	cl  []io.Closer
}

func (a *arena) close() error {
	var err error
	for i := len(a.cl) - 1; i >= 0; i-- {
		err = errors.Join(err, a.cl[i].Close())
	}
	return errors.Join(a.err, err)
}

func upload[T any](a *arena, v []T) *driver.Buffer[T] {
	if a.err != nil {
		return nil
	}
	b, err := driver.AllocCopy(a.e.s, v)
	if err != nil {
		a.err = err
		return nil
	}
	a.cl = append(a.cl, b)
	return b
}

func view[T cublas.Element](b *driver.Buffer[T], r, c int, l cublas.Layout) cublas.Matrix[T] {
	if l == cublas.RowMajor {
		return cublas.RowMajorMatrix(b, r, c)
	}
	return cublas.ColMajorMatrix(b, r, c)
}

func withOp[T cublas.Element](m cublas.Matrix[T], o cublas.Op) cublas.Matrix[T] {
	switch o {
	case cublas.Trans:
		return m.T()
	case cublas.ConjTrans:
		return m.H()
	}
	return m
}

// --- (1)-(3) Gemm -------------------------------------------------------

// gemmCheck computes C = alpha·op(A)·op(B) + beta·C for an m×k op(A) and a
// k×n op(B) stored in the layouts given, with alpha 2 (2+i for complex)
// and beta −1, and compares C with plain Go exactly.
