package cublas_test

import (
	"testing"

	"github.com/purecuda/cuda/internal/gputest"
)

// TestMain runs the tests and says how many tests skipped for want of a
// GPU or cuBLAS, and why.
func TestMain(m *testing.M) { gputest.Main(m) }
