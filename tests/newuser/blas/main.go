// Command blas is a new user's test of package cublas, written from the
// README and go doc alone. It checks cuBLAS results against plain Go, one
// line per check ("ok  ..." or "FAIL ...: ..."), and exits 0 when every
// check passed, 1 when one failed, 2 when there is no GPU or no cuBLAS.
//
// Matrices hold small integers, so float32 results are exact: the stated
// tolerance is 0 unless a check says otherwise.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
)

func main() { os.Exit(run()) }

var failed int

func ok(what string) { fmt.Printf("ok  %s\n", what) }

func fail(what string, format string, args ...any) {
	failed++
	fmt.Printf("FAIL %s: %s\n", what, fmt.Sprintf(format, args...))
}

// check prints ok for a nil err and FAIL with err otherwise.
func check(what string, err error) {
	if err != nil {
		fail(what, "%v", err)
		return
	}
	ok(what)
}

// refused checks that err is an error matching every sentinel, and
// prints it.
func refused(what string, err error, sentinels ...error) {
	if err == nil {
		fail(what, "accepted, want an error")
		return
	}
	for _, s := range sentinels {
		if !errors.Is(err, s) {
			fail(what, "error does not match %q: %v", s, err)
			return
		}
	}
	ok(fmt.Sprintf("%s: %v", what, err))
}

type env struct {
	ctx *driver.Context
	s   *driver.Stream
	h   *cublas.Handle
}

func run() int {
	count, err := driver.DeviceCount()
	if err != nil {
		if errors.Is(err, driver.ErrNoGPU) {
			fmt.Fprintf(os.Stderr, "blas: no usable GPU: %v\n", err)
			return 2
		}
		fail("driver", "%v", err)
		return 1
	}
	if count == 0 {
		fmt.Fprintln(os.Stderr, "blas: no usable GPU: the driver reports no device")
		return 2
	}
	major, minor, patch, path, err := cublas.Version()
	if err != nil {
		if errors.Is(err, cublas.ErrNotSupported) {
			fmt.Fprintf(os.Stderr, "blas: no usable cuBLAS: %v\n", err)
			return 2
		}
		fail("cublas.Version", "%v", err)
		return 1
	}
	ok(fmt.Sprintf("cuBLAS %d.%d.%d loaded from %s", major, minor, patch, path))

	dev, err := driver.DeviceByOrdinal(0)
	if err != nil {
		fail("device 0", "%v", err)
		return 1
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		fail("primary context", "%v", err)
		return 1
	}
	defer ctx.Close()
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	if err != nil {
		fail("stream", "%v", err)
		return 1
	}
	defer s.Close()
	h, err := cublas.NewHandle(s, nil)
	if err != nil {
		if errors.Is(err, cublas.ErrNotSupported) {
			fmt.Fprintf(os.Stderr, "blas: no usable cuBLAS: %v\n", err)
			return 2
		}
		fail("NewHandle", "%v", err)
		return 1
	}
	defer h.Close()
	e := &env{ctx: ctx, s: s, h: h}

	const rm, cm = cublas.RowMajor, cublas.ColMajor
	const nt, tr, ct = cublas.NoTrans, cublas.Trans, cublas.ConjTrans

	// (1) row-major float32, as Go stores matrices.
	check("Gemm float32 row-major C = 2·A·B − C (5×7·7×3)", gemmCheck[float32](e, rm, rm, rm, nt, nt, 5, 7, 3))
	check("Gemm float32 row-major C = 2·Aᵀ·B − C (A stored 7×5, view .T())", gemmCheck[float32](e, rm, rm, rm, tr, nt, 5, 7, 3))
	check("Gemm float32 row-major C = 2·A·Bᵀ − C (B stored 3×7, view .T())", gemmCheck[float32](e, rm, rm, rm, nt, tr, 5, 7, 3))
	// (2) column-major, mixed layouts, sub-blocks.
	check("Gemm float32 col-major C = 2·A·B − C (5×7·7×3)", gemmCheck[float32](e, cm, cm, cm, nt, nt, 5, 7, 3))
	check("Gemm float32 col-major C = 2·Aᵀ·B − C", gemmCheck[float32](e, cm, cm, cm, tr, nt, 5, 7, 3))
	check("Gemm float32 mixed: row-major A, col-major B, col-major C", gemmCheck[float32](e, rm, cm, cm, nt, nt, 5, 7, 3))
	check("Gemm float32 mixed: col-major Aᵀ, row-major B, row-major C", gemmCheck[float32](e, cm, rm, rm, tr, nt, 5, 7, 3))
	check("Gemm float32 row-major Sub-block A of 9×11, into an explicit-LD block of 8×10 C, rest untouched", subCheck(e, rm))
	check("Gemm float32 col-major Sub-block A of 9×11, into an explicit-LD block of 8×10 C, rest untouched", subCheck(e, cm))
	// (3) float64 and complex64.
	check("Gemm float64 row-major C = 2·A·B − C", gemmCheck[float64](e, rm, rm, rm, nt, nt, 6, 4, 5))
	check("Gemm float64 col-major C = 2·Aᵀ·Bᵀ − C", gemmCheck[float64](e, cm, cm, cm, tr, tr, 6, 4, 5))
	check("Gemm complex64 row-major C = (2+i)·A·B − C", gemmCheck[complex64](e, rm, rm, rm, nt, nt, 4, 6, 3))
	check("Gemm complex64 row-major C = (2+i)·Aᵀ·B − C", gemmCheck[complex64](e, rm, rm, rm, tr, nt, 4, 6, 3))
	check("Gemm complex64 row-major C = (2+i)·Aᴴ·B − C (.H())", gemmCheck[complex64](e, rm, rm, rm, ct, nt, 4, 6, 3))
	check("Gemm complex64 col-major C = (2+i)·A·Bᴴ − C (.H())", gemmCheck[complex64](e, cm, cm, cm, nt, ct, 4, 6, 3))
	// (4) level 2 and level 1.
	level12(e)
	// (5) strided batches.
	check("GemmStridedBatched float32 row-major, 8 batches of 3×4·4×2, C stride padded by 2 (gaps untouched)", stridedCheck(e, false))
	check("GemmStridedBatched float32 row-major, 8 batches, strideB 0 (one B for all)", stridedCheck(e, true))
	// (6) mixed precision.
	check("GemmEx BFloat16 A·B → float32 C, Compute32F (row-major 6×8·8×5)", gemmExCheck(e))
	// (7) cuBLASLt.
	matmulPlan(e)
	// (7b) cuBLASLt for training: an MLP layer forward and backward, FP8,
	// misuse, a captured training step.
	trainLayer(e, rm, "relu", true, 0, false)
	trainLayer(e, cm, "relu", true, 256, true)
	trainLayer(e, rm, "gelu", true, 0, false)
	trainLayer(e, cm, "gelu", false, 24, true)
	fp8Plans(e)
	fp8OutPlans(e)
	trainMisuse(e)
	capturedStep(e)
	// (8) capture into a graph, replay after closing everything.
	graphCheck(e)
	// (9) misuse.
	misuse(e)
	// (10) one handle, 4 goroutines.
	check("one Handle from 4 goroutines at once, 25 Gemms each with own matrices", concurrent(e))

	if failed > 0 {
		fmt.Printf("%d check(s) failed\n", failed)
		return 1
	}
	return 0
}

// --- host-side matrices -------------------------------------------------
