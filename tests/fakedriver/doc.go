// Package fakedriver tests purecuda's driver layer against fakecuda, a
// small stand-in for libcuda (testdata/fakecuda.c) that the tests compile
// with gcc. It runs where no GPU is, in CI: context binding under goroutine
// migration (fakecuda fails calls made from a thread without a current
// context, as libcuda does), host functions called from a thread of the
// library's own, frees and the cleanup safety net, and zero-allocation hot
// paths. The tests skip, with the reason, where gcc is missing.
package fakedriver
