// Package nvrtc compiles CUDA C++ to PTX, CUBIN or LTO-IR at run time with
// NVIDIA's NVRTC, without a CUDA toolkit or C compiler on the machine: only
// libnvrtc is needed, found by package loader (PURECUDA_LIBNVRTC overrides).
//
// It stands beside package driver and does not import it: Compile returns
// bytes, and (*driver.Context).CompileModule compiles straight into a
// loaded module.
//
//	res, err := nvrtc.Compile(src, nvrtc.Options{Arch: "sm_90", Std: "c++17"})
//	if err != nil {
//		// errors.Is(err, nvrtc.ErrCompilation); the log is in err's text
//	}
//	mod, err := ctx.LoadModule(res.Image())
//
// # Concurrency
//
// Compile is safe to call from many goroutines: each call has its own NVRTC
// program, destroyed before it returns on every path.
package nvrtc
