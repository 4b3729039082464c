package nccl

import "github.com/purecuda/cuda/internal/ncclraw"

// Version is the version of the libnccl found (ncclGetVersion), for example
// 2, 28, 3. It opens the library on first use; without it the error matches
// ErrNotSupported and lists every place searched. It needs no GPU.
func Version() (major, minor, patch int, err error) {
	var code int32
	if err := wrap(ncclraw.GetVersion(&code), 0); err != nil {
		return 0, 0, 0, err
	}
	major, minor, patch = decodeVersion(int(code))
	return major, minor, patch, nil
}

// decodeVersion splits an NCCL version code: major*10000 + minor*100 +
// patch since 2.9 (22803 is 2.28.3), major*1000 + minor*100 + patch before
// (2804 is 2.8.4), as nccl.h's NCCL_VERSION macro makes them.
func decodeVersion(code int) (major, minor, patch int) {
	if code < 10000 {
		return code / 1000, code % 1000 / 100, code % 100
	}
	return code / 10000, code % 10000 / 100, code % 100
}
