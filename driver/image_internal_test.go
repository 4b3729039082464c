package driver

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var imgLE = binary.LittleEndian

// testSection is a section for buildELF. Sections 0 (NULL) and 1
// (.shstrtab) are made by buildELF; the caller's start at index 2.
type testSection struct {
	name       string
	typ        uint32
	flags      uint64
	data       []byte
	size       uint64 // a NOBITS section's size
	link, info uint32
	entsize    uint64
}

// testSegment is a program header covering section sec's contents.
type testSegment struct {
	typ uint32
	sec int
}

// testELF is a built image and where its parts lie.
type testELF struct {
	b            []byte
	shoff, phoff uint64
	secOff       []uint64 // each section's contents
}

// shdr is the offset of section i's header.
func (e testELF) shdr(i int) uint64 { return e.shoff + uint64(i)*elfShdrSize }

// phdr is the offset of program header i.
func (e testELF) phdr(i int) uint64 { return e.phoff + uint64(i)*elfPhdrSize }

// clone copies e's bytes, for a test to damage.
func (e testELF) clone() []byte { return bytes.Clone(e.b) }

// buildELF lays out a 64-bit CUDA ELF as ptxas does: the header, the
// sections' contents, the section header table, the program header table.
func buildELF(secs []testSection, segs []testSegment) testELF {
	all := append([]testSection{{}, {name: ".shstrtab", typ: shtStrtab}}, secs...)
	var names []byte
	nameOff := make([]uint32, len(all))
	names = append(names, 0)
	for i := 1; i < len(all); i++ {
		nameOff[i] = uint32(len(names))
		names = append(append(names, all[i].name...), 0)
	}
	all[1].data = names
	b := make([]byte, elfEhdrSize)
	e := testELF{secOff: make([]uint64, len(all))}
	for i, s := range all {
		for len(b)%8 != 0 {
			b = append(b, 0)
		}
		e.secOff[i] = uint64(len(b))
		if s.typ != shtNobits {
			b = append(b, s.data...)
		}
	}
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	e.shoff = uint64(len(b))
	for i, s := range all {
		h := make([]byte, elfShdrSize)
		size := uint64(len(s.data))
		off := e.secOff[i]
		if s.typ == shtNobits {
			size = s.size
		}
		if i == 0 {
			off = 0
		}
		imgLE.PutUint32(h[0:], nameOff[i])
		imgLE.PutUint32(h[4:], s.typ)
		imgLE.PutUint64(h[8:], s.flags)
		imgLE.PutUint64(h[24:], off)
		imgLE.PutUint64(h[32:], size)
		imgLE.PutUint32(h[40:], s.link)
		imgLE.PutUint32(h[44:], s.info)
		imgLE.PutUint64(h[56:], s.entsize)
		b = append(b, h...)
	}
	e.phoff = uint64(len(b))
	for _, g := range segs {
		h := make([]byte, elfPhdrSize)
		imgLE.PutUint32(h[0:], g.typ)
		imgLE.PutUint64(h[8:], e.secOff[g.sec])
		imgLE.PutUint64(h[32:], uint64(len(all[g.sec].data)))
		imgLE.PutUint64(h[40:], uint64(len(all[g.sec].data)))
		b = append(b, h...)
	}
	copy(b, elfMagic)
	b[4], b[5], b[6], b[7], b[8] = 2, 1, 1, 0x33, 7 // ELFCLASS64, little-endian, version 1, CUDA's OS ABI, ABI version 7
	imgLE.PutUint16(b[16:], uint16(elf.ET_EXEC))
	imgLE.PutUint16(b[18:], emCUDA)
	imgLE.PutUint32(b[20:], 0x7c) // CUDA keeps a version of its own here
	if len(segs) == 0 {
		e.phoff = 0
	}
	imgLE.PutUint64(b[32:], e.phoff)
	imgLE.PutUint64(b[40:], e.shoff)
	imgLE.PutUint32(b[48:], testFlagsV1) // sm_80
	imgLE.PutUint16(b[52:], elfEhdrSize)
	imgLE.PutUint16(b[54:], elfPhdrSize)
	imgLE.PutUint16(b[56:], uint16(len(segs)))
	imgLE.PutUint16(b[58:], elfShdrSize)
	imgLE.PutUint16(b[60:], uint16(len(all)))
	imgLE.PutUint16(b[62:], 1)
	e.b = b
	return e
}

// Section indices of cubinLike.
const (
	secStrtab = 2 + iota
	secSymtab
	secNvInfo
	secText
	secRel
	secShared
	secGlobal
)

// cubinLike is a small CUBIN as ptxas makes them: a kernel "k" with a
// relocation against a global "g", its .nv.info, shared memory and two
// loadable segments.
func cubinLike() testELF {
	sym := func(name uint32, info byte, shndx uint16, size uint64) []byte {
		s := make([]byte, elfSymSize)
		imgLE.PutUint32(s, name)
		s[4] = info
		imgLE.PutUint16(s[6:], shndx)
		imgLE.PutUint64(s[16:], size)
		return s
	}
	syms := bytes.Join([][]byte{sym(0, 0, 0, 0), sym(1, 0x12, secText, 32), sym(3, 0x01, secGlobal, 4)}, nil)
	rel := make([]byte, elfRelSize)
	imgLE.PutUint64(rel, 8)
	imgLE.PutUint64(rel[8:], 2<<32|1) // symbol 2 ("g"), type 1
	info := []byte{
		0x04, 0x2f, 0x08, 0x00, 1, 0, 0, 0, 8, 0, 0, 0, // EIFMT_SVAL, 8 bytes
		0x01, 0x35, 0x00, 0x00, // EIFMT_NVAL
		0x03, 0x19, 0x10, 0x00, // EIFMT_HVAL
	}
	return buildELF([]testSection{
		{name: ".strtab", typ: shtStrtab, data: []byte("\x00k\x00g\x00")},
		{name: ".symtab", typ: shtSymtab, data: syms, link: secStrtab, info: 1, entsize: elfSymSize},
		{name: ".nv.info", typ: shtCUDAInfo, data: info, link: secSymtab},
		{name: ".text.k", typ: 1, flags: shfExecInstr | 0x2, data: bytes.Repeat([]byte{0xab}, 32), link: secSymtab, info: 0x0a000001},
		{name: ".rel.text.k", typ: shtRel, data: rel, link: secSymtab, info: secText, entsize: elfRelSize},
		{name: ".nv.shared.k", typ: shtNobits, size: 1024},
		{name: ".nv.global.init", typ: 1, data: []byte{1, 2, 3, 4}},
	}, []testSegment{{typ: 1, sec: secText}, {typ: 1, sec: secGlobal}})
}

func TestImageAcceptsCubinLikeELF(t *testing.T) {
	e := cubinLike()
	kind, err := checkImage(e.b)
	require.NoError(t, err)
	assert.Equal(t, imageELF, kind)
	// The builder makes a well-formed ELF: Go's own reader agrees (once
	// e_version is 1: debug/elf refuses CUDA's, as it does real CUBINs').
	b := e.clone()
	imgLE.PutUint32(b[20:], 1)
	f, err := elf.NewFile(bytes.NewReader(b))
	require.NoError(t, err)
	assert.Equal(t, elf.EM_CUDA, f.Machine)
	assert.Equal(t, ".rel.text.k", f.Sections[secRel].Name)
	syms, err := f.Symbols()
	require.NoError(t, err)
	assert.Equal(t, "g", syms[1].Name)
}

func TestImageRefusesEveryTruncatedELF(t *testing.T) {
	e := cubinLike()
	for n := 1; n < len(e.b); n++ {
		_, err := checkImage(e.b[:n])
		assert.Error(t, err, "truncated to %d of %d bytes", n, len(e.b))
	}
}

// TestImageRefusesDamagedELF: each damage is refused with a message that
// says what and where.
func TestImageRefusesDamagedELF(t *testing.T) {
	e := cubinLike()
	n := uint64(len(e.b))
	cases := []struct {
		name, msg string
		damage    func(b []byte)
	}{
		{"32-bit", "32-bit ELF", func(b []byte) { b[4] = 1 }},
		{"class 3", "ELF class 3", func(b []byte) { b[4] = 3 }},
		{"big-endian", "little-endian", func(b []byte) { b[5] = 2 }},
		{"ident version", "identification version 0", func(b []byte) { b[6] = 0 }},
		{"host machine", "ELF machine 62 is not CUDA", func(b []byte) { imgLE.PutUint16(b[18:], 62) }},
		{"header size", "ELF header size 52", func(b []byte) { imgLE.PutUint16(b[52:], 52) }},
		{"section header size", "section header size 40", func(b []byte) { imgLE.PutUint16(b[58:], 40) }},
		{"section table past the end", "section header table", func(b []byte) { imgLE.PutUint64(b[40:], n-8) }},
		{"section table offset overflows", "the ELF section header table (offset 18446744073709551607, 64 bytes) ends past the image's", func(b []byte) { imgLE.PutUint64(b[40:], ^uint64(0)-8) }},
		{"too many sections", "section header table (99 entries", func(b []byte) { imgLE.PutUint16(b[60:], 99) }},
		{"sections but no table", "no section header table", func(b []byte) { imgLE.PutUint64(b[40:], 0) }},
		{"section past the end", "ELF section 5 ends at", func(b []byte) { imgLE.PutUint64(b[e.shdr(secText)+24:], n-16) }},
		{"section size overflows", "ELF section 5 (offset", func(b []byte) { imgLE.PutUint64(b[e.shdr(secText)+32:], ^uint64(0)) }},
		{"program header size", "program header size 32", func(b []byte) { imgLE.PutUint16(b[54:], 32) }},
		{"too many segments", "program header table (9 entries", func(b []byte) { imgLE.PutUint16(b[56:], 9) }},
		{"segments but no table", "no program header table", func(b []byte) { imgLE.PutUint64(b[32:], 0) }},
		{"segment past the end", "ELF segment 1 ends at", func(b []byte) { imgLE.PutUint64(b[e.phdr(1)+32:], n) }},
		{"name table index", "section-name table: section index 40", func(b []byte) { imgLE.PutUint16(b[62:], 40) }},
		{"name table is not a string table", "section 3 is not a string table", func(b []byte) { imgLE.PutUint16(b[62:], secSymtab) }},
		{"name table without NUL", "section 1 does not end in NUL", func(b []byte) { b[e.secOff[1]+uint64(imgLE.Uint64(b[e.shdr(1)+32:]))-1] = 'x' }},
		{"section name past its table", "ELF section 4: name offset 4000", func(b []byte) { imgLE.PutUint32(b[e.shdr(secNvInfo):], 4000) }},
		{"string table without NUL", "ELF section 2: a string table that does not end in NUL", func(b []byte) { b[e.secOff[secStrtab]+4] = 'g' }},
		{"symbol entry size", "symbol table of 72 bytes with 16-byte entries", func(b []byte) { imgLE.PutUint64(b[e.shdr(secSymtab)+56:], 16) }},
		{"symbol table's strings", "string table of symbol table 3: section 4 is not a string table", func(b []byte) { imgLE.PutUint32(b[e.shdr(secSymtab)+40:], secNvInfo) }},
		{"symbol name past its table", "symbol 2: name offset 77", func(b []byte) { imgLE.PutUint32(b[e.secOff[secSymtab]+2*elfSymSize:], 77) }},
		{"symbol section", "symbol 1: section index 0x12c", func(b []byte) { imgLE.PutUint16(b[e.secOff[secSymtab]+elfSymSize+6:], 300) }},
		// Special indices: NVIDIA's tools write none, and libcuda crashed on them.
		{"symbol section SHN_ABS", "symbol 1: section index 0xfff1", func(b []byte) { imgLE.PutUint16(b[e.secOff[secSymtab]+elfSymSize+6:], 0xfff1) }},
		{"symbol section SHN_LORESERVE", "symbol 1: section index 0xff00", func(b []byte) { imgLE.PutUint16(b[e.secOff[secSymtab]+elfSymSize+6:], 0xff00) }},
		{"symbol section SHN_XINDEX", "symbol 2: section index 0xffff", func(b []byte) { imgLE.PutUint16(b[e.secOff[secSymtab]+2*elfSymSize+6:], 0xffff) }},
		{"relocation entry size", "relocation table of 16 bytes with 24-byte entries", func(b []byte) { imgLE.PutUint64(b[e.shdr(secRel)+56:], 24) }},
		{"relocations without symbols", "section 5, is not a symbol table", func(b []byte) { imgLE.PutUint32(b[e.shdr(secRel)+40:], secText) }},
		{"relocations for no section", "relocations for section 60", func(b []byte) { imgLE.PutUint32(b[e.shdr(secRel)+44:], 60) }},
		{"relocation symbol", "relocation 0: symbol 3, of 3", func(b []byte) { imgLE.PutUint64(b[e.secOff[secRel]+8:], 3<<32|1) }},
		{"relocation offset", "relocation 0 (type 0x1): offset 30 does not leave the 8 bytes it patches inside section 5's 32 bytes", func(b []byte) { imgLE.PutUint64(b[e.secOff[secRel]:], 30) }},
		{".nv.info record too long", "the record at offset 0 holds 200 bytes", func(b []byte) { imgLE.PutUint16(b[e.secOff[secNvInfo]+2:], 200) }},
		{".nv.info cut record", "a record at offset 16 runs past", func(b []byte) { imgLE.PutUint64(b[e.shdr(secNvInfo)+32:], 18) }},
		{".nv.info symbol", "(attribute 0x2f): names symbol 7, but section 3 has 3 symbols", func(b []byte) { b[e.secOff[secNvInfo]+4] = 7 }},
		{"relocations for section 0", "relocations for section 0, which is not a section", func(b []byte) { imgLE.PutUint32(b[e.shdr(secRel)+44:], 0) }},
		{"empty relocations for no section", "relocations for section 70", func(b []byte) {
			imgLE.PutUint64(b[e.shdr(secRel)+32:], 0)
			imgLE.PutUint32(b[e.shdr(secRel)+44:], 70)
		}},
		{"symbol 0", "symbol 0 is reserved", func(b []byte) { b[e.secOff[secSymtab]+9] = 0x20 }},
		{"symbol past its section", "symbol 2: 8 bytes at 0, past the 4 bytes of its section, 8", func(b []byte) { b[e.secOff[secSymtab]+2*elfSymSize+16] = 8 }},
		{"variable in an emptied section", "symbol 2: 4 bytes at 0, past the 0 bytes of its section, 8", func(b []byte) { b[e.shdr(secGlobal)+32] = 0 }},
		{"code section's symbol", "ELF section 5 (code): sh_info names symbol 9, but section 3 has 3 symbols", func(b []byte) { b[e.shdr(secText)+44] = 9 }},
		{"sh_link", "ELF section 8: sh_link 50 is not a section", func(b []byte) { b[e.shdr(secGlobal)+40] = 50 }},
		{"sh_info", "ELF section 7: sh_info 64 is not a section", func(b []byte) { b[e.shdr(secShared)+44] = 64 }},
		{"symbol table's sh_info", "sh_info 9 (the first global symbol) is past its 3 symbols", func(b []byte) { b[e.shdr(secSymtab)+44] = 9 }},
		{"alignment not a power of two", "offset 160 is not aligned to its sh_addralign, 3", func(b []byte) { b[e.shdr(secSymtab)+48] = 3 }},
		{"misaligned section", "is not aligned to its sh_addralign, 4096", func(b []byte) { imgLE.PutUint16(b[e.shdr(secSymtab)+48:], 4096) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := e.clone()
			c.damage(b)
			_, err := checkImage(b)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.msg)
		})
	}
}

func TestImageELFEdgeCases(t *testing.T) {
	e := cubinLike()
	t.Run("a NOBITS section may be of any size, but lies in the file", func(t *testing.T) {
		b := e.clone()
		imgLE.PutUint64(b[e.shdr(secShared)+32:], 1<<40)
		assert.NoError(t, checkELF(b, "the image"))
		imgLE.PutUint64(b[e.shdr(secShared)+24:], 1<<40)
		assert.ErrorContains(t, checkELF(b, "the image"), "ELF section 7 (type 8, 1099511627776 bytes): offset 1099511627776 is past the image's 1000 bytes")
	})
	t.Run("an SHT_NULL section's contents lie in the file", func(t *testing.T) {
		b := e.clone()
		imgLE.PutUint32(b[e.shdr(secGlobal)+4:], shtNull)
		assert.NoError(t, checkELF(b, "the image"))
		imgLE.PutUint64(b[e.shdr(secGlobal)+24:], 1<<24)
		assert.ErrorContains(t, checkELF(b, "the image"), "ELF section 8 ends at 16777220")
	})
	t.Run("section 0 is all zero", func(t *testing.T) {
		for _, off := range []uint64{0, 4, 8, 16, 24, 32, 40, 44, 48, 56} {
			b := e.clone()
			b[e.shdr(0)+off+1] = 1
			assert.ErrorContains(t, checkELF(b, "the image"), "ELF section 0 is reserved, but its sh_", "byte %d", off+1)
		}
	})
	t.Run("only variables and functions must lie inside their sections", func(t *testing.T) {
		b := e.clone()
		sym := e.secOff[secSymtab] + 2*elfSymSize
		b[sym+8] = 4 // "g" at 4 in a 4-byte section
		assert.ErrorContains(t, checkELF(b, "the image"), "4 bytes at 4, past the 4 bytes")
		b[sym+4] = 13 // ptxas's shared-memory symbols (-rdc) mean something else by st_value
		assert.NoError(t, checkELF(b, "the image"))
	})
	t.Run("an unknown .nv.info format is refused", func(t *testing.T) {
		for _, f := range []byte{0, 5, 0x7f, 0xff} {
			b := e.clone()
			b[e.secOff[secNvInfo]+12] = f
			assert.ErrorContains(t, checkELF(b, "the image"), fmt.Sprintf("the record at offset 12 has format %d (CUDA's are 1 to 4)", f))
		}
	})
	t.Run("extended section numbering", func(t *testing.T) {
		b := e.clone()
		count := imgLE.Uint16(b[60:])
		imgLE.PutUint16(b[60:], 0)
		imgLE.PutUint64(b[e.shdr(0)+32:], uint64(count))
		imgLE.PutUint16(b[62:], shnXindex)
		imgLE.PutUint32(b[e.shdr(0)+40:], 1)
		assert.NoError(t, checkELF(b, "the image"))
		imgLE.PutUint64(b[e.shdr(0)+32:], 1<<60)
		assert.ErrorContains(t, checkELF(b, "the image"), "entries of 64 bytes")
		imgLE.PutUint64(b[e.shdr(0)+32:], uint64(count))
		imgLE.PutUint32(b[e.shdr(0)+40:], 0)
		assert.ErrorContains(t, checkELF(b, "the image"), "section index 0")
	})
	t.Run("no sections at all", func(t *testing.T) {
		b := e.clone()
		imgLE.PutUint16(b[60:], 0) // and section 0 counts none
		assert.ErrorContains(t, checkELF(b, "the image"), "ELF has no sections")
		imgLE.PutUint64(b[40:], 0)
		assert.ErrorContains(t, checkELF(b, "the image"), "ELF has no section header table")
	})
	t.Run("a program header table needs program headers", func(t *testing.T) {
		b := e.clone()
		imgLE.PutUint16(b[56:], 0)
		assert.ErrorContains(t, checkELF(b, "the image"), "ELF has no program headers, but a program header table at 888")
		imgLE.PutUint64(b[32:], 0)
		assert.NoError(t, checkELF(b, "the image"))
	})
	t.Run("symbol types and bindings", func(t *testing.T) {
		sym := e.secOff[secSymtab] + elfSymSize + 4
		for _, info := range []byte{0x00, 0x01, 0x12, 0x13, 0x04, 0x1d, 0x2d} {
			b := e.clone()
			b[sym] = info
			assert.NoError(t, checkELF(b, "the image"), "st_info 0x%02x", info)
		}
		for _, info := range []byte{0x1c, 0x1a, 0x15, 0x06, 0x32, 0xa2} {
			b := e.clone()
			b[sym] = info
			assert.ErrorContains(t, checkELF(b, "the image"), "ELF section 3, symbol 1: type", "st_info 0x%02x", info)
		}
	})
	t.Run("a short ELF", func(t *testing.T) {
		_, err := checkImage([]byte("\x7fEL"))
		assert.ErrorContains(t, err, "an ELF header needs 64 bytes, the image has 3")
		_, err = checkImage(e.b[:40])
		assert.ErrorContains(t, err, "an ELF header needs 64 bytes, the image has 40")
	})
}

func TestImageText(t *testing.T) {
	ok := []string{
		"FAKE module",
		".version 8.0\n.target sm_75\n.address_size 64\n\t.visible .entry k()\r\n{\n\tret;\n}\n",
		"PTX with trailing NULs\x00\x00\x00",
		"// größe: UTF-8 in a comment\n\v\f",
		"P", // a prefix of the fatbin magic, but one byte of text
	}
	for _, s := range ok {
		kind, err := checkImage([]byte(s))
		assert.NoError(t, err, "%q", s)
		assert.Equal(t, imageText, kind, "%q", s)
	}
	bad := []struct{ image, msg string }{
		{"\x00\x00", "only NUL bytes"},
		{"abc\x00def", "NUL byte at offset 3 inside 7 bytes of text"},
		{"abc\x1bdef", "control byte 0x1b at offset 3"},
		{"abc\x7f", "control byte 0x7f at offset 3"},
		{"abc\xff\xfe", "byte 0xff at offset 3 is not UTF-8"},
		{"\xc3", "byte 0xc3 at offset 0 is not UTF-8"},
		{"P\xed", "a fatbin header needs 16 bytes, the image has 2"},
		{"\xb1\x43\x62\x46\x01\x00\x00\x00", "fatbin wrapper"},
		{"\x01\x5a\xe5\x1e", "old-style fatbin"},
	}
	for _, c := range bad {
		_, err := checkImage([]byte(c.image))
		assert.ErrorContains(t, err, c.msg, "%q", c.image)
	}
}

// TestImageCopy: image hands CUDA a checked, NUL-terminated copy, and its
// errors match ErrInvalidImage and ErrInvalidArgument.
func TestImageCopy(t *testing.T) {
	code := []byte("FAKE module")
	img, kind, err := image("Context.LoadModule", code)
	require.NoError(t, err)
	assert.Equal(t, imageText, kind)
	assert.Equal(t, append(bytes.Clone(code), 0), img)
	img[0] = 'X'
	assert.Equal(t, byte('F'), code[0], "a copy")

	e := cubinLike()
	img, kind, err = image("LoadLibrary", e.b)
	require.NoError(t, err)
	assert.Equal(t, imageELF, kind)
	assert.Equal(t, append(bytes.Clone(e.b), 0), img)

	for _, bad := range [][]byte{nil, {}, e.b[:len(e.b)-1], {0xff, 0x00, 0x12}} {
		_, _, err := image("Context.LoadModule", bad)
		require.Error(t, err)
		assert.ErrorIs(t, err, ErrInvalidImage)
		assert.ErrorIs(t, err, ErrInvalidArgument)
		assert.NotErrorIs(t, err, ErrInvalidPtx)
		assert.Regexp(t, `^driver: Context\.LoadModule: invalid image: `, err.Error())
	}
	_, _, err = image("Context.LoadModule", nil)
	assert.EqualError(t, err, "driver: Context.LoadModule: invalid image: empty image")
	_, _, err = image("Context.LoadModule", e.b[:len(e.b)-1])
	assert.EqualError(t, err, "driver: Context.LoadModule: invalid image: the ELF program header table (2 entries of 56 bytes at offset 888) ends past the image's 999 bytes")
	b := e.clone()
	imgLE.PutUint64(b[e.shdr(secText)+24:], 990)
	_, _, err = image("Context.LoadModule", b)
	assert.EqualError(t, err, "driver: Context.LoadModule: invalid image: ELF section 5 ends at 1022, past the image's 1000 bytes")
	var ie *imageError
	assert.True(t, errors.As(err, &ie))
}

// TestLoadLibraryRefusesBadImagesWithoutCUDA: the check comes first, so
// even with no driver a damaged image gets its own error.
func TestLoadLibraryRefusesBadImagesWithoutCUDA(t *testing.T) {
	for _, bad := range [][]byte{nil, {0x9c, 0x00, 0xf1, 0x42}, cubinLike().b[:100]} {
		lib, err := LoadLibrary(bad)
		assert.Nil(t, lib)
		assert.ErrorIs(t, err, ErrInvalidImage)
		assert.ErrorContains(t, err, "driver: LoadLibrary: invalid image: ")
	}
	mod, err := (*Context)(nil).LoadModule([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1})
	assert.Nil(t, mod)
	assert.ErrorIs(t, err, ErrInvalidImage)
}
