package blasview

import (
	"slices"
	"strconv"
)

// indexed turns an operand's name into its batch's ("A" into "A[3]").
func indexed(name string, i int) string {
	if name == "" {
		return "batch " + strconv.Itoa(i)
	}
	return name + "[" + strconv.Itoa(i) + "]"
}

// sameBatch checks that batch i's views have batch 0's shape, layout,
// operation and leading dimension: one set of arguments serves all. The
// batches are numbered from first (a group of GemmGrouped's).
func sameBatch(fn string, i, first int, as, bs, cs []Matrix) *Error {
	for _, x := range []struct {
		name string
		v    []Matrix
	}{{"A", as}, {"B", bs}, {"C", cs}} {
		got, want := x.v[i], x.v[0]
		name, wname := indexed(x.name, first+i), indexed(x.name, first)
		switch {
		case got.Rows != want.Rows || got.Cols != want.Cols:
			return refuse(ErrShape, fn, name, "%d×%d, but %s is %d×%d: every batch has one shape", got.Rows, got.Cols, wname, want.Rows, want.Cols)
		case got.LD != want.LD:
			return refuse(ErrShape, fn, name, "leading dimension %d, but %s's is %d: every batch has one", got.LD, wname, want.LD)
		case got.Layout != want.Layout:
			return refuse(ErrShape, fn, name, "%s, but %s is %s: every batch has one layout", layoutName(got.Layout), wname, layoutName(want.Layout))
		case got.Op != want.Op:
			return refuse(ErrShape, fn, name, "operation %d, but %s's is %d: every batch has one", got.Op, wname, want.Op)
		}
	}
	return nil
}

// batchItem is one operand of one batch, for the alias sweep.
type batchItem struct {
	sp    span
	name  byte // 'A', 'B' or 'C'
	batch int
}

// batchAliases refuses a C of any batch that overlaps another batch's C,
// or any batch's A or B. Candidates come from a sweep over the items sorted
// by first byte (two intervals meet exactly when the later starts before
// the earlier ends); each is then decided by overlaps, exact where it is.
func batchAliases(fn string, items []batchItem) *Error {
	items = slices.DeleteFunc(items, func(it batchItem) bool { return it.sp.empty() })
	slices.SortFunc(items, func(x, y batchItem) int {
		switch {
		case x.sp.base < y.sp.base:
			return -1
		case x.sp.base > y.sp.base:
			return 1
		}
		return 0
	})
	for i, x := range items {
		end := x.sp.end()
		for _, y := range items[i+1:] {
			if y.sp.base >= end {
				break
			}
			if (x.name != 'C' && y.name != 'C') || !overlaps(x.sp, y.sp) {
				continue
			}
			c, o := x, y
			if c.name != 'C' || (o.name == 'C' && o.batch > c.batch) {
				c, o = o, c
			}
			return refuse(ErrAlias, fn, indexed("C", c.batch), "overlaps %s in memory", indexed(string(o.name), o.batch))
		}
	}
	return nil
}
