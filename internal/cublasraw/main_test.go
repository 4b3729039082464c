package cublasraw_test

import (
	"testing"

	"github.com/purecuda/cuda/internal/gputest"
)

// TestMain runs the tests and says how many GPU tests skipped, and why.
func TestMain(m *testing.M) { gputest.Main(m) }
