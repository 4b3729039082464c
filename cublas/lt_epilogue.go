package cublas

import (
	"fmt"
	"math"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/blasview"
)

// The epilogues of training: forward ones that also store what the
// backward pass needs (an auxiliary output), and backward ones that
// apply an activation's gradient or compute a bias gradient.
//
// The auxiliary matrix has D's shape and layout, with a leading
// dimension of its own (MatmulOptions.AuxLD): element (i, j) of a
// column-major D is at i + j·AuxLD of it, of a row-major D at j + i·AuxLD.
// For ReLU it is a bit mask, one bit per element of D (bit x is bit x%8,
// counted from the least significant, of byte x/8; 1 where the ReLU's
// input was zero or positive, 0 where it was negative: cuBLASLt passes
// the gradient through at zero), in MatmulExtras.Mask; for GELU it holds GELU's
// input (the product plus the bias), of D's element type, in
// MatmulExtras.Aux. Its buffer holds whole columns, AuxLD bits or
// elements each: cuBLASLt stores the auxiliary matrix in 16-byte units,
// and may write a column's last unit whole, past D's rows (what lies
// between D's rows and AuxLD in a column is not kept). These epilogues
// need a D of at least one row and one column: NewMatmulPlan refuses an
// empty one (ErrShape).
//
// A backward epilogue reads the mask or input with its own plan's AuxLD:
// make it with the forward plan's (MatmulOptions.AuxLD, or 0 for both
// with a D of the same shape).
//
// A bias gradient is written to MatmulExtras.Bias (BGradA's and
// BGradB's also to Run's bias), its first elements only: for
// DReLUBGrad and DGELUBGrad the sums of the D they store (the gradient,
// after the mask or GELU'; training passes beta 0) along the dimension
// the bias is broadcast over, so one element per row of a column-major D,
// per column of a row-major one (as a bias); for BGradA one per row of D,
// g[i] = Σ_l op(A)[i, l]; for BGradB one per column of D,
// g[j] = Σ_l op(B)[l, j].
const (
	// EpilogueReLUAux is ReLU, storing the mask.
	EpilogueReLUAux Epilogue = 130
	// EpilogueReLUAuxBias adds the bias, then is ReLUAux.
	EpilogueReLUAuxBias Epilogue = 134
	// EpilogueDReLU multiplies the product by ReLU's gradient, read from
	// the mask a ReLUAux matmul stored: D = mask ? alpha·op(A)·op(B) + beta·C : 0.
	EpilogueDReLU Epilogue = 136
	// EpilogueDReLUBGrad is DReLU, and writes the bias gradient.
	EpilogueDReLUBGrad Epilogue = 152
	// EpilogueGELUAux is GELU, storing its input in the auxiliary matrix.
	EpilogueGELUAux Epilogue = 160
	// EpilogueGELUAuxBias adds the bias, then is GELUAux.
	EpilogueGELUAuxBias Epilogue = 164
	// EpilogueDGELU multiplies the product by GELU's derivative at the
	// input a GELUAux matmul stored: D = (alpha·op(A)·op(B) + beta·C)·GELU'(aux).
	EpilogueDGELU Epilogue = 192
	// EpilogueDGELUBGrad is DGELU, and writes the bias gradient.
	EpilogueDGELUBGrad Epilogue = 208
	// EpilogueBGradA stores D = alpha·op(A)·op(B) + beta·C and writes the
	// bias gradient of A's rows: one element per row of D. cuBLAS 13.1 on
	// an H200 offers it for a column-major D only: for a row-major D
	// (cuBLASLt's BGradB of the transposed product) NewMatmulPlan fails
	// with an error matching ErrNotSupported; compute the transposed
	// gradient with BGradB instead.
	EpilogueBGradA Epilogue = 256
	// EpilogueBGradB stores D and writes the bias gradient of B's
	// columns: one element per column of D.
	EpilogueBGradB Epilogue = 512
)

// epilogueNames are the epilogues offered, by value.
var epilogueNames = map[Epilogue]string{
	EpilogueNone: "None", EpilogueReLU: "ReLU", EpilogueBias: "Bias", EpilogueReLUBias: "ReLUBias",
	EpilogueGELU: "GELU", EpilogueGELUBias: "GELUBias",
	EpilogueReLUAux: "ReLUAux", EpilogueReLUAuxBias: "ReLUAuxBias", EpilogueDReLU: "DReLU", EpilogueDReLUBGrad: "DReLUBGrad",
	EpilogueGELUAux: "GELUAux", EpilogueGELUAuxBias: "GELUAuxBias", EpilogueDGELU: "DGELU", EpilogueDGELUBGrad: "DGELUBGrad",
	EpilogueBGradA: "BGradA", EpilogueBGradB: "BGradB",
}

// String is e's name without its prefix ("ReLUBias" for
// EpilogueReLUBias), or Epilogue(n) for a value not offered.
func (e Epilogue) String() string {
	if n, ok := epilogueNames[e]; ok {
		return n
	}
	return fmt.Sprintf("Epilogue(%d)", int32(e))
}

// known reports whether e is an epilogue offered.
func (e Epilogue) known() bool {
	_, ok := epilogueNames[e]
	return ok
}

// hasBias reports whether e adds a bias it reads.
func (e Epilogue) hasBias() bool {
	switch e {
	case EpilogueBias, EpilogueReLUBias, EpilogueGELUBias, EpilogueReLUAuxBias, EpilogueGELUAuxBias:
		return true
	}
	return false
}

// biasGrad reports whether e writes a bias gradient.
func (e Epilogue) biasGrad() bool {
	return e == EpilogueDReLUBGrad || e == EpilogueDGELUBGrad || e == EpilogueBGradA || e == EpilogueBGradB
}

// mask reports whether e stores or reads a ReLU bit mask.
func (e Epilogue) mask() bool {
	return e == EpilogueReLUAux || e == EpilogueReLUAuxBias || e == EpilogueDReLU || e == EpilogueDReLUBGrad
}

// geluAux reports whether e stores or reads GELU's input.
func (e Epilogue) geluAux() bool {
	return e == EpilogueGELUAux || e == EpilogueGELUAuxBias || e == EpilogueDGELU || e == EpilogueDGELUBGrad
}

// auxOut reports whether e writes its auxiliary matrix (forward) rather
// than reading it (backward).
func (e Epilogue) auxOut() bool {
	return e == EpilogueReLUAux || e == EpilogueReLUAuxBias || e == EpilogueGELUAux || e == EpilogueGELUAuxBias
}

// forCUBLAS is e as cuBLASLt sees the problem: a row-major D computes the
// transposed product, in which A and B trade places, and so do the bias
// gradients of their rows and columns.
func (e Epilogue) forCUBLAS(swapped bool) Epilogue {
	if swapped && e == EpilogueBGradA {
		return EpilogueBGradB
	}
	if swapped && e == EpilogueBGradB {
		return EpilogueBGradA
	}
	return e
}

// MatmulExtras are the operands of MatmulPlan.RunWith beyond A, B, C and
// D, each nil where the plan's epilogue and element types take none. Each
// is checked against its buffer, held until the stream has passed the
// matmul (captured: by the graph), and named in errors. A refused Run
// queues nothing; its error matches:
//   - driver.ErrInvalidArgument for a missing or extra operand, and for
//     one not on the boundary it needs (16 bytes for the mask, the
//     auxiliary matrix and an FP8 plan's bias);
//   - ErrOutOfBounds for a buffer too short for its operand;
//   - ErrAlias for an operand the matmul writes (D, the mask or
//     auxiliary matrix a forward epilogue stores, a bias gradient, D's
//     amax) that overlaps another operand (C may be D itself, not part
//     of it);
//   - driver.ErrClosed for a closed buffer, driver.ErrInvalidArgument
//     for one of another context.
//
// Only the mask's and the auxiliary matrix's first AuxLD·N bits or
// elements are used: they need not be zeroed, and what lies past D's
// rows in a column is not kept.
type MatmulExtras[TC Element] struct {
	// Bias is the bias the epilogue adds (read: at least one element per
	// row of a column-major D, per column of a row-major one), or the bias
	// gradient it writes (DReLUBGrad, DGELUBGrad, BGradA, BGradB: see the
	// epilogues for its length). It may not overlap D.
	Bias *driver.Buffer[TC]
	// Mask is the ReLU bit mask of ReLUAux, ReLUAuxBias (written), DReLU
	// and DReLUBGrad (read): at least AuxLD·N/8 bytes (N whole columns)
	// for an M×N D as cuBLASLt sees it (N the columns of a column-major
	// D, the rows of a row-major one), at an address that is a multiple
	// of 16.
	Mask *driver.Buffer[byte]
	// Aux is GELU's input, of GELUAux, GELUAuxBias (written), DGELU and
	// DGELUBGrad (read): at least AuxLD·N elements (N whole columns, as
	// for the mask), at an address that is a multiple of 16.
	Aux *driver.Buffer[TC]
	// Scales are an FP8 plan's scale factors and D's amax (the zero
	// value elsewhere).
	Scales MatmulScales
}

// extraPtrs are the addresses of a Run's extra operands (0: none).
type extraPtrs struct{ bias, aux, sa, sb, sd, amax uintptr }

// extras holds and checks the Run's operands beyond A, B, C and D (their
// presence is checked), appending their spans to ops.
func extras[TC Element](cl *call, st *planState, x MatmulExtras[TC], ops *opList) (extraPtrs, error) {
	var p extraPtrs
	op, g, esz := cl.op, st.g, sizeOf[TC]()
	if x.Bias != nil {
		name, n := "bias", g.M
		if st.epi.biasGrad() {
			name, n = "bias gradient", st.gradLen()
		}
		vbias, pbias, err := vector(cl, name, Vector[TC]{Buf: x.Bias, N: int(n), Inc: 1})
		if err != nil {
			return p, err
		}
		if _, err := blasview.Scal(vbias); err != nil {
			return p, renamed(refused(op, err), "x", name)
		}
		if st.fp8 { // cuBLASLt's FP8 kernels with a bias have none for less (NOT_SUPPORTED on an H200)
			if err := aligned16(op, name, pbias); err != nil {
				return p, err
			}
		}
		b0, b1 := span(pbias, n, 1, n, esz)
		ops.add(operand{name, b0, b1, st.epi.biasGrad()})
		p.bias = pbias
	}
	if x.Mask != nil {
		buf, pm, err := use(cl, "mask", x.Mask)
		if err != nil {
			return p, err
		}
		need, ok := sizeProduct(st.auxLD/8, g.N)
		if !ok || buf.Len < need {
			return p, short(op, "mask", buf.Len, need, fmt.Sprintf("bytes (AuxLD %d bits × %d columns)", st.auxLD, g.N))
		}
		if err := aligned16(op, "mask", pm); err != nil {
			return p, err
		}
		ops.add(operand{"mask", pm, pm + uintptr(need), st.epi.auxOut()})
		p.aux = pm
	}
	if x.Aux != nil {
		buf, px, err := use(cl, "aux", x.Aux)
		if err != nil {
			return p, err
		}
		need, ok := sizeProduct(st.auxLD, g.N) // whole columns
		if !ok || buf.Len < need {
			return p, short(op, "aux", buf.Len, need, fmt.Sprintf("elements (AuxLD %d × %d columns)", st.auxLD, g.N))
		}
		if err := aligned16(op, "aux", px); err != nil {
			return p, err
		}
		ops.add(operand{"aux", px, px + uintptr(need)*esz, st.epi.auxOut()})
		p.aux = px
	}
	var err error
	if p.sa, err = scale(cl, "A scale", x.Scales.A, false, ops); err != nil {
		return p, err
	}
	if p.sb, err = scale(cl, "B scale", x.Scales.B, false, ops); err != nil {
		return p, err
	}
	if p.sd, err = scale(cl, "D scale", x.Scales.D, false, ops); err != nil {
		return p, err
	}
	p.amax, err = scale(cl, "D amax", x.Scales.AmaxD, true, ops)
	return p, err
}

// auxDefault is the smallest leading dimension of the auxiliary matrix
// of e for a D of m rows (as cuBLASLt sees it): rows rounded up to 128
// bits (a mask) or 8 elements (GELU's input); 0 without one.
func auxDefault(e Epilogue, m int64) int64 {
	switch {
	case e.mask():
		return (m + 127) / 128 * 128
	case e.geluAux():
		return (m + 7) / 8 * 8
	}
	return 0
}

// auxLD checks the option AuxLD against the epilogue and D (m×n as
// cuBLASLt sees it), and returns the leading dimension to use.
func auxLD(op string, e Epilogue, ld int, m, n int64) (int64, error) {
	if (e.mask() || e.geluAux()) && (m == 0 || n == 0) {
		return 0, &blasview.Error{Func: op, Operand: "D", Kind: ErrShape,
			Detail: fmt.Sprintf("the epilogue %v stores or reads an auxiliary matrix of D's shape, and D is empty (%d×%d as cuBLASLt sees it)", e, m, n)}
	}
	switch {
	case ld < 0:
		return 0, invalid(op, "negative AuxLD %d", ld)
	case ld == 0:
		return auxDefault(e, m), nil
	case int64(ld) > math.MaxInt32:
		return 0, invalid(op, "AuxLD %d: a leading dimension beyond 2^31-1", ld)
	case !e.mask() && !e.geluAux():
		return 0, invalid(op, "AuxLD %d: the epilogue %v has no auxiliary matrix", ld, e)
	case e.mask() && (ld%128 != 0 || int64(ld) < m):
		return 0, invalid(op, "AuxLD %d: a ReLU mask's leading dimension (in bits) is a multiple of 128 and at least D's %d rows (as cuBLASLt sees D)", ld, m)
	case e.geluAux() && (ld%8 != 0 || int64(ld) < m):
		return 0, invalid(op, "AuxLD %d: GELU's input's leading dimension is a multiple of 8 and at least D's %d rows (as cuBLASLt sees D)", ld, m)
	}
	return int64(ld), nil
}

// AuxLD is the leading dimension of the plan's auxiliary matrix (in bits
// for a ReLU mask, in elements for GELU's input), 0 for an epilogue
// without one: MatmulOptions.AuxLD, or the smallest cuBLASLt allows.
func (p *MatmulPlan[TA, TB, TC]) AuxLD() int {
	if p == nil || p.st == nil {
		return 0
	}
	return int(p.st.auxLD)
}

// gradLen is the length of the bias gradient for the epilogue as cuBLASLt
// sees it (cepi): the rows of its D but for BGRADB, its columns.
func (st *planState) gradLen() int64 {
	if st.cepi == EpilogueBGradB {
		return st.g.N
	}
	return st.g.M
}

// present checks that x names exactly the operands the plan takes.
func (st *planState) present(op string, bias, mask, aux bool, sc MatmulScales) error {
	e := st.epi
	switch {
	case e.hasBias() != bias && !e.biasGrad():
		return invalid(op, "the epilogue %v takes a bias exactly when it adds one (bias nil: %v)", e, !bias)
	case e.biasGrad() && !bias:
		return invalid(op, "the epilogue %v writes a bias gradient: the bias buffer receives it, and is nil", e)
	case e.mask() != mask:
		return invalid(op, "the epilogue %v takes a mask exactly when it is ReLUAux, ReLUAuxBias, DReLU or DReLUBGrad (mask nil: %v)", e, !mask)
	case e.geluAux() != aux:
		return invalid(op, "the epilogue %v takes an auxiliary matrix exactly when it is GELUAux, GELUAuxBias, DGELU or DGELUBGrad (aux nil: %v)", e, !aux)
	}
	return st.scalesPresent(op, sc)
}

// operand is a buffer range an operand spans, for the overlap checks.
type operand struct {
	name   string
	lo, hi uintptr
	out    bool // written
}

// opList is a Run's operands, without allocating.
type opList struct {
	ops [10]operand
	n   int
}

func (l *opList) add(o operand) {
	if l.n < len(l.ops) {
		l.ops[l.n] = o
		l.n++
	}
}

// extraAlias refuses an extra operand (from index first of ops on) that
// overlaps another operand when either is written.
func extraAlias(op string, ops []operand, first int) error {
	for i := first; i < len(ops); i++ {
		x := ops[i]
		for _, y := range ops[:i] {
			if !(x.out || y.out) || x.lo == x.hi || y.lo == y.hi {
				continue
			}
			if x.lo < y.hi && y.lo < x.hi {
				return &blasview.Error{Func: op, Operand: x.name, Kind: ErrAlias,
					Detail: fmt.Sprintf("the %s overlaps %s in memory, and one of them is written", x.name, y.name)}
			}
		}
	}
	return nil
}

// short refuses an extra operand whose buffer (n units long) is shorter
// than need.
func short(op, name string, n, need int64, unit string) error {
	return &blasview.Error{Func: op, Operand: name, Kind: ErrOutOfBounds,
		Detail: fmt.Sprintf("the %s needs %d %s; its buffer has %d", name, need, unit, n)}
}

// aligned16 refuses an auxiliary operand whose address is not a multiple
// of 16 bytes (cuBLASLt stores the auxiliary matrix in 16-byte units:
// its leading dimension's rules keep every column so aligned).
func aligned16(op, name string, p uintptr) error {
	if p%16 != 0 {
		return invalid(op, "%s: the address %#x is not a multiple of 16 bytes (use a Buffer.Slice that starts on one)", name, p)
	}
	return nil
}

// sizeProduct is the product of sizes, and false where a size is
// negative or the product exceeds 2^63-1.
func sizeProduct(x ...int64) (int64, bool) {
	p := int64(1)
	for _, v := range x {
		if v < 0 {
			return 0, false
		}
		if v == 0 {
			p = 0
		}
	}
	if p == 0 {
		return 0, true
	}
	for _, v := range x {
		if p > math.MaxInt64/v {
			return 0, false
		}
		p *= v
	}
	return p, true
}

// matrixAlign is the alignment, in bytes, a plan's algorithm may assume
// of A, B, C and D (cuBLASLt's preferences), and Run requires.
const matrixAlign = 16

// matricesAligned refuses a matrix of a Run (cuBLASLt's A and B, D, C,
// as names gives them) whose first element's address is not a multiple
// of matrixAlign.
func matricesAligned(op string, names [4]string, ptrs [4]uintptr) error {
	for i, p := range ptrs {
		if p%matrixAlign != 0 {
			return invalid(op, "%s: a MatmulPlan needs each matrix to start on a %d-byte boundary; its first element is at %#x (use a view whose Offset starts on one)", names[i], matrixAlign, p)
		}
	}
	return nil
}
