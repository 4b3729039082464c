package main

import (
	"errors"
	"fmt"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
)

// blasN is the size of the cublas step's matrices.
const blasN = 64

// stepCUBLAS, where libcublas is found: its version and a 64×64×64 SGEMM
// on row-major matrices of small integers (so the float32 result is exact),
// checked element by element against the product computed here. Skipped
// without cuBLAS.
func stepCUBLAS(st *state) (summary string, err error) {
	major, minor, patch, path, err := cublas.Version()
	if err != nil {
		if errors.Is(err, cublas.ErrNotSupported) {
			st.detail("%v", err)
			return "", skipped("no libcublas here (apt install libcublas-13-0, or pip install nvidia-cublas; PURECUDA_LIBCUBLAS names one)")
		}
		return "", err
	}
	st.detail("cuBLAS %d.%d.%d from %s", major, minor, patch, path)
	s, err := st.ctx.NewStream(driver.StreamNonBlocking)
	if err != nil {
		return "", err
	}
	defer closeKeep(&err, s)
	h, err := cublas.NewHandle(s, nil)
	if err != nil {
		return "", err
	}
	defer closeKeep(&err, h)
	a, b := make([]float32, blasN*blasN), make([]float32, blasN*blasN)
	for i := range a {
		a[i], b[i] = float32(i%7-3), float32(i%5-2)
	}
	da, err := driver.AllocCopy(s, a)
	if err != nil {
		return "", err
	}
	defer closeKeep(&err, da)
	db, err := driver.AllocCopy(s, b)
	if err != nil {
		return "", err
	}
	defer closeKeep(&err, db)
	dc, err := driver.Alloc[float32](st.ctx, blasN*blasN)
	if err != nil {
		return "", err
	}
	defer closeKeep(&err, dc)
	if err := cublas.Gemm(h, 1, cublas.RowMajorMatrix(da, blasN, blasN), cublas.RowMajorMatrix(db, blasN, blasN), 0, cublas.RowMajorMatrix(dc, blasN, blasN)); err != nil {
		return "", err
	}
	c, err := dc.ToHost(s)
	if err != nil {
		return "", err
	}
	for i := 0; i < blasN; i++ {
		for j := 0; j < blasN; j++ {
			var want float32
			for k := 0; k < blasN; k++ {
				want += a[i*blasN+k] * b[k*blasN+j]
			}
			if got := c[i*blasN+j]; got != want {
				return "", fmt.Errorf("element (%d, %d) of the product is %v, want %v", i, j, got, want)
			}
		}
	}
	return fmt.Sprintf("cuBLAS %d.%d.%d: %d×%d×%d SGEMM on row-major matrices: every result exact", major, minor, patch, blasN, blasN, blasN), nil
}
