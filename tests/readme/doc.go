// Package readme proves that every Go code block in the repository's
// README.md compiles against the code as it is: its test extracts the
// ```go blocks, builds them with the go tool (no GPU, no network) and fails
// with the block's README line and the compiler's message. It has no code
// of its own.
//
// # Writing a Go block in README.md
//
// A block tagged go is compiled in one of three ways:
//
//   - A whole file (it starts with a package clause) is built as it stands,
//     in a package of its own.
//   - A fragment is compiled in a file of its own: top-level declarations
//     as they are, statements as the body of a func _(). Imports of the
//     packages it names (driver, graph, nvrtc, nccl, lifetime, loader and common
//     standard ones: fmt, log, errors, os, time, …) are added. It must
//     compile as written: everything it uses is declared in it, everything
//     it declares is used.
//   - A fragment preceded by the line
//     <!-- compiled: continues the program above -->
//     is spliced in at the end of main of the nearest whole file above it
//     (after the fragments that continue it already), so that it may use
//     that program's variables and must not declare them again. When that
//     file has a func run, the fragment goes at the end of run instead,
//     before its final return statement, so that it may return errors.
//
// A Go block that cannot compile (pseudo-code, an elided argument) opts out
// with <!-- not compiled: the reason --> on the line before it; the test
// logs how many blocks it compiled and which opted out. Blocks in other
// languages (shell, output, JSON) are not read.
//
// The files are never written into the module: they live in a temporary
// directory and reach the build through go list's -overlay, at paths under
// tests/readme/_compiled, which no ./... pattern matches.
package readme
