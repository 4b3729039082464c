package blasview

import "github.com/purecuda/cuda/internal/errs"

// ErrInvalidArgumentForTest is what refusals also match: driver's
// ErrInvalidArgument once driver is loaded.
func ErrInvalidArgumentForTest() error { return errs.InvalidArgument }
