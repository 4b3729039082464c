package driver_test

import (
	"fmt"
	"log"

	"github.com/purecuda/cuda/driver"
)

// Allocate from a slice, work on part of it through a view, and read it
// back. (No output is checked: examples run where there may be no GPU.)
func ExampleBuffer_Slice() {
	dev, err := driver.DeviceByOrdinal(0)
	if err != nil {
		log.Fatal(err)
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()

	buf, err := driver.AllocCopy(ctx.LegacyStream(), []float32{0, 1, 2, 3, 4, 5, 6, 7})
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	mid, err := buf.Slice(2, 6) // elements 2..5, no copy
	if err != nil {
		log.Fatal(err)
	}
	defer mid.Close() // the memory is freed once buf and mid are both closed
	if err := mid.MemsetFloat32(ctx.LegacyStream(), -1); err != nil {
		log.Fatal(err)
	}
	all, err := buf.ToHost(ctx.LegacyStream())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(all) // [0 1 -1 -1 -1 -1 6 7]
}
