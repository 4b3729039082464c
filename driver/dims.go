package driver

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z int }

func dim(x int, yz []int) Dim3 {
	d := Dim3{X: x, Y: 1, Z: 1}
	if len(yz) > 0 {
		d.Y = yz[0]
	}
	if len(yz) > 1 {
		d.Z = yz[1]
	}
	if len(yz) > 2 {
		d.Z = -1 // rejected at launch
	}
	return d
}

// Grid is a grid of x (by y by z) blocks.
func Grid(x int, yz ...int) Dim3 { return dim(x, yz) }

// Block is a block of x (by y by z) threads.
func Block(x int, yz ...int) Dim3 { return dim(x, yz) }

func checkDims(op string, d *dimLimits, grid, block Dim3) error {
	// Every device CUDA 13 supports allows at least this much: checking it
	// reads nothing (a launch's data is out of the CPU caches by the next).
	if quickDims(grid, block) {
		return nil
	}
	for i, v := range [3]int{grid.X, grid.Y, grid.Z} {
		if v < 1 || v > int(d.maxGrid[i]) {
			return invalid(op, "grid dimension %c = %d, the device allows 1 to %d", "xyz"[i], v, d.maxGrid[i])
		}
	}
	for i, v := range [3]int{block.X, block.Y, block.Z} {
		if v < 1 || v > int(d.maxBlock[i]) {
			return invalid(op, "block dimension %c = %d, the device allows 1 to %d", "xyz"[i], v, d.maxBlock[i])
		}
	}
	if n := block.X * block.Y * block.Z; n > int(d.maxThreads) {
		return invalid(op, "block of %d threads, the device allows %d", n, d.maxThreads)
	}
	return nil
}
