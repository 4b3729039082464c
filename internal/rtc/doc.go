// Package rtc is purecuda's raw table of NVRTC: one Go function for every
// function nvrtc.h declares, generated (z*.go) by internal/gen. The safe API
// is package nvrtc.
//
// Names drop the "nvrtc" prefix: CompileProgram calls nvrtcCompileProgram,
// Result is nvrtcResult, Program is nvrtcProgram; constants keep their C names
// (NVRTC_ERROR_COMPILATION).
//
// NVRTC is opened through package loader on first use, independently of the
// driver library, and each function is resolved with dlsym on its first call
// and cached in an atomic. A missing library or symbol is an error value,
// never a panic.
package rtc

// The tables are generated together with internal/cu: see its go:generate line.
