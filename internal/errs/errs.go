// Package errs holds the error values that package driver and package
// nvrtc share, so that errors.Is(err, driver.ErrInvalidArgument) matches
// what either refuses before calling CUDA. (nvrtc sits beside driver and
// cannot import it.)
package errs

import "errors"

// InvalidArgument is driver.ErrInvalidArgument.
//
//lint:ignore ST1012 re-exported as driver.ErrInvalidArgument (and matched by nvrtc's errors): the Err prefix lives there
var InvalidArgument = errors.New("invalid argument")
