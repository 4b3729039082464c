package driver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// ELF64 sizes and the values checkELF looks at (see the System V gABI and
// <elf.h>). CUDA device code is 64-bit, little-endian, machine EM_CUDA;
// e_version holds a CUDA version there, so it is not checked. CUDA's own
// identification and flags are checked by checkCUDAHeader
// (image_cudaelf.go).
const (
	elfEhdrSize = 64
	elfPhdrSize = 56
	elfShdrSize = 64
	elfSymSize  = 24
	elfRelSize  = 16
	elfRelaSize = 24

	emCUDA = 190

	shtNull     = 0
	shtSymtab   = 2
	shtStrtab   = 3
	shtRela     = 4
	shtNote     = 7
	shtNobits   = 8
	shtRel      = 9
	shtDynsym   = 11
	shtCUDAInfo = 0x70000000 // SHT_LOPROC: .nv.info and .nv.info.<kernel>

	sttObject = 1 // st_info's type: a variable
	sttFunc   = 2 // a function
	stbWeak   = 2 // st_info's binding: the last of local, global and weak

	shnXindex    = 0xffff // e_shstrndx: the real index is section 0's sh_link
	shnLoreserve = 0xff00 // st_shndx at or above: a special index, not a section
	pnXnum       = 0xffff // e_phnum: the real count is section 0's sh_info
)

// validSymbolType are the symbol types CUDA ELFs use: no type, variable,
// function, section, file, and 13, ptxas's for shared memory in -rdc
// CUBINs. libcuda crashed on a symbol of type 13 turned to 12 (once
// CUDA's sampler references, like 10 and 11 for textures and surfaces,
// which CUDA 12 removed): those are refused.
var validSymbolType = [16]bool{0: true, 1: true, 2: true, 3: true, 4: true, 13: true}

// elfSection is what checkELF reads of a section header.
type elfSection struct {
	name, typ   uint32
	flags       uint64
	off, size   uint64
	link, info  uint32
	align       uint64
	entsize     uint64
	hasContents bool   // occupies [off, off+size) of the file
	nsym        uint64 // a symbol table's count of symbols, once checked
}

// elfChecker checks one ELF image; whose names it in messages ("the image",
// "the entry's payload").
type elfChecker struct {
	b     []byte
	n     uint64
	whose string
	secs  []elfSection
	names []byte // the section-name table, once checked
	sm    uint32 // the architecture, from e_flags (90 for sm_90)
}

// secName is section i's name ("" before the section-name table is
// checked).
func (c *elfChecker) secName(i int) string {
	if c.names == nil {
		return ""
	}
	n := c.names[c.secs[i].name:]
	return string(n[:bytes.IndexByte(n, 0)])
}

// checkELF checks that every byte a loader can reach through the headers
// of the 64-bit CUDA ELF b lies inside b.
func checkELF(b []byte, whose string) error {
	le := binary.LittleEndian
	c := &elfChecker{b: b, n: uint64(len(b)), whose: whose}
	if len(b) > 4 && b[4] == 1 {
		return fmt.Errorf("a 32-bit ELF (ELFCLASS32): CUDA device code is 64-bit")
	}
	if c.n < elfEhdrSize {
		return fmt.Errorf("an ELF header needs %d bytes, %s has %d", elfEhdrSize, whose, c.n)
	}
	switch {
	case b[4] != 2:
		return fmt.Errorf("ELF class %d: CUDA device code is 64-bit (ELFCLASS64)", b[4])
	case b[5] != 1:
		return fmt.Errorf("ELF data encoding %d: CUDA device code is little-endian", b[5])
	case b[6] != 1:
		return fmt.Errorf("ELF identification version %d (want 1)", b[6])
	}
	if m := le.Uint16(b[18:]); m != emCUDA {
		return fmt.Errorf("ELF machine %d is not CUDA (%d): pass device code (a CUBIN, or a fatbin)", m, emCUDA)
	}
	if err := checkCUDAHeader(b); err != nil {
		return err
	}
	c.sm = cudaSM(b)
	phoff, shoff := le.Uint64(b[32:]), le.Uint64(b[40:])
	ehsize, phentsize, phnum := le.Uint16(b[52:]), le.Uint16(b[54:]), uint64(le.Uint16(b[56:]))
	shentsize, shnum, shstrndx := le.Uint16(b[58:]), uint64(le.Uint16(b[60:])), uint32(le.Uint16(b[62:]))
	if ehsize != elfEhdrSize {
		return fmt.Errorf("ELF header size %d (want %d)", ehsize, elfEhdrSize)
	}
	if phnum == 0 && phoff != 0 {
		// libcuda reads there all the same.
		return fmt.Errorf("ELF has no program headers, but a program header table at %d", phoff)
	}
	if shoff == 0 {
		// A CUDA ELF keeps its symbols, code and attributes in sections;
		// libcuda crashed on one without.
		return errors.New("ELF has no section header table")
	} else {
		if shentsize != elfShdrSize {
			return fmt.Errorf("ELF section header size %d (want %d)", shentsize, elfShdrSize)
		}
		if err := inside("the ELF section header table", shoff, elfShdrSize, c.n, whose); err != nil {
			return err
		}
		// Extended numbering: counts too large for the header live in
		// section 0.
		s0 := c.section(shoff)
		if err := checkSection0(c.b[shoff:shoff+elfShdrSize], shnum == 0, shstrndx == shnXindex, phnum == pnXnum); err != nil {
			return err
		}
		if shnum == 0 {
			shnum = s0.size
		}
		if shstrndx == shnXindex {
			shstrndx = s0.link
		}
		if phnum == pnXnum {
			phnum = uint64(s0.info)
		}
		if shnum == 0 {
			return errors.New("ELF has no sections")
		}
		if shnum > (c.n-shoff)/elfShdrSize {
			return fmt.Errorf("the ELF section header table (%d entries of %d bytes at offset %d) ends past %s's %d bytes", shnum, elfShdrSize, shoff, whose, c.n)
		}
		c.secs = make([]elfSection, shnum)
		for i := range c.secs {
			s := c.section(shoff + uint64(i)*elfShdrSize)
			if i > 0 && (s.align&(s.align-1) != 0 || (s.align > 1 && s.off%s.align != 0)) {
				return fmt.Errorf("ELF section %d: offset %d is not aligned to its sh_addralign, %d", i, s.off, s.align)
			}
			switch {
			case i == 0: // checked above; its size may be a count
				s.hasContents = false
			case s.hasContents:
				if err := insideNth("ELF section", uint64(i), s.off, s.size, c.n, whose); err != nil {
					return err
				}
			case s.off > c.n:
				// libcuda reads at a section's offset even when it has
				// no contents in the file (a NOBITS section, an empty
				// one).
				return fmt.Errorf("ELF section %d (type %d, %d bytes): offset %d is past %s's %d bytes", i, s.typ, s.size, s.off, whose, c.n)
			}
			c.secs[i] = s
		}
	}
	if phnum != 0 {
		if err := c.programHeaders(phoff, phentsize, phnum); err != nil {
			return err
		}
	}
	return c.sectionContents(shstrndx)
}

// section reads the section header at off (inside b).
func (c *elfChecker) section(off uint64) elfSection {
	le := binary.LittleEndian
	h := c.b[off : off+elfShdrSize]
	s := elfSection{
		name: le.Uint32(h[0:]), typ: le.Uint32(h[4:]), flags: le.Uint64(h[8:]),
		off: le.Uint64(h[24:]), size: le.Uint64(h[32:]),
		link: le.Uint32(h[40:]), info: le.Uint32(h[44:]),
		align: le.Uint64(h[48:]), entsize: le.Uint64(h[56:]),
	}
	s.hasContents = s.typ != shtNobits && s.size != 0 // libcuda reads even an SHT_NULL section's
	return s
}

// checkSection0 checks section header 0, h, which the gABI reserves: all
// zero, but for the extended numbering fields where the ELF header says
// they are used (sh_size the section count, sh_link the section-name
// table's index, sh_info the program header count). libcuda reads its
// offset and size as any section's: a non-zero offset crashed it.
func checkSection0(h []byte, countInS0, strndxInS0, phnumInS0 bool) error {
	le := binary.LittleEndian
	for _, f := range []struct {
		name     string
		off, len int
		used     bool
	}{
		{"sh_name", 0, 4, false}, {"sh_type", 4, 4, false}, {"sh_flags", 8, 8, false}, {"sh_addr", 16, 8, false},
		{"sh_offset", 24, 8, false}, {"sh_size", 32, 8, countInS0}, {"sh_link", 40, 4, strndxInS0},
		{"sh_info", 44, 4, phnumInS0}, {"sh_addralign", 48, 8, false}, {"sh_entsize", 56, 8, false},
	} {
		if f.used {
			continue
		}
		v := uint64(le.Uint32(h[f.off:]))
		if f.len == 8 {
			v = le.Uint64(h[f.off:])
		}
		if v != 0 {
			return fmt.Errorf("ELF section 0 is reserved, but its %s is 0x%x (want 0)", f.name, v)
		}
	}
	return nil
}

// data is section i's contents (it has been checked to lie inside b).
func (c *elfChecker) data(i int) []byte {
	s := c.secs[i]
	if !s.hasContents {
		return nil
	}
	return c.b[s.off : s.off+s.size]
}

// programHeaders checks the program header table and that every segment's
// file contents lie inside b.
func (c *elfChecker) programHeaders(phoff uint64, phentsize uint16, phnum uint64) error {
	le := binary.LittleEndian
	if phoff == 0 {
		return fmt.Errorf("ELF has %d program headers but no program header table", phnum)
	}
	if phentsize != elfPhdrSize {
		return fmt.Errorf("ELF program header size %d (want %d)", phentsize, elfPhdrSize)
	}
	if phoff > c.n || phnum > (c.n-phoff)/elfPhdrSize {
		return fmt.Errorf("the ELF program header table (%d entries of %d bytes at offset %d) ends past %s's %d bytes", phnum, elfPhdrSize, phoff, c.whose, c.n)
	}
	for i := range phnum {
		h := c.b[phoff+i*elfPhdrSize:]
		if filesz := le.Uint64(h[32:]); filesz != 0 {
			if err := insideNth("ELF segment", i, le.Uint64(h[8:]), filesz, c.n, c.whose); err != nil {
				return err
			}
		}
	}
	return nil
}

// sectionContents checks what sections point at: names, string tables,
// symbols, relocations and .nv.info records. Symbol tables go first, so
// that relocations can count on them.
func (c *elfChecker) sectionContents(shstrndx uint32) error {
	if len(c.secs) == 0 {
		return nil
	}
	names, err := c.strtab(shstrndx, "section-name table")
	if err != nil {
		return err
	}
	for i, s := range c.secs {
		if uint64(s.name) >= uint64(len(names)) {
			return fmt.Errorf("ELF section %d: name offset %d is past the %d-byte section-name table", i, s.name, len(names))
		}
	}
	c.names = names
	for i, s := range c.secs {
		if k := c.nvNoteType(i); k != 0 && s.typ != shtNote {
			return fmt.Errorf("ELF section %d (%s): type %d, not a note section (%d)", i, c.secName(i), s.typ, shtNote)
		}
		if err := c.constantBank(i); err != nil {
			return err
		}
		switch s.typ {
		case shtStrtab:
			if s.hasContents && c.b[s.off+s.size-1] != 0 {
				return fmt.Errorf("ELF section %d: a string table that does not end in NUL", i)
			}
		case shtSymtab, shtDynsym:
			if err := c.symbols(i); err != nil {
				return err
			}
		}
	}
	for i, s := range c.secs {
		var err error
		switch s.typ {
		case shtRel, shtRela:
			err = c.relocations(i)
		case shtCUDAInfo:
			err = c.nvInfo(i)
		case shtCUDACallgraph:
			err = c.callgraph(i)
		case shtCUDACompat:
			err = c.compat(i)
		case shtNote:
			err = c.notes(i)
		}
		if err == nil {
			err = c.links(i)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// strtab returns section i's contents if it is a string table ending in
// NUL; what names its use.
func (c *elfChecker) strtab(i uint32, what string) ([]byte, error) { return c.strtabOf(i, what, -1) }

// strtabOf is strtab for the string table of what nth ("symbol table", 3)
// when nth ≥ 0, named only on error (the check runs on every load).
func (c *elfChecker) strtabOf(i uint32, what string, nth int) ([]byte, error) {
	name := func() string {
		if nth < 0 {
			return what
		}
		return fmt.Sprintf("string table of %s %d", what, nth)
	}
	if i == 0 || uint64(i) >= uint64(len(c.secs)) {
		return nil, fmt.Errorf("ELF %s: section index %d is not a section (the ELF has %d)", name(), i, len(c.secs))
	}
	s := c.secs[i]
	if s.typ != shtStrtab || !s.hasContents {
		return nil, fmt.Errorf("ELF %s: section %d is not a string table with contents", name(), i)
	}
	d := c.data(int(i))
	if d[len(d)-1] != 0 {
		return nil, fmt.Errorf("ELF %s: section %d does not end in NUL", name(), i)
	}
	return d, nil
}

// symbols checks symbol table i: whole entries, a string table for its
// names, every name inside it and every section index a section. It
// records the number of symbols in the section's nsym.
func (c *elfChecker) symbols(i int) error {
	le := binary.LittleEndian
	s := &c.secs[i]
	if s.entsize != elfSymSize || s.size%elfSymSize != 0 {
		return fmt.Errorf("ELF section %d: a symbol table of %d bytes with %d-byte entries (want whole %d-byte entries)", i, s.size, s.entsize, elfSymSize)
	}
	d := c.data(i)
	if len(d) == 0 {
		return nil
	}
	names, err := c.strtabOf(s.link, "symbol table", i)
	if err != nil {
		return err
	}
	if !bytes.Equal(d[:elfSymSize], make([]byte, elfSymSize)) {
		return fmt.Errorf("ELF section %d: symbol 0 is reserved, but is not all zero", i) // a value in it hung libcuda
	}
	for j := 0; j < len(d); j += elfSymSize {
		sym := d[j : j+elfSymSize]
		if name := le.Uint32(sym); uint64(name) >= uint64(len(names)) {
			return fmt.Errorf("ELF section %d, symbol %d: name offset %d is past its %d-byte string table", i, j/elfSymSize, name, len(names))
		}
		if typ, bind := sym[4]&0xf, sym[4]>>4; !validSymbolType[typ] || bind > stbWeak {
			return fmt.Errorf("ELF section %d, symbol %d: type %d, binding %d (CUDA's are types 0-4 and 13, bindings local, global and weak)", i, j/elfSymSize, typ, bind)
		}
		// Special indices (SHN_ABS, SHN_COMMON, SHN_XINDEX and the rest
		// from 0xff00) are refused too: NVIDIA's tools write none (in the
		// corpus of NVRTC's, nvJitLink's and nvcc's CUBINs), and each of
		// 0xff00, 0xffxx and 0xxxff in a symbol crashed libcuda.
		shndx := le.Uint16(sym[6:])
		if int(shndx) >= len(c.secs) {
			return fmt.Errorf("ELF section %d, symbol %d: section index %#x is not a section (the ELF has %d)", i, j/elfSymSize, shndx, len(c.secs))
		}
		// A variable or function lies inside its section (libcuda copies
		// it: a __constant__ variable past its section's end crashed it).
		// Other symbols' st_value may mean something else (ptxas's
		// shared-memory symbols in -rdc CUBINs, type 13).
		if typ := sym[4] & 0xf; (typ == sttObject || typ == sttFunc) && shndx != 0 {
			t := c.secs[shndx]
			if v, n := le.Uint64(sym[8:]), le.Uint64(sym[16:]); v > t.size || n > t.size-v {
				return fmt.Errorf("ELF section %d, symbol %d: %d bytes at %d, past the %d bytes of its section, %d", i, j/elfSymSize, n, v, t.size, shndx)
			}
		}
	}
	s.nsym = uint64(len(d) / elfSymSize)
	return nil
}

// relocations checks relocation section i: whole entries, a symbol table,
// each symbol index inside it, each type one of CUDA's, and each offset
// inside the section the relocations apply to, with room for what the
// relocation patches (relocationBytes).
func (c *elfChecker) relocations(i int) error {
	le := binary.LittleEndian
	s := c.secs[i]
	want := uint64(elfRelSize)
	if s.typ == shtRela {
		want = elfRelaSize
	}
	if s.entsize != want || s.size%want != 0 {
		return fmt.Errorf("ELF section %d: a relocation table of %d bytes with %d-byte entries (want whole %d-byte entries)", i, s.size, s.entsize, want)
	}
	// Even an empty table's links are checked: libcuda follows them (a
	// relocation table for section 0 hung it).
	if uint64(s.link) >= uint64(len(c.secs)) || (c.secs[s.link].typ != shtSymtab && c.secs[s.link].typ != shtDynsym) {
		return fmt.Errorf("ELF section %d: relocations whose symbol table, section %d, is not a symbol table", i, s.link)
	}
	if s.info == 0 || uint64(s.info) >= uint64(len(c.secs)) {
		return fmt.Errorf("ELF section %d: relocations for section %d, which is not a section (the ELF has %d)", i, s.info, len(c.secs))
	}
	nsym := c.secs[s.link].nsym
	target := &c.secs[s.info]
	d := c.data(i)
	for j := uint64(0); j < uint64(len(d)); j += want {
		r := d[j:]
		if sym := le.Uint64(r[8:]) >> 32; sym >= nsym {
			return fmt.Errorf("ELF section %d, relocation %d: symbol %d, of %d", i, j/want, sym, nsym)
		}
		typ := uint32(le.Uint64(r[8:]))
		if !knownRelocation(typ) {
			return fmt.Errorf("ELF section %d, relocation %d: type 0x%x is not one of CUDA's (0 to 0x73, or 0x10000 to 0x1003f)", i, j/want, typ)
		}
		code := target.flags&shfExecInstr != 0 && typ < 0x10000 // Mercury's code is not SASS
		n := relocationBytes(typ, code)
		if off := le.Uint64(r); target.size < n || off > target.size-n || (code && off%8 != 0) {
			return fmt.Errorf("ELF section %d, relocation %d (type 0x%x): offset %d does not leave the %d bytes it patches inside section %d's %d bytes", i, j/want, typ, off, n, s.info, target.size)
		}
	}
	return nil
}

// knownRelocation reports whether typ is a CUDA relocation type:
// R_CUDA_NONE (0) to R_CUDA_CONST_FIELD22_37 (0x73), or a Mercury one
// (0x10000 plus R_MERCURY_NONE … R_MERCURY_UNIFIED32_HI, 0 to 0x3f).
func knownRelocation(typ uint32) bool {
	return typ < 0x74 || (typ >= 0x10000 && typ < 0x10040)
}

// relocationBytes is how many bytes from its offset a relocation of type
// typ may patch: a field that crosses into an instruction's second 8
// bytes (R_CUDA_ABS47_34, _INSTRUCTION128, _YIELD_CLEAR_PRED4_87,
// _ABS55_16_34, _ABS56_16_34) 16; in SASS code, one instruction word, 8
// (at an 8-byte boundary); a 64-bit address (R_CUDA_64, _G64,
// _FUNC_DESC_64, _INSTRUCTION64, _UNUSED_CLEAR64) 8; one byte of an
// address (R_CUDA_8_0 … _8_56 and their G8, FUNC_DESC_8 and UNIFIED_8
// kin, Mercury's too), 1 at its offset, which may be the byte itself;
// anything else, Mercury's included, 4.
func relocationBytes(typ uint32, code bool) uint64 {
	switch {
	case typ >= 0x4c && typ <= 0x63, typ >= 0x68 && typ <= 0x6f, // R_CUDA_8_*, _G8_*, _FUNC_DESC_8_*, _UNIFIED_8_*
		typ >= 0x10010 && typ <= 0x10031, typ >= 0x10034 && typ <= 0x1003b: // Mercury's 8-bit ones
		return 1
	}
	switch typ {
	case 0x3a, 0x43, 0x45, 0x4b, 0x72:
		return 16
	case 2, 4, 0x23, 0x35, 0x49:
		return 8
	}
	if code {
		return 8
	}
	return 4
}
