package driver

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
)

// What CUDA puts in an ELF header beyond the generic fields, checked
// strictly: libcuda trusts these fields, and on driver 580 a CUBIN whose
// e_flags had one unknown bit set (0x06005a05 for 0x06005a04) crashed the
// process inside cuModuleLoadDataEx. The layout is that of LLVM's
// BinaryFormat/ELF.h (EF_CUDA_*, ELFOSABI_CUDA*, ELFABIVERSION_CUDA_*),
// checked against the CUBINs NVRTC 13.0 writes for sm_75 … sm_121 (plain,
// -rdc, -G, -lineinfo, "a" and "f" variants).
//
// e_ident[EI_OSABI] is CUDA's: 0x33 (ELFOSABI_CUDA, with ABI version 7),
// 0x41 (what CUDA 13 writes, with ABI version 8), or 0x29 (LLVM's
// ELFOSABI_CUDA_V2). e_ident[EI_ABIVERSION] chooses the layout of e_flags:
//
//   - 7 (ELFABIVERSION_CUDA_V1), up to CUDA 12: the SM number
//     (major*10+minor, 90 for sm_90) in bits 0-7; in bits 8-12 the flags
//     0x100 unified texture mode, 0x200 independent texture mode (at most
//     one of the two), 0x400 64-bit addresses (required: CUDA device code
//     is 64-bit), 0x800 an architecture-specific variant (sm_90a), 0x1000 a
//     software flag; in bits 16-23 the virtual SM the code was compiled
//     from, or 0; bits 24-31 zero.
//   - 8 (ELFABIVERSION_CUDA_V2), CUDA 12.8 and later, for every
//     architecture in CUDA 13: the SM number in bits 8-15; flags in bits
//     0-7, of which NVRTC sets 0x4 (up to sm_90) or 0x2 (from sm_100), and
//     LLVM names 0x8 (an architecture-specific variant); 0x1 crashed
//     libcuda, so the others are refused; bits 16-23 a virtual SM or 0 (0
//     in NVRTC's); bits 24-31 a number, not flags (NVRTC writes 0x06,
//     0x09 with -lineinfo, 0x0e to 0x10 with -G), not checked.
//
// The SM number, and a virtual SM, must be an architecture that driver 580
// and its successors can load code for (cudaSMs). e_type is ET_REL (a
// relocatable CUBIN, -rdc) or ET_EXEC.
const (
	elfOSABICUDA    = 0x33
	elfOSABICUDAV2  = 0x29
	elfOSABICUDAAlt = 0x41

	elfABIVersionCUDAV1 = 7
	elfABIVersionCUDAV2 = 8

	etRel  = 1
	etExec = 2

	// ABI version 7's flags (bits 8-12).
	efCUDATexmodeUnified     = 0x100
	efCUDATexmodeIndependent = 0x200
	efCUDA64BitAddress       = 0x400
	efCUDAAcceleratorsV1     = 0x800
	efCUDASWFlagV2           = 0x1000
	efCUDAV1Flags            = efCUDATexmodeUnified | efCUDATexmodeIndependent | efCUDA64BitAddress | efCUDAAcceleratorsV1 | efCUDASWFlagV2

	// ABI version 8's flags (bits 0-7).
	efCUDAV2Flags = 0x2 | 0x4 | 0x8
)

// cudaSMs are the SM numbers of the architectures whose code a current
// driver can load (Maxwell to Blackwell): sm_50 … sm_121. 101 is what CUDA
// 12.8 and 12.9 called sm_110.
var cudaSMs = []uint32{50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 110, 120, 121}

// cudaVirtualSMs are the virtual SMs that code for cudaSMs may have been
// compiled from: those, and Fermi's and Kepler's (compute_35 PTX compiled
// for sm_50, say), but for Tegra K1's 32, one bit away from none.
var cudaVirtualSMs = append([]uint32{20, 21, 30, 35, 37}, cudaSMs...)

// checkCUDAHeader checks the CUDA-specific fields of ELF header b (64
// bytes or more, ELFCLASS64, little-endian, EM_CUDA): OS ABI, ABI version,
// e_type and e_flags, against the encodings above.
func checkCUDAHeader(b []byte) error {
	le := binary.LittleEndian
	switch osabi := b[7]; osabi {
	case elfOSABICUDA, elfOSABICUDAV2, elfOSABICUDAAlt:
	default:
		return fmt.Errorf("ELF OS ABI 0x%02x is not CUDA's (0x%02x, 0x%02x or 0x%02x)", osabi, elfOSABICUDA, elfOSABICUDAAlt, elfOSABICUDAV2)
	}
	switch t := le.Uint16(b[16:]); t {
	case etRel, etExec:
	default:
		return fmt.Errorf("ELF type %d: CUDA device code is relocatable (%d) or executable (%d)", t, etRel, etExec)
	}
	flags := le.Uint32(b[48:])
	switch v := b[8]; v {
	case elfABIVersionCUDAV1:
		return checkCUDAFlagsV1(flags)
	case elfABIVersionCUDAV2:
		return checkCUDAFlagsV2(flags)
	default:
		return fmt.Errorf("ELF ABI version %d is not one CUDA uses (%d or %d)", v, elfABIVersionCUDAV1, elfABIVersionCUDAV2)
	}
}

// cudaSM is the architecture of CUDA ELF header b, which checkCUDAHeader
// accepted: the SM number of its e_flags.
func cudaSM(b []byte) uint32 {
	flags := binary.LittleEndian.Uint32(b[48:])
	if b[8] == elfABIVersionCUDAV1 {
		return flags & 0xff
	}
	return flags >> 8 & 0xff
}

// checkCUDAFlagsV1 checks e_flags laid out as ABI version 7 lays them out.
func checkCUDAFlagsV1(flags uint32) error {
	bad := func(why string, args ...any) error {
		return fmt.Errorf("ELF flags 0x%08x (CUDA ABI version 7): %s", flags, fmt.Sprintf(why, args...))
	}
	if err := knownSM("the SM", flags&0xff); err != nil {
		return bad("%v", err)
	}
	if f := flags & 0xff00; f&^efCUDAV1Flags != 0 {
		return bad("unknown flags 0x%04x", f&^efCUDAV1Flags)
	}
	if flags&efCUDA64BitAddress == 0 {
		return bad("32-bit addresses (no 0x%x): CUDA device code is 64-bit", efCUDA64BitAddress)
	}
	if flags&(efCUDATexmodeUnified|efCUDATexmodeIndependent) == efCUDATexmodeUnified|efCUDATexmodeIndependent {
		return bad("both texture modes")
	}
	if err := knownVirtualSM(flags >> 16 & 0xff); err != nil {
		return bad("%v", err)
	}
	if flags>>24 != 0 {
		return bad("unknown bits 0x%08x", flags&0xff000000)
	}
	return nil
}

// checkCUDAFlagsV2 checks e_flags laid out as ABI version 8 lays them out.
func checkCUDAFlagsV2(flags uint32) error {
	bad := func(why string, args ...any) error {
		return fmt.Errorf("ELF flags 0x%08x (CUDA ABI version 8): %s", flags, fmt.Sprintf(why, args...))
	}
	if f := flags & 0xff; f&^efCUDAV2Flags != 0 {
		return bad("unknown flags 0x%02x", f&^efCUDAV2Flags)
	}
	if err := knownSM("the SM", flags>>8&0xff); err != nil {
		return bad("%v", err)
	}
	if err := knownVirtualSM(flags >> 16 & 0xff); err != nil {
		return bad("%v", err)
	}
	return nil
}

// knownSM reports an error unless sm is in cudaSMs; what names the field.
func knownSM(what string, sm uint32) error {
	if slices.Contains(cudaSMs, sm) {
		return nil
	}
	return fmt.Errorf("%s, %d, is not an architecture CUDA can load code for (sm_50 to sm_121)", what, sm)
}

// knownVirtualSM reports an error unless sm is 0 (not recorded) or in
// cudaVirtualSMs.
func knownVirtualSM(sm uint32) error {
	if sm == 0 || slices.Contains(cudaVirtualSMs, sm) {
		return nil
	}
	return fmt.Errorf("the virtual SM, %d, is not a known virtual architecture", sm)
}

// Section header fields and contents whose meaning is CUDA's, found to
// crash or hang libcuda when damaged (driver 580): a section index in
// sh_info out of range, a symbol index in .nv.info out of range, a note
// whose sizes or string offsets point past it.
const (
	shfExecInstr = 0x4

	nvNoteCUInfo = 1000 // .note.nv.cuinfo: version, virtual SM, CUDA version
	nvNoteTKInfo = 2000 // .note.nv.tkinfo: version, then offsets of 5 strings
)

// links checks section i's sh_link and sh_info, which libcuda follows:
// sh_link is a section (or 0); sh_info is a symbol table's first global
// symbol (at most its count), a code section's symbol (in its low 24 bits;
// ptxas keeps the register count in the top 8), or else a section (or 0).
// Relocation tables' sh_info was checked by relocations.
func (c *elfChecker) links(i int) error {
	if i == 0 {
		return nil
	}
	s := c.secs[i]
	n := uint64(len(c.secs))
	if uint64(s.link) >= n {
		return fmt.Errorf("ELF section %d: sh_link %d is not a section (the ELF has %d)", i, s.link, n)
	}
	switch {
	case s.typ == shtSymtab || s.typ == shtDynsym:
		if uint64(s.info) > s.nsym {
			return fmt.Errorf("ELF section %d: sh_info %d (the first global symbol) is past its %d symbols", i, s.info, s.nsym)
		}
	case s.typ == shtRel || s.typ == shtRela:
	case s.flags&shfExecInstr != 0:
		if sym := uint64(s.info & 0xffffff); sym >= c.symbolsIn(s.link) {
			return fmt.Errorf("ELF section %d (code): sh_info names symbol %d, but section %d has %d symbols", i, sym, s.link, c.symbolsIn(s.link))
		}
	default:
		if uint64(s.info) >= n {
			return fmt.Errorf("ELF section %d: sh_info %d is not a section (the ELF has %d)", i, s.info, n)
		}
	}
	return nil
}

// symbolsIn is the number of symbols of section i, 0 if it is not a
// symbol table.
func (c *elfChecker) symbolsIn(i uint32) uint64 {
	if uint64(i) >= uint64(len(c.secs)) {
		return 0
	}
	return c.secs[i].nsym
}

// NVIDIA's note sections are the note sections libcuda reads by name, each with
// the type of the notes NVIDIA's tools write in it (one from NVRTC and
// nvcc; several from nvJitLink, one per linked input and its own). libcuda finds them
// by their section's name, not by the notes' own names and types: a
// toolkit note whose header and name were scrambled (so that it no longer
// read as NVIDIA's, and went unchecked) crashed cuModuleLoadDataEx.
//
// nvNoteType returns the type of section i's notes if it is one of them,
// else 0; it compares the name in place (the check runs on every load).
func (c *elfChecker) nvNoteType(i int) uint32 {
	if c.names == nil {
		return 0
	}
	n := c.names[c.secs[i].name:]
	is := func(name string) bool {
		return len(n) > len(name) && n[len(name)] == 0 && string(n[:len(name)]) == name
	}
	switch {
	case is(".note.nv.tkinfo"):
		return nvNoteTKInfo
	case is(".note.nv.cuinfo"):
		return nvNoteCUInfo
	}
	return 0
}

// nvNoteName is the name of NVIDIA's notes.
const nvNoteName = "NVIDIA Corp\x00"

// notes checks note section i: each note's header, name and description
// lie inside it; NVIDIA's toolkit note (.note.nv.tkinfo) has its five
// string offsets inside its description, each string NUL-terminated there;
// NVIDIA's CUDA note (.note.nv.cuinfo) has 8 bytes or more and a known
// virtual architecture. A section named for one of NVIDIA's notes holds
// one or more of them, each with NVIDIA's name and that note's type.
func (c *elfChecker) notes(i int) error {
	le := binary.LittleEndian
	d := c.data(i)
	want := c.nvNoteType(i)
	named := want != 0
	seen := 0
	pad := func(n uint64) uint64 { return (n + 3) &^ 3 }
	for off := uint64(0); off < uint64(len(d)); {
		rest := uint64(len(d)) - off
		if rest < 12 {
			return fmt.Errorf("ELF section %d (notes): a note header at offset %d runs past the section's %d bytes", i, off, len(d))
		}
		namesz, descsz, typ := uint64(le.Uint32(d[off:])), uint64(le.Uint32(d[off+4:])), le.Uint32(d[off+8:])
		if namesz > rest-12 || descsz > rest-12-pad(namesz) || pad(namesz) > rest-12 {
			return fmt.Errorf("ELF section %d (notes): the note at offset %d (name %d bytes, description %d) runs past the section's %d bytes", i, off, namesz, descsz, len(d))
		}
		name := d[off+12 : off+12+namesz]
		desc := d[off+12+pad(namesz) : off+12+pad(namesz)+descsz]
		nv := string(name) == nvNoteName
		if named && (!nv || typ != want) {
			return fmt.Errorf("ELF section %d (%s), the note at offset %d: named %q, of type %d: the section holds NVIDIA's notes of type %d only",
				i, c.secName(i), off, name, typ, want)
		}
		seen++
		if nv {
			if err := nvNote(typ, desc); err != nil {
				return fmt.Errorf("ELF section %d, the note at offset %d: %w", i, off, err)
			}
		}
		off += 12 + pad(namesz) + pad(descsz)
	}
	if named && seen == 0 {
		return fmt.Errorf("ELF section %d (%s) holds no note", i, c.secName(i))
	}
	return nil
}

// nvNote checks the description of an NVIDIA note of type typ.
func nvNote(typ uint32, desc []byte) error {
	switch typ {
	case nvNoteCUInfo:
		if len(desc) < 8 {
			return fmt.Errorf("NVIDIA's CUDA note has %d bytes (want 8)", len(desc))
		}
		if err := knownVirtualSM(uint32(binary.LittleEndian.Uint16(desc[2:]))); err != nil {
			return fmt.Errorf("NVIDIA's CUDA note: %w", err)
		}
	case nvNoteTKInfo:
		if len(desc) < 24 {
			return fmt.Errorf("NVIDIA's toolkit note has %d bytes (want 24 and its strings)", len(desc))
		}
		strs := desc[24:]
		for k := 1; k <= 5; k++ {
			o := uint64(binary.LittleEndian.Uint32(desc[4*k:]))
			if o >= uint64(len(strs)) || bytes.IndexByte(strs[o:], 0) < 0 {
				return fmt.Errorf("NVIDIA's toolkit note: string %d at offset %d is not a NUL-terminated string inside its %d bytes", k, o, len(strs))
			}
		}
	}
	return nil
}

// constantBanks are the constant banks NVIDIA's tools name sections for
// (.nv.constant0.<kernel> for parameters, .nv.constant2, 3 and 4): all
// that the corpus of NVRTC's, nvJitLink's and nvcc's CUBINs holds, for
// every architecture. libcuda picks a constant section's bank by its name:
// a .nv.constant4 renamed .nv.constant1 crashed it.
var constantBanks = [10]bool{0: true, 2: true, 3: true, 4: true}

// constantBank checks that section i, if its name begins ".nv.constant",
// names one of constantBanks: ".nv.constant", a digit, then nothing or a
// dot and the rest.
func (c *elfChecker) constantBank(i int) error {
	const prefix = ".nv.constant"
	if c.names == nil {
		return nil
	}
	n := c.names[c.secs[i].name:]
	if len(n) < len(prefix) || string(n[:len(prefix)]) != prefix {
		return nil
	}
	r := n[len(prefix):]
	if len(r) >= 2 && r[0] >= '0' && r[0] <= '9' && constantBanks[r[0]-'0'] && (r[1] == 0 || r[1] == '.') {
		return nil
	}
	return fmt.Errorf("ELF section %d (%s): not a constant bank NVIDIA's tools name a section for (0, 2, 3 and 4)", i, c.secName(i))
}
