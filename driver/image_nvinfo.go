package driver

import (
	"encoding/binary"
	"fmt"
)

// CUDA's attribute sections: .nv.info (the global one, sh_info 0) and
// .nv.info.<kernel> (sh_info the kernel's code section), and .nv.compat,
// are lists of records: a format byte, an attribute byte and a 16-bit
// field. Formats 1 to 3 (EIFMT_NVAL, _BVAL, _HVAL: no value, a byte, a
// 16-bit value) are the 4 bytes alone; with format 4 (EIFMT_SVAL) the
// field is the size of the value that follows. libcuda follows what some
// values name: symbols, code offsets where it patches instructions, the
// kernel's parameters in its constant bank. The layouts below are those
// that NVIDIA's cuda-gdb sources, CuAssembler and other public CUBIN
// tools agree on, checked against CUBINs NVIDIA's tools wrote.
const (
	shtCUDACallgraph = 0x70000001 // .nv.callgraph: pairs of symbol indices, caller and callee
	shtCUDACompat    = 0x70000086 // .nv.compat: records, as .nv.info's

	eifmtSVAL = 4

	eiattrParamCbank     = 0x0a // symbol of the kernel's constant bank, u16 offset and u16 size of its parameters there
	eiattrExterns        = 0x0f // the symbols of the external functions the kernel calls
	eiattrFrameSize      = 0x11 // these four: a function's symbol and a value
	eiattrMinStackSize   = 0x12
	eiattrMaxStackSize   = 0x23
	eiattrRegcount       = 0x2f
	eiattrKparamInfo     = 0x17 // one parameter: index, ordinal, offset, and size in bits 18-31 of a flags word
	eiattrCbankParamSize = 0x19 // the size of the kernel's parameters (a 16-bit value)

	// callgraphSentinel and above are callgraph entries that name no
	// symbol (ptxas writes 0, -1 … 0, -4 first).
	callgraphSentinel = 0xfffffffc
)

// eiattrCodeOffsets are the attributes whose value is a list of byte
// offsets of instructions in the kernel's code, which libcuda may patch:
// EXIT, S2R_CTAID, LD_CACHEMOD, ATOM_SYS, COOP_GROUP, INT_WARP_WIDE,
// SYSCALL, SW_WAR_MEMBAR_SYS and IGNOREOOB_CP_ASYNC_BULK instructions;
// and JUMPTABLE_RELOCS and ATOMF16_EMUL_INSTR_OFFSETS, whose layout no
// public source gives, read as such lists (none in the corpus; a
// parameter's record whose attribute became JUMPTABLE_RELOCS crashed
// libcuda).
var eiattrCodeOffsets = [256]bool{0x03: true, 0x2d: true, 0x1c: true, 0x1d: true, 0x25: true, 0x27: true, 0x28: true, 0x31: true, 0x46: true, 0x47: true, 0x65: true}

// eiattrSymbolFirst are the attributes whose value begins with a function's
// symbol index.
var eiattrSymbolFirst = [256]bool{eiattrFrameSize: true, eiattrMinStackSize: true, eiattrMaxStackSize: true, eiattrRegcount: true}

// symtabFor is the symbol table whose indices a section linked to section
// link names: link when that is a symbol table; else (older CUBINs link
// their global .nv.info to none) the image's first symbol table; -1 when
// the image has none.
func (c *elfChecker) symtabFor(link uint32) int {
	if uint64(link) < uint64(len(c.secs)) && c.secs[link].typ == shtSymtab {
		return int(link)
	}
	for j := range c.secs {
		if c.secs[j].typ == shtSymtab {
			return j
		}
	}
	return -1
}

// symbolCount is the number of symbols of symbol table t (0 for -1).
func (c *elfChecker) symbolCount(t int) uint64 {
	if t < 0 {
		return 0
	}
	return c.secs[t].nsym
}

// instrSize is the size of an instruction of the image's architecture:
// 16 bytes from Volta (sm_70) on, 8 before.
func (c *elfChecker) instrSize() uint64 {
	if c.sm >= 70 {
		return 16
	}
	return 8
}

// records walks the records of attribute section i, calling f with each
// record's offset, format, attribute, 16-bit field and value (the bytes
// after the header of an EIFMT_SVAL record, else nil).
func (c *elfChecker) records(i int, what string, f func(off int, format, attr byte, field uint16, val []byte) error) error {
	le := binary.LittleEndian
	d := c.data(i)
	for off := 0; off < len(d); {
		if len(d)-off < 4 {
			return fmt.Errorf("ELF section %d (%s): a record at offset %d runs past the section's %d bytes", i, what, off, len(d))
		}
		format, attr, field := d[off], d[off+1], le.Uint16(d[off+2:])
		var val []byte
		switch format {
		case 1, 2, 3:
		case eifmtSVAL:
			if int(field) > len(d)-off-4 {
				return fmt.Errorf("ELF section %d (%s): the record at offset %d holds %d bytes, past the section's %d", i, what, off, field, len(d))
			}
			val = d[off+4 : off+4+int(field)]
		default:
			// The walk cannot go on (the record's size is unknown), and
			// libcuda's would go on where this one cannot follow it.
			return fmt.Errorf("ELF section %d (%s): the record at offset %d has format %d (CUDA's are 1 to 4)", i, what, off, format)
		}
		if err := f(off, format, attr, field, val); err != nil {
			return fmt.Errorf("ELF section %d (%s): the record at offset %d (attribute 0x%02x): %w", i, what, off, attr, err)
		}
		off += 4 + len(val)
	}
	return nil
}

// nvInfo checks .nv.info section i: its records fit in it and have known
// formats; a function attribute's symbol is one of the section's symbol
// table (symtabFor sh_link); in a kernel's section (sh_info its code), instruction
// offsets lie on instructions of that code, the parameters' constant bank
// is a symbol whose section holds them, external functions are symbols,
// and every parameter lies inside the parameters' size.
func (c *elfChecker) nvInfo(i int) error {
	le := binary.LittleEndian
	s := c.secs[i]
	symtab := c.symtabFor(s.link)
	nsym := c.symbolCount(symtab)
	paramSize := -1
	type param struct{ off, size uint64 }
	var params []param
	err := c.records(i, ".nv.info", func(off int, format, attr byte, field uint16, val []byte) error {
		switch {
		case format == 3 && attr == eiattrCbankParamSize:
			paramSize = int(field)
		case format != eifmtSVAL:
		case eiattrSymbolFirst[attr] && len(val) >= 4:
			if sym := uint64(le.Uint32(val)); sym >= nsym {
				return fmt.Errorf("names symbol %d, but section %d has %d symbols", sym, symtab, nsym)
			}
		case eiattrCodeOffsets[attr]:
			return c.codeOffsets(s, val)
		case attr == eiattrParamCbank:
			return c.paramCbank(symtab, val)
		case attr == eiattrExterns:
			if len(val)%4 != 0 {
				return fmt.Errorf("a list of symbols of %d bytes", len(val))
			}
			for k := 0; k < len(val); k += 4 {
				if sym := uint64(le.Uint32(val[k:])); sym >= nsym {
					return fmt.Errorf("names symbol %d, but section %d has %d symbols", sym, symtab, nsym)
				}
			}
		case attr == eiattrKparamInfo:
			if len(val) != 12 {
				return fmt.Errorf("a parameter's record of %d bytes (want 12)", len(val))
			}
			params = append(params, param{uint64(le.Uint16(val[6:])), uint64(le.Uint32(val[8:]) >> 18)})
		}
		return nil
	})
	if err != nil {
		return err
	}
	if paramSize >= 0 {
		for _, p := range params {
			if p.off+p.size > uint64(paramSize) {
				return fmt.Errorf("ELF section %d (.nv.info): a parameter of %d bytes at offset %d, past the parameters' %d bytes", i, p.size, p.off, paramSize)
			}
		}
	}
	return nil
}

// codeOffsets checks a list of instruction offsets in the code of the
// kernel whose attributes section s holds.
func (c *elfChecker) codeOffsets(s elfSection, val []byte) error {
	if uint64(s.info) >= uint64(len(c.secs)) || s.info == 0 || c.secs[s.info].flags&shfExecInstr == 0 {
		return fmt.Errorf("instruction offsets, but section %d (sh_info) is not code", s.info)
	}
	code := c.secs[s.info]
	if len(val)%4 != 0 {
		return fmt.Errorf("a list of instruction offsets of %d bytes", len(val))
	}
	n := c.instrSize()
	for k := 0; k < len(val); k += 4 {
		if o := uint64(binary.LittleEndian.Uint32(val[k:])); o%n != 0 || code.size < n || o > code.size-n {
			return fmt.Errorf("instruction offset %d is not on a %d-byte instruction of section %d's %d bytes", o, n, s.info, code.size)
		}
	}
	return nil
}

// paramCbank checks the location of the kernel's parameters: a symbol of
// symbol table symtab, in a section that holds the offset and size given.
func (c *elfChecker) paramCbank(symtab int, val []byte) error {
	le := binary.LittleEndian
	if len(val) != 8 {
		return fmt.Errorf("the parameters' location in %d bytes (want 8)", len(val))
	}
	sym, off, size := uint64(le.Uint32(val)), uint64(le.Uint16(val[4:])), uint64(le.Uint16(val[6:]))
	if n := c.symbolCount(symtab); sym >= n {
		return fmt.Errorf("names symbol %d, but section %d has %d symbols", sym, symtab, n)
	}
	entry := c.data(symtab)[sym*elfSymSize:]
	shndx := uint64(le.Uint16(entry[6:]))
	if shndx == 0 || shndx >= uint64(len(c.secs)) {
		return fmt.Errorf("the parameters' symbol %d is in no section (%d)", sym, shndx)
	}
	if bank := c.secs[shndx].size; off > bank || size > bank-off {
		return fmt.Errorf("%d bytes of parameters at %d, past the %d bytes of section %d", size, off, bank, shndx)
	}
	return nil
}

// callgraph checks .nv.callgraph section i: pairs of symbol indices of
// its symbol table (sh_link; the image's first, when that is none), or
// ptxas's markers.
func (c *elfChecker) callgraph(i int) error {
	s := c.secs[i]
	d := c.data(i)
	if len(d)%8 != 0 {
		return fmt.Errorf("ELF section %d (.nv.callgraph): %d bytes, not whole pairs of 4-byte symbol indices", i, len(d))
	}
	symtab := c.symtabFor(s.link)
	nsym := c.symbolCount(symtab)
	for k := 0; k < len(d); k += 4 {
		if sym := binary.LittleEndian.Uint32(d[k:]); sym < callgraphSentinel && uint64(sym) >= nsym {
			return fmt.Errorf("ELF section %d (.nv.callgraph): entry %d names symbol %d, but section %d has %d symbols", i, k/4, sym, symtab, nsym)
		}
	}
	return nil
}

// compat checks .nv.compat section i: records, as .nv.info's.
func (c *elfChecker) compat(i int) error {
	return c.records(i, ".nv.compat", func(int, byte, byte, uint16, []byte) error { return nil })
}
