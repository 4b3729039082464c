// Package errs holds the error values that package driver and package
// nvrtc share, so that errors.Is(err, driver.ErrInvalidArgument) matches
// what either refuses before calling CUDA. (nvrtc sits beside driver and
// cannot import it.)
package errs

import "errors"

// InvalidArgument is what nvrtc's refusals wrap: driver.ErrInvalidArgument
// once package driver is initialised (it sets it), so that both packages'
// refusals match it; a value of its own before.
//
//lint:ignore ST1012 driver.ErrInvalidArgument is the exported name
var InvalidArgument = errors.New("invalid argument")

// NoGPU is what the loader's errors for a missing CUDA driver (or an
// operating system without CUDA) match: driver.ErrNoGPU once package driver
// is initialised (it sets it), a value of its own before.
//
//lint:ignore ST1012 driver.ErrNoGPU is the exported name
var NoGPU = errors.New("no usable GPU")
