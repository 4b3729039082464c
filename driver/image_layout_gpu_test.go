package driver_test

import (
	"encoding/binary"
	"fmt"
)

// The damaged-image test names the field each damaged byte lies in, so
// that a crash report says "ELF section 7 (.nv.info.scaled) header
// sh_size" rather than "byte 1234". These helpers read the layout of the
// undamaged images (which the check accepts, so every offset below is in
// range).

// field is a named byte range of an image.
type field struct {
	name     string
	off, len int
}

// value is the little-endian value of f in b ("" when f is not a 1-, 2-,
// 4- or 8-byte number inside b).
func (f field) value(b []byte) string {
	if f.off < 0 || f.off+f.len > len(b) {
		return ""
	}
	le := binary.LittleEndian
	switch f.len {
	case 1:
		return fmt.Sprintf("0x%02x", b[f.off])
	case 2:
		return fmt.Sprintf("0x%04x", le.Uint16(b[f.off:]))
	case 4:
		return fmt.Sprintf("0x%08x", le.Uint32(b[f.off:]))
	case 8:
		return fmt.Sprintf("0x%x", le.Uint64(b[f.off:]))
	}
	return ""
}

var (
	ehdrFields = []field{
		{"e_ident magic", 0, 4}, {"e_ident EI_CLASS", 4, 1}, {"e_ident EI_DATA", 5, 1}, {"e_ident EI_VERSION", 6, 1},
		{"e_ident EI_OSABI", 7, 1}, {"e_ident EI_ABIVERSION", 8, 1}, {"e_ident padding", 9, 7},
		{"e_type", 16, 2}, {"e_machine", 18, 2}, {"e_version", 20, 4}, {"e_entry", 24, 8}, {"e_phoff", 32, 8},
		{"e_shoff", 40, 8}, {"e_flags", 48, 4}, {"e_ehsize", 52, 2}, {"e_phentsize", 54, 2}, {"e_phnum", 56, 2},
		{"e_shentsize", 58, 2}, {"e_shnum", 60, 2}, {"e_shstrndx", 62, 2},
	}
	phdrFields = []field{
		{"p_type", 0, 4}, {"p_flags", 4, 4}, {"p_offset", 8, 8}, {"p_vaddr", 16, 8}, {"p_paddr", 24, 8},
		{"p_filesz", 32, 8}, {"p_memsz", 40, 8}, {"p_align", 48, 8},
	}
	shdrFields = []field{
		{"sh_name", 0, 4}, {"sh_type", 4, 4}, {"sh_flags", 8, 8}, {"sh_addr", 16, 8}, {"sh_offset", 24, 8},
		{"sh_size", 32, 8}, {"sh_link", 40, 4}, {"sh_info", 44, 4}, {"sh_addralign", 48, 8}, {"sh_entsize", 56, 8},
	}
	symFields = []field{
		{"st_name", 0, 4}, {"st_info", 4, 1}, {"st_other", 5, 1}, {"st_shndx", 6, 2}, {"st_value", 8, 8}, {"st_size", 16, 8},
	}
	relFields = []field{{"r_offset", 0, 8}, {"r_info (type)", 8, 4}, {"r_info (symbol)", 12, 4}, {"r_addend", 16, 8}}

	fatHeaderFields = []field{{"magic", 0, 4}, {"version", 4, 2}, {"header size", 6, 2}, {"entries size", 8, 8}}
	fatEntryFields  = []field{
		{"kind", 0, 2}, {"version", 2, 2}, {"header size", 4, 4}, {"payload size", 8, 8}, {"compressed size", 16, 4},
		{"options offset", 20, 4}, {"minor", 24, 2}, {"major", 26, 2}, {"arch", 28, 4}, {"name offset", 32, 4},
		{"name length", 36, 4}, {"flags", 40, 8}, {"reserved", 48, 8}, {"uncompressed size", 56, 8},
	}
)

// elfSec is a section of an ELF image.
type elfSec struct {
	name            string
	typ             uint32
	off, size       int
	entsize         int
	hasContents     bool
	headerOff, info int
}

// elfLayout is where an ELF image's headers and sections lie.
type elfLayout struct {
	phoff, phnum, shoff int
	secs                []elfSec
}

// readELF reads b's layout (b is an ELF the check accepted).
func readELF(b []byte) *elfLayout {
	le := binary.LittleEndian
	l := &elfLayout{phoff: int(le.Uint64(b[32:])), phnum: int(le.Uint16(b[56:])), shoff: int(le.Uint64(b[40:]))}
	shnum := int(le.Uint16(b[60:]))
	for i := range shnum {
		h := b[l.shoff+i*64:]
		s := elfSec{
			typ: le.Uint32(h[4:]), off: int(le.Uint64(h[24:])), size: int(le.Uint64(h[32:])),
			entsize: int(le.Uint64(h[56:])), headerOff: l.shoff + i*64, info: int(le.Uint32(h[44:])),
		}
		s.hasContents = s.typ != 0 && s.typ != 8 && s.size > 0
		l.secs = append(l.secs, s)
	}
	if strndx := int(le.Uint16(b[62:])); strndx < len(l.secs) {
		names := l.secs[strndx]
		for i := range l.secs {
			n := int(le.Uint32(b[l.secs[i].headerOff:]))
			if names.hasContents && n < names.size {
				end := names.off + n
				for end < names.off+names.size && b[end] != 0 {
					end++
				}
				l.secs[i].name = string(b[names.off+n : end])
			}
		}
	}
	return l
}

// headerBytes are the offsets of l's ELF header, program headers and
// section headers.
func (l *elfLayout) headerBytes() []int {
	var at []int
	for i := range 64 {
		at = append(at, i)
	}
	for i := range l.phnum * 56 {
		at = append(at, l.phoff+i)
	}
	for i := range len(l.secs) * 64 {
		at = append(at, l.shoff+i)
	}
	return at
}

// headerFields are the fields of l's ELF header, program headers and
// section headers, at their offsets in the image.
func (l *elfLayout) headerFields() []field {
	var fs []field
	add := func(base int, of []field) {
		for _, f := range of {
			fs = append(fs, field{f.name, base + f.off, f.len})
		}
	}
	add(0, ehdrFields[1:]) // not the magic number: the image would not be an ELF
	for i := range l.phnum {
		add(l.phoff+i*56, phdrFields)
	}
	for i := range l.secs {
		add(l.shoff+i*64, shdrFields)
	}
	return fs
}

// structuredBytes are the offsets of the contents of l's sections that a
// loader parses: symbol tables, relocations, notes and CUDA's own sections
// (sh_type 0x70000000 and up: .nv.info, .nv.callgraph, …).
func (l *elfLayout) structuredBytes() []int {
	var at []int
	for _, s := range l.secs {
		if !s.hasContents || !(s.typ == 2 || s.typ == 4 || s.typ == 7 || s.typ == 9 || s.typ == 11 || s.typ >= 0x70000000) {
			continue
		}
		for i := range s.size {
			at = append(at, s.off+i)
		}
	}
	return at
}

// describe names the field of ELF b (whose layout is l) that byte off lies
// in, with its value in b.
func (l *elfLayout) describe(b []byte, off int) (string, field) {
	in := func(fs []field, base int) (field, bool) {
		for _, f := range fs {
			if off >= base+f.off && off < base+f.off+f.len {
				return field{f.name, base + f.off, f.len}, true
			}
		}
		return field{}, false
	}
	if off < 64 {
		f, _ := in(ehdrFields, 0)
		return "ELF header " + f.name, f
	}
	if off >= l.phoff && off < l.phoff+l.phnum*56 {
		i := (off - l.phoff) / 56
		f, _ := in(phdrFields, l.phoff+i*56)
		return fmt.Sprintf("ELF program header %d %s", i, f.name), f
	}
	if off >= l.shoff && off < l.shoff+len(l.secs)*64 {
		i := (off - l.shoff) / 64
		f, _ := in(shdrFields, l.shoff+i*64)
		return fmt.Sprintf("ELF section %d (%s) header %s", i, l.secs[i].name, f.name), f
	}
	for i, s := range l.secs {
		if !s.hasContents || off < s.off || off >= s.off+s.size {
			continue
		}
		rel := off - s.off
		what := fmt.Sprintf("ELF section %d (%s, type 0x%x) contents +%d", i, s.name, s.typ, rel)
		switch {
		case (s.typ == 2 || s.typ == 11) && s.entsize == 24:
			f, _ := in(symFields, s.off+rel/24*24)
			return fmt.Sprintf("%s: symbol %d %s", what, rel/24, f.name), f
		case (s.typ == 9 && s.entsize == 16) || (s.typ == 4 && s.entsize == 24):
			f, _ := in(relFields, s.off+rel/s.entsize*s.entsize)
			return fmt.Sprintf("%s: relocation %d %s", what, rel/s.entsize, f.name), f
		}
		return what, field{"byte", off, 1}
	}
	return "ELF padding between sections", field{"byte", off, 1}
}

// fatLayout is where a fatbin's header and entries lie.
type fatLayout struct {
	entries []fatEntryAt
}

// fatEntryAt is one entry of a fatbin.
type fatEntryAt struct {
	off, hsize, psize int
	kind              uint16
	compressed        bool
	elf               *elfLayout // an uncompressed ELF payload's layout
}

// readFatbin reads b's layout (b is a fatbin the check accepted).
func readFatbin(b []byte) *fatLayout {
	le := binary.LittleEndian
	l := &fatLayout{}
	hsize := int(le.Uint16(b[6:]))
	end := hsize + int(le.Uint64(b[8:]))
	for off := hsize; off+64 <= end; {
		e := fatEntryAt{off: off, kind: le.Uint16(b[off:]), hsize: int(le.Uint32(b[off+4:])), psize: int(le.Uint64(b[off+8:]))}
		e.compressed = le.Uint64(b[off+40:])&(0x2000|0x8000) != 0
		p := b[off+e.hsize : off+e.hsize+e.psize]
		if e.kind == 2 && !e.compressed && len(p) >= 64 && string(p[:4]) == "\x7fELF" {
			e.elf = readELF(p)
		}
		l.entries = append(l.entries, e)
		off += e.hsize + e.psize
	}
	return l
}

// headerBytes are the offsets of l's fatbin header and entry headers
// (with the options and names they hold).
func (l *fatLayout) headerBytes() []int {
	at := []int{}
	for i := range 16 {
		at = append(at, i)
	}
	for _, e := range l.entries {
		for i := range e.hsize {
			at = append(at, e.off+i)
		}
	}
	return at
}

// describe names the field of fatbin b (whose layout is l) that byte off
// lies in.
func (l *fatLayout) describe(b []byte, off int) (string, field) {
	if off < 16 {
		for _, f := range fatHeaderFields {
			if off >= f.off && off < f.off+f.len {
				return "fatbin header " + f.name, f
			}
		}
	}
	for i, e := range l.entries {
		if off < e.off || off >= e.off+e.hsize+e.psize {
			continue
		}
		rel := off - e.off
		if rel < e.hsize {
			for _, f := range fatEntryFields {
				if rel >= f.off && rel < f.off+f.len {
					return fmt.Sprintf("fatbin entry %d (kind %d) header %s", i, e.kind, f.name), field{f.name, e.off + f.off, f.len}
				}
			}
			return fmt.Sprintf("fatbin entry %d (kind %d) header +%d (options or name)", i, e.kind, rel), field{"byte", off, 1}
		}
		if e.elf != nil {
			p := b[e.off+e.hsize : e.off+e.hsize+e.psize]
			what, f := e.elf.describe(p, rel-e.hsize)
			f.off += e.off + e.hsize
			return fmt.Sprintf("fatbin entry %d payload: %s", i, what), f
		}
		how := "payload"
		if e.compressed {
			how = "compressed payload"
		}
		return fmt.Sprintf("fatbin entry %d (kind %d) %s +%d", i, e.kind, how, rel-e.hsize), field{"byte", off, 1}
	}
	return "past the fatbin's entries", field{"byte", off, 1}
}
