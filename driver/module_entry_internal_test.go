package driver

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFirstEntryFindsTheFirstKernelName(t *testing.T) {
	for ptx, want := range map[string]string{
		".version 8.0\n.target sm_75\n.visible .entry k() { ret; }\n": "k",
		".visible .entry\n\t_Z3addPfS_i(\n.param .u64 a)":             "_Z3addPfS_i",
		".func f() {}\n.entry $x1 () {}\n.entry second() {}":          "$x1",
		".entryish nothing\n.entry   %p9(":                            "%p9",
		"no kernels here":                                             "",
		".entry":                                                      "",
		".entry ":                                                     "",
		".entry 9bad(":                                                "",
		".entry (":                                                    "",
		"":                                                            "",
	} {
		assert.Equal(t, want, firstEntry([]byte(ptx)), "%q", ptx)
	}
}

func FuzzFirstEntryNeverPanics(f *testing.F) {
	f.Add([]byte(".entry k("))
	f.Add([]byte(".entry"))
	f.Fuzz(func(t *testing.T, b []byte) {
		name := firstEntry(b)
		for i := range len(name) {
			assert.True(t, isPTXIdent(name[i], i == 0))
		}
	})
}
