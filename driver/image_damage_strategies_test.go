package driver_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Multi-byte damage inside sections' contents, with the headers left
// alone: the kind of damage that single-bit flips miss (a note's start
// scrambled crashed libcuda inside cuModuleLoadDataEx). Each strategy
// makes perStrategy() damaged images, spread evenly over the kinds of
// section a CUBIN holds (sectionKind) and over the CUBINs; its group is
// "<strategy> <kind>", so that the report counts what became of each kind.
const (
	stratBytes = "bytes" // 2 to 16 bytes replaced with random values
	stratZeros = "zeros" // a run of 2 to 64 bytes set to 0x00
	stratOnes  = "ones"  // a run of 2 to 64 bytes set to 0xff
	stratArith = "arith" // a 2-, 4- or 8-byte field plus or minus a small or large amount
	stratSizes = "sizes" // a note's or .nv.info record's size, format or attribute changed

	perStrategyEnv = "PURECUDA_IMAGE_MUTATIONS_PER_STRATEGY" // default 5000 (-short: 1000)
)

// strategies are the multi-byte strategies, in the order of the list.
var strategies = []string{stratBytes, stratZeros, stratOnes, stratArith, stratSizes}

// perStrategy is how many damaged images each multi-byte strategy makes.
// The closing GPU run of the damage work sets 100,000.
func perStrategy() int {
	if n, err := strconv.Atoi(os.Getenv(perStrategyEnv)); err == nil && n > 0 {
		return n
	}
	if testing.Short() {
		return 1000
	}
	return 5000
}

// arithDeltas are the amounts arith adds (and subtracts).
var arithDeltas = []uint64{1, 2, 3, 4, 8, 16, 0x80, 0x100, 0x1000, 0x10000, 0x1000000, 0x80000000, 1 << 32}

// sectionKind names the kind of section s is, for the damage report.
func sectionKind(s elfSec) string {
	switch {
	case s.typ == 7:
		return "notes"
	case s.typ == 2 || s.typ == 11:
		return "symbols"
	case s.typ == 3:
		return "strings"
	case s.typ == 4 || s.typ == 9:
		return "relocations"
	case s.name == ".nv.info":
		return "nv.info"
	case strings.HasPrefix(s.name, ".nv.info."):
		return "nv.info.kernel"
	case strings.HasPrefix(s.name, ".text."):
		return "code"
	case strings.HasPrefix(s.name, ".nv.constant"):
		return "constants"
	case strings.HasPrefix(s.name, ".debug") || strings.HasPrefix(s.name, ".nv_debug"):
		return "debug"
	case s.typ >= 0x70000000:
		return strings.TrimPrefix(s.name, ".") // .nv.compat, .nv.callgraph, .nv.rel.action, …
	}
	return "other"
}

// damageTarget is a section of a CUBIN with contents to damage.
type damageTarget struct {
	src       string
	off, size int
}

// damageTargets groups the sections with contents of the CUBINs srcs
// names by kind; kinds is their sorted list.
func damageTargets(srcs map[string][]byte, cubins []string) (map[string][]damageTarget, []string) {
	by := map[string][]damageTarget{}
	for _, c := range cubins {
		for _, s := range readELF(srcs[c]).secs {
			if s.hasContents && s.size >= 2 {
				k := sectionKind(s)
				by[k] = append(by[k], damageTarget{c, s.off, s.size})
			}
		}
	}
	kinds := make([]string, 0, len(by))
	for k := range by {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return by, kinds
}

// multiByteMutations makes n damaged images per strategy of the CUBINs
// named, deterministically (a child makes the same list).
func multiByteMutations(srcs map[string][]byte, cubins []string, n int) []mutation {
	by, kinds := damageTargets(srcs, cubins)
	if len(kinds) == 0 {
		return nil
	}
	var ms []mutation
	for si, strat := range strategies {
		r := rand.New(rand.NewPCG(uint64(si)+1, 27))
		if strat == stratSizes {
			ms = append(ms, sizeMutations(srcs, cubins, n, r)...)
			continue
		}
		for i := range n {
			kind := kinds[i%len(kinds)]
			t := by[kind][r.IntN(len(by[kind]))]
			m := mutation{group: strat + " " + kind, src: t.src}
			switch strat {
			case stratBytes, stratZeros, stratOnes:
				run := 2 + r.IntN(15)
				if strat != stratBytes {
					run = 2 + r.IntN(63)
				}
				run = min(run, t.size)
				m.at, m.run = t.off+r.IntN(t.size-run+1), run
				m.fill = map[string]int{stratBytes: -1, stratZeros: 0, stratOnes: 0xff}[strat]
				m.seed = r.Uint64()
			case stratArith:
				w := []int{2, 4, 8}[r.IntN(3)]
				for w > t.size {
					w /= 2
				}
				m.at, m.set = t.off+r.IntN(t.size/w)*w, w
				was := readLE(srcs[t.src][m.at:], w)
				d := arithDeltas[r.IntN(len(arithDeltas))]
				if r.IntN(2) == 0 {
					d = -d
				}
				m.val = (was + d) & ones(w)
				if m.val == was {
					m.val = was ^ 1
				}
			}
			ms = append(ms, m)
		}
	}
	return ms
}

// sizeField is a size, format or attribute field of a note or a .nv.info
// record in a CUBIN.
type sizeField struct {
	src, kind string
	off, len  int
}

// sizeFields lists the size fields of the notes and .nv.info records of
// the CUBINs: each note's name and description sizes and type, each
// record's format, attribute and 16-bit size (or value).
func sizeFields(srcs map[string][]byte, cubins []string) []sizeField {
	le := binary.LittleEndian
	var fs []sizeField
	for _, c := range cubins {
		b := srcs[c]
		for _, s := range readELF(b).secs {
			if !s.hasContents {
				continue
			}
			d := b[s.off : s.off+s.size]
			switch kind := sectionKind(s); kind {
			case "notes":
				for off := 0; off+12 <= len(d); {
					fs = append(fs, sizeField{c, kind, s.off + off, 4}, sizeField{c, kind, s.off + off + 4, 4}, sizeField{c, kind, s.off + off + 8, 4})
					namesz, descsz := int(le.Uint32(d[off:])), int(le.Uint32(d[off+4:]))
					off += 12 + (namesz+3)&^3 + (descsz+3)&^3
				}
			case "nv.info", "nv.info.kernel":
				for off := 0; off+4 <= len(d); {
					fs = append(fs, sizeField{c, kind, s.off + off, 1}, sizeField{c, kind, s.off + off + 1, 1}, sizeField{c, kind, s.off + off + 2, 2})
					if d[off] != 4 {
						off += 4
						continue
					}
					off += 4 + int(le.Uint16(d[off+2:]))
				}
			}
		}
	}
	return fs
}

// sizeMutations makes n damaged images of the size fields, cycling over
// them: small changes up and down, large ones, and random values.
func sizeMutations(srcs map[string][]byte, cubins []string, n int, r *rand.Rand) []mutation {
	fs := sizeFields(srcs, cubins)
	if len(fs) == 0 {
		return nil
	}
	ms := make([]mutation, 0, n)
	for i := range n {
		f := fs[i%len(fs)]
		was := readLE(srcs[f.src][f.off:], f.len)
		var v uint64
		switch round := i / len(fs); {
		case round < 32: // ±1 … ±16, then ±(4·k) further out
			d := uint64(round/2 + 1)
			if round >= 16 {
				d = uint64(4 * (round - 14))
			}
			if round%2 == 0 {
				v = was + d
			} else {
				v = was - d
			}
		case round%3 == 0:
			v = arithDeltas[r.IntN(len(arithDeltas))] + was
		default:
			v = r.Uint64()
		}
		v &= ones(f.len)
		if v == was {
			v = was ^ 1
		}
		ms = append(ms, mutation{group: stratSizes + " " + f.kind, src: f.src, at: f.off, set: f.len, val: v})
	}
	return ms
}

// readLE reads a w-byte little-endian number.
func readLE(b []byte, w int) uint64 {
	var v uint64
	for i := range w {
		v |= uint64(b[i]) << (8 * i)
	}
	return v
}

// ones is the w-byte number with every bit set.
func ones(w int) uint64 {
	if w >= 8 {
		return ^uint64(0)
	}
	return 1<<(8*w) - 1
}

// strategyOf is the strategy a group belongs to ("" for the single-bit
// groups).
func strategyOf(group string) string {
	s, _, _ := strings.Cut(group, " ")
	for _, x := range strategies {
		if s == x {
			return s
		}
	}
	return ""
}

// strategyReport sums the module outcomes of the multi-byte groups by
// strategy: loaded, refused before CUDA, refused by CUDA.
func strategyReport(tally map[string]map[string]int) []string {
	type sums struct{ loaded, check, cuda int }
	by := map[string]*sums{}
	for g, outcomes := range tally {
		s := strategyOf(g)
		if s == "" {
			continue
		}
		if by[s] == nil {
			by[s] = &sums{}
		}
		for o, n := range outcomes {
			switch {
			case !strings.HasPrefix(o, "module "):
			case o == "module loaded":
				by[s].loaded += n
			case o == "module refused-by-check":
				by[s].check += n
			default:
				by[s].cuda += n
			}
		}
	}
	var out []string
	for _, s := range strategies {
		if x := by[s]; x != nil {
			out = append(out, fmt.Sprintf("%-6s %7d images: %7d loaded, %7d refused before CUDA, %7d refused by CUDA",
				s, x.loaded+x.check+x.cuda, x.loaded, x.check, x.cuda))
		}
	}
	return out
}

// testCubin builds a small ELF with the section kinds of a CUBIN (no
// loadable code): a toolkit note, the global and a kernel's .nv.info, a
// kernel's code and constants, a symbol table and the string tables.
func testCubin() []byte {
	le := binary.LittleEndian
	type sec struct {
		name string
		typ  uint32
		data []byte
	}
	note := make([]byte, 12, 64)
	le.PutUint32(note, 12)
	le.PutUint32(note[4:], 32)
	le.PutUint32(note[8:], 2000)
	note = append(note, "NVIDIA Corp\x00"...)
	note = append(note, make([]byte, 32)...)
	info := []byte{4, 0x2f, 8, 0, 1, 0, 0, 0, 32, 0, 0, 0, 3, 0x1b, 0xff, 0}                               // REGCOUNT, MAXREG_COUNT
	kinfo := []byte{4, 0x0a, 8, 0, 1, 0, 0, 0, 0, 0, 0x60, 1, 4, 0x1c, 4, 0, 0x30, 0, 0, 0, 1, 0x04, 0, 0} // PARAM_CBANK, EXIT_INSTR_OFFSETS, CTAIDZ_USED
	secs := []sec{
		{"", 0, nil},
		{".shstrtab", 3, nil},
		{".strtab", 3, []byte("\x00k\x00")},
		{".symtab", 2, make([]byte, 48)},
		{".note.nv.tkinfo", 7, note},
		{".nv.info", 0x70000000, info},
		{".nv.info.k", 0x70000000, kinfo},
		{".text.k", 1, pattern(64)},
		{".nv.constant0.k", 1, pattern(0x160)},
	}
	var names []byte
	nameOff := make([]int, len(secs))
	for i, s := range secs {
		nameOff[i] = len(names)
		names = append(append(names, s.name...), 0)
	}
	secs[1].data = names
	b := make([]byte, 64)
	offs := make([]int, len(secs))
	for i, s := range secs {
		for len(b)%8 != 0 {
			b = append(b, 0)
		}
		offs[i] = len(b)
		b = append(b, s.data...)
	}
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	shoff := len(b)
	for i, s := range secs {
		h := make([]byte, 64)
		le.PutUint32(h, uint32(nameOff[i]))
		le.PutUint32(h[4:], s.typ)
		if i > 0 {
			le.PutUint64(h[24:], uint64(offs[i]))
			le.PutUint64(h[32:], uint64(len(s.data)))
		}
		if s.typ == 2 {
			le.PutUint32(h[40:], 2)
			le.PutUint64(h[56:], 24)
		}
		b = append(b, h...)
	}
	copy(b, "\x7fELF\x02\x01\x01")
	le.PutUint64(b[40:], uint64(shoff))
	le.PutUint16(b[52:], 64)
	le.PutUint16(b[58:], 64)
	le.PutUint16(b[60:], uint16(len(secs)))
	le.PutUint16(b[62:], 1)
	return b
}

// pattern is n bytes, none 0x00 or 0xff.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(1 + i%250)
	}
	return b
}

// TestMultiByteMutations: each strategy makes the number asked for, the
// same list every time (a child process rebuilds it), spread over every
// section kind; each damaged image differs from its source only inside
// one section's contents, never in a header.
func TestMultiByteMutations(t *testing.T) {
	srcs := map[string][]byte{"cubin": testCubin()}
	cubins := []string{"cubin"}
	const n = 700
	ms := multiByteMutations(srcs, cubins, n)
	if len(ms) != n*len(strategies) {
		t.Fatalf("%d mutations, want %d", len(ms), n*len(strategies))
	}
	again := multiByteMutations(srcs, cubins, n)
	l := readELF(srcs["cubin"])
	perGroup := map[string]int{}
	for i, m := range ms {
		if fmt.Sprint(m) != fmt.Sprint(again[i]) {
			t.Fatalf("mutation %d differs between two lists: %+v, %+v", i, m, again[i])
		}
		perGroup[m.group]++
		img, src := m.image(srcs), srcs[m.src]
		lo, hi := -1, -1
		for j := range src {
			if img[j] != src[j] {
				if lo < 0 {
					lo = j
				}
				hi = j
			}
		}
		if lo < 0 {
			if m.run == 0 { // a run may set bytes to what they were
				t.Fatalf("mutation %d (%s) changed nothing", i, m.describe(srcs))
			}
			continue
		}
		inside := false
		for _, s := range l.secs {
			if s.hasContents && lo >= s.off && hi < s.off+s.size {
				inside = true
				if k := sectionKind(s); !strings.HasSuffix(m.group, " "+k) {
					t.Fatalf("mutation %d (%s) is in a %s section", i, m.group, k)
				}
			}
		}
		if !inside {
			t.Fatalf("mutation %d (%s) changed bytes %d to %d, outside one section's contents", i, m.describe(srcs), lo, hi)
		}
	}
	_, kinds := damageTargets(srcs, cubins)
	for _, strat := range []string{stratBytes, stratZeros, stratOnes, stratArith} {
		for _, k := range kinds {
			if perGroup[strat+" "+k] == 0 {
				t.Errorf("strategy %s damaged no %s section", strat, k)
			}
		}
	}
	for _, k := range []string{"notes", "nv.info", "nv.info.kernel"} {
		if perGroup[stratSizes+" "+k] == 0 {
			t.Errorf("strategy sizes changed no field of a %s section", k)
		}
	}
	tally := map[string]map[string]int{"bytes code": {"module loaded": 2, "module refused-by-check": 3, "module CUDA_ERROR_INVALID_IMAGE": 1, "library loaded": 9}}
	if got := strategyReport(tally); len(got) != 1 || !strings.Contains(got[0], "6 images:       2 loaded,       3 refused before CUDA,       1 refused by CUDA") {
		t.Errorf("report %q", got)
	}
}
