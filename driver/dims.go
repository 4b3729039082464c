package driver

// GridDim is a grid's shape, in blocks: make one with Grid. It is a type of
// its own, apart from BlockDim, so that a launch given its grid and block
// the wrong way round does not compile.
type GridDim struct{ X, Y, Z int }

// BlockDim is a block's shape, in threads: make one with Block.
type BlockDim struct{ X, Y, Z int }

// ClusterDim is a thread-block cluster's shape, in blocks
// (LaunchConfig.Cluster): make one with Cluster.
type ClusterDim struct{ X, Y, Z int }

// dim3 is what the three shapes have in common.
type dim3 struct{ X, Y, Z int }

func dim(x int, yz []int) dim3 {
	d := dim3{X: x, Y: 1, Z: 1}
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
func Grid(x int, yz ...int) GridDim { return GridDim(dim(x, yz)) }

// Block is a block of x (by y by z) threads.
func Block(x int, yz ...int) BlockDim { return BlockDim(dim(x, yz)) }

// Cluster is a thread-block cluster of x (by y by z) blocks.
func Cluster(x int, yz ...int) ClusterDim { return ClusterDim(dim(x, yz)) }

func checkDims(op string, d *dimLimits, grid GridDim, block BlockDim) error {
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
