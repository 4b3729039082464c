package lifetime_test

import (
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/tables"
	"testing"

	"github.com/purecuda/cuda/lifetime"
)

// The costs the lifetime layer adds to a call (Acquire+Release), a node add
// (Ref + Table.Add), a host function (Invoke), a deferred release and a
// pin. Timings are for reading, never assertions.

func BenchmarkObjectAcquireRelease(b *testing.B) {
	b.ReportAllocs()
	var o lifetime.Object
	o.Init(nil)
	defer o.Close()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if o.Acquire() {
				_ = o.Release()
			}
		}
	})
}

// A graph of 1000 nodes, each naming one buffer; the table is released and
// a new one made every 1000 adds.
func BenchmarkTableAddRef(b *testing.B) {
	b.ReportAllocs()
	var o lifetime.Object
	o.Init(nil)
	defer o.Close()
	tab := tables.New()
	node := uintptr(0)
	for b.Loop() {
		r, _ := o.Hold()
		node++
		_ = tab.Add(node, r)
		if node%1000 == 0 {
			_ = tab.Release()
			tab = tables.New()
		}
	}
	_ = tab.Release()
}

func BenchmarkMapPutTake(b *testing.B) {
	b.ReportAllocs()
	var m hostfn.Map[hostfn.Callback]
	fn := func() {}
	for b.Loop() {
		id := m.Put(hostfn.Callback{Fn: fn, Once: true})
		_, _ = m.Take(id)
	}
}

func BenchmarkInvoke(b *testing.B) {
	b.ReportAllocs()
	id := hostfn.Register(hostfn.Callback{Fn: func() {}})
	defer hostfn.Unregister(id)
	for b.Loop() {
		hostfn.Invoke(id)
	}
}

func BenchmarkInvokeOnce(b *testing.B) {
	b.ReportAllocs()
	fn := func() {}
	for b.Loop() {
		hostfn.Invoke(hostfn.Register(hostfn.Callback{Fn: fn, Once: true}))
	}
}

func BenchmarkDefer(b *testing.B) {
	b.ReportAllocs()
	nop := lifetime.OwnerFunc(func() error { return nil })
	for b.Loop() {
		release.Defer(nop)
	}
	lifetime.Flush()
}

func BenchmarkPinSlice(b *testing.B) {
	b.ReportAllocs()
	buf := make([]byte, 1024)
	for b.Loop() {
		_ = release.PinSlice(buf).Release()
	}
}
