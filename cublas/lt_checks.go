package cublas

import (
	"errors"
	"fmt"
	"strings"

	"github.com/purecuda/cuda/internal/blasview"
)

// The checks of a plan's Run that compare views with the plan and
// operands with each other.

// renamed gives a refusal of the operand from (as the check named it) the
// name to (as Run's caller knows it): D, checked as Gemm's C; the bias or
// bias gradient, checked as Scal's x.
func renamed(err error, from, to string) error {
	var be *blasview.Error
	if errors.As(err, &be) && be.Operand == from {
		be.Operand = to
		if rest, ok := strings.CutPrefix(be.Detail, from+" "); ok {
			be.Detail = to + " " + rest
		}
	}
	return err
}

// same refuses a Run view whose mapping differs from the plan's.
func (st *planState) same(op, name string, g blasview.GemmArgs) error {
	p := st.g
	if g.TransA != p.TransA || g.TransB != p.TransB || g.M != p.M || g.N != p.N || g.K != p.K ||
		g.LDA != p.LDA || g.LDB != p.LDB || g.LDC != p.LDC || g.Swapped != p.Swapped {
		return &blasview.Error{Func: op, Operand: name, Kind: ErrShape,
			Detail: fmt.Sprintf("the operands map to a %d×%d×%d product (lds %d, %d, %d), but the plan was made for %d×%d×%d (lds %d, %d, %d) with the same layouts and operations",
				g.M, g.N, g.K, g.LDA, g.LDB, g.LDC, p.M, p.N, p.K, p.LDA, p.LDB, p.LDC)}
	}
	return nil
}

// span is the byte interval [first, last+1) of the column-major rows×cols
// matrix with leading dimension ld at p (empty for an empty matrix).
func span(p uintptr, rows, cols, ld int64, esz uintptr) (uintptr, uintptr) {
	if rows == 0 || cols == 0 {
		return p, p
	}
	return p, p + uintptr((cols-1)*ld+rows)*esz
}

// overlaps reports whether [x0, x1) meets the span of D (the plan's
// column-major M×N result at d), conservatively: first to last element.
func overlaps(x0, x1, d uintptr, g blasview.GemmArgs, esz uintptr) bool {
	d0, d1 := span(d, g.M, g.N, g.LDC, esz)
	return x0 < d1 && d0 < x1
}
