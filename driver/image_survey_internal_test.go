package driver

import (
	"archive/tar"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The corpus is real CUBINs, written on a GPU machine (H200, CUDA 13.0) by
// TestImageNVRTCCubinsPassTheCheck (NVRTC: every architecture it supports,
// plain, -rdc, -G, -lineinfo and the "a" and "f" variants),
// TestImageLinkedCubinsPassTheCheck (nvJitLink: linked from relocatable
// CUBINs, from PTX plain, -lineinfo and -g, and from LTO-IR) and
// TestImageNvccCubinsPassTheCheck (nvcc -cubin: plain, -G, -lineinfo,
// -rdc=true, every architecture it lists), of two sources, into
// $PURECUDA_IMAGE_CORPUS, and kept here as one gzipped tar: 298 CUBINs
// (nvcc's -G and nvJitLink's -g ones for sm_75, sm_90 and sm_120 only, to
// stay under 1 MB; the GPU tests check every architecture). Every one must
// pass the check, and the survey below lists what each field of theirs
// holds: the values the check's whitelists are measured from.
const corpusFile = "testdata/cubins.tar.gz"

// readCorpus reads the corpus: file name → CUBIN.
func readCorpus(t testing.TB) map[string][]byte {
	t.Helper()
	f, err := os.Open(corpusFile)
	require.NoError(t, err)
	defer f.Close()
	z, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(z)
	c := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if h.Typeflag != tar.TypeReg || !strings.HasSuffix(h.Name, ".cubin") {
			continue
		}
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		c[path.Base(h.Name)] = b
	}
	require.NotEmpty(t, c, "no CUBINs in %s", corpusFile)
	return c
}

// TestImageCorpusPassesTheCheck: no CUBIN NVRTC, nvJitLink or nvcc writes
// is refused.
func TestImageCorpusPassesTheCheck(t *testing.T) {
	for name, b := range readCorpus(t) {
		_, err := checkImage(b)
		assert.NoError(t, err, name)
	}
}

// TestImageCorpusSurvey lists (with -v, or into $PURECUDA_IMAGE_SURVEY)
// the values each field of the corpus holds.
func TestImageCorpusSurvey(t *testing.T) {
	sv := newSurvey()
	for name, b := range readCorpus(t) {
		require.NoError(t, sv.add(b), name)
	}
	out := sv.String()
	if p := os.Getenv("PURECUDA_IMAGE_SURVEY"); p != "" {
		require.NoError(t, os.WriteFile(p, []byte(out), 0o644))
	}
	t.Log("\n" + out)
}

// TestImageSurveyOfACubinLikeELF: the survey reads what it should of a
// small CUBIN-like ELF.
func TestImageSurveyOfACubinLikeELF(t *testing.T) {
	sv := newSurvey()
	require.NoError(t, sv.add(cubinLike().b))
	out := sv.String()
	for _, want := range []string{
		"section .nv.info type 0x70000000",
		"section .text.* type 0x1 flags 0x6",
		"nv.info .nv.info format 4 attribute 0x2f: size 8",
		"nv.info .nv.info format 3 attribute 0x19: value 16",
		"symbol type 2 binding 1 other 0x00",
		"relocation rel for .text.*: type 1",
	} {
		assert.Contains(t, out, want)
	}
}

// survey counts the values seen in each field.
type survey struct{ seen map[string]map[string]int }

func newSurvey() *survey { return &survey{seen: map[string]map[string]int{}} }

func (s *survey) note(field, value string) {
	if s.seen[field] == nil {
		s.seen[field] = map[string]int{}
	}
	s.seen[field][value]++
}

// kernelNamed are the sections named after a kernel or variable: the
// survey names them by their prefix.
var kernelNamed = regexp.MustCompile(`^(\.rela?\.text\.|\.text\.|\.nv\.info\.|\.nv\.constant[0-9]+\.|\.nv\.shared\.|\.nv\.local\.|\.rela?\.nv\.constant[0-9]+\.)`)

// pattern names a section by its name with a kernel's name replaced by *.
func pattern(name string) string {
	if m := kernelNamed.FindString(name); m != "" && len(name) > len(m) {
		return m + "*"
	}
	return name
}

// add surveys ELF b, which the check accepts.
func (s *survey) add(b []byte) error {
	if err := checkELF(b, "the image"); err != nil {
		return err
	}
	le := binary.LittleEndian
	c := &elfChecker{b: b, n: uint64(len(b)), whose: "the image"}
	shoff, shnum := le.Uint64(b[40:]), uint64(le.Uint16(b[60:]))
	for i := range shnum {
		c.secs = append(c.secs, c.section(shoff+i*elfShdrSize))
	}
	c.names = c.data(int(le.Uint16(b[62:])))
	s.note("ELF", fmt.Sprintf("OS ABI 0x%02x ABI version %d type %d flags 0x%08x", b[7], b[8], le.Uint16(b[16:]), le.Uint32(b[48:])))
	for i, sec := range c.secs {
		if i == 0 {
			continue
		}
		name := pattern(c.secName(i))
		s.note("section", fmt.Sprintf("%s type 0x%x flags 0x%x entsize %d align %d", name, sec.typ, sec.flags, sec.entsize, sec.align))
		d := c.data(i)
		switch {
		case sec.typ == shtCUDAInfo:
			for off := 0; off+4 <= len(d); {
				f, a, v := d[off], d[off+1], le.Uint16(d[off+2:])
				if f == 4 {
					s.note("nv.info", fmt.Sprintf("%s format 4 attribute 0x%02x: size %d", name, a, v))
					off += 4 + int(v)
				} else {
					s.note("nv.info", fmt.Sprintf("%s format %d attribute 0x%02x: value %d", name, f, a, v))
					off += 4
				}
			}
		case sec.typ == shtNote:
			for off := 0; off+12 <= len(d); {
				namesz, descsz, typ := int(le.Uint32(d[off:])), int(le.Uint32(d[off+4:])), le.Uint32(d[off+8:])
				desc := d[off+12+(namesz+3)&^3:]
				first := ""
				if descsz >= 4 {
					first = fmt.Sprintf(" first word %d", le.Uint32(desc))
				}
				s.note("note", fmt.Sprintf("%s name %q type %d%s", name, strings.TrimRight(string(d[off+12:off+12+namesz]), "\x00"), typ, first))
				off += 12 + (namesz+3)&^3 + (descsz+3)&^3
			}
		case sec.typ == shtSymtab:
			for j := elfSymSize; j+elfSymSize <= len(d); j += elfSymSize {
				sym := d[j:]
				s.note("symbol", fmt.Sprintf("type %d binding %d other 0x%02x", sym[4]&0xf, sym[4]>>4, sym[5]))
				if x := le.Uint16(sym[6:]); x >= shnLoreserve {
					s.note("symbol", fmt.Sprintf("special section index 0x%04x", x))
				}
			}
		case sec.typ == shtRel || sec.typ == shtRela:
			kind, size := "rel", elfRelSize
			if sec.typ == shtRela {
				kind, size = "rela", elfRelaSize
			}
			target := ""
			if uint64(sec.info) < uint64(len(c.secs)) {
				target = pattern(c.secName(int(sec.info)))
			}
			for j := 0; j+size <= len(d); j += size {
				s.note("relocation", fmt.Sprintf("%s for %s: type %d", kind, target, le.Uint32(d[j+8:])))
			}
		case sec.typ > shtCUDAInfo && len(d) > 0:
			var w [4]byte
			copy(w[:], d)
			s.note("cuda section", fmt.Sprintf("%s: %d bytes, first word 0x%x", name, len(d), le.Uint32(w[:])))
		}
	}
	return nil
}

// String lists every field and the values seen in it, with their counts.
func (s *survey) String() string {
	var sb strings.Builder
	fields := make([]string, 0, len(s.seen))
	for f := range s.seen {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	for _, f := range fields {
		vals := make([]string, 0, len(s.seen[f]))
		for v := range s.seen[f] {
			vals = append(vals, v)
		}
		sort.Strings(vals)
		for _, v := range vals {
			fmt.Fprintf(&sb, "%s %s (%d)\n", f, v, s.seen[f][v])
		}
	}
	return sb.String()
}
