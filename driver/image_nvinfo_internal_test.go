package driver

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Section indices of kernelInfoELF.
const (
	kiStrtab = 2 + iota
	kiSymtab
	kiInfo
	kiKernelInfo
	kiText
	kiConst
	kiCallgraph
	kiCompat
	kiRela
)

// record is one .nv.info record: format, attribute, the 16-bit field and,
// for format 4, the value (the field is then its size).
func record(format, attr byte, field uint16, val ...byte) []byte {
	if format == eifmtSVAL {
		field = uint16(len(val))
	}
	r := []byte{format, attr, byte(field), byte(field >> 8)}
	return append(r, val...)
}

// u32s is the little-endian bytes of vs.
func u32s(vs ...uint32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		imgLE.PutUint32(b[4*i:], v)
	}
	return b
}

// kernelInfoELF is a CUBIN-like ELF (sm_80: 16-byte instructions) with a
// kernel k whose .nv.info.k holds the records libcuda follows: its
// parameters' constant bank, the parameters, instruction offsets and
// external functions; a call graph, compatibility records and a
// relocation in k's code.
func kernelInfoELF() testELF {
	sym := func(name uint32, info byte, shndx uint16, size uint64) []byte {
		s := make([]byte, elfSymSize)
		imgLE.PutUint32(s, name)
		s[4] = info
		imgLE.PutUint16(s[6:], shndx)
		imgLE.PutUint64(s[16:], size)
		return s
	}
	syms := bytes.Join([][]byte{sym(0, 0, 0, 0), sym(0, 0x03, kiConst, 0), sym(1, 0x12, kiText, 64), sym(3, 0x12, 0, 0)}, nil)
	kinfo := bytes.Join([][]byte{
		record(4, eiattrParamCbank, 0, append(u32s(1), 0x60, 0x01, 16, 0)...), // symbol 1 (.nv.constant0.k), 16 bytes at 0x160
		record(3, eiattrCbankParamSize, 16),
		record(4, eiattrKparamInfo, 0, append(u32s(0, 0), u32s(8<<18|0x1f<<12|3)...)...),                             // ordinal 0 at 0, 8 bytes
		record(4, eiattrKparamInfo, 0, append(u32s(0), append([]byte{1, 0, 8, 0}, u32s(8<<18|0x1f<<12|3)...)...)...), // ordinal 1 at 8
		record(4, 0x1c, 0, u32s(0x10, 0x30)...),                                                                      // EXIT instructions
		record(4, eiattrExterns, 0, u32s(3)...),
		record(1, 0x04, 0), // CTAIDZ_USED
	}, nil)
	rela := make([]byte, elfRelaSize)
	imgLE.PutUint64(rela, 0x20)
	imgLE.PutUint64(rela[8:], 3<<32|0x38) // R_CUDA_ABS32_LO_32 against "ext"
	return buildELF([]testSection{
		{name: ".strtab", typ: shtStrtab, data: []byte("\x00k\x00ext\x00")},
		{name: ".symtab", typ: shtSymtab, data: syms, link: kiStrtab, info: 2, entsize: elfSymSize},
		{name: ".nv.info", typ: shtCUDAInfo, data: record(4, eiattrRegcount, 0, u32s(2, 24)...), link: kiSymtab},
		{name: ".nv.info.k", typ: shtCUDAInfo, data: kinfo, link: kiSymtab, info: kiText},
		{name: ".text.k", typ: 1, flags: shfExecInstr | 0x2, data: bytes.Repeat([]byte{0xab}, 64), link: kiSymtab, info: 24<<24 | 2},
		{name: ".nv.constant0.k", typ: 1, data: make([]byte, 0x170)},
		{name: ".nv.callgraph", typ: shtCUDACallgraph, data: u32s(0, 0xffffffff, 0, 0xfffffffe, 2, 3), link: kiSymtab},
		{name: ".nv.compat", typ: shtCUDACompat, data: append(record(2, 2, 1), record(3, 7, 0x0101)...)},
		{name: ".rela.text.k", typ: shtRela, data: rela, link: kiSymtab, info: kiText, entsize: elfRelaSize},
	}, nil)
}

// TestImageKernelInfo: the values of .nv.info records that libcuda
// follows (symbols, instruction offsets in the kernel's code, the
// parameters in their constant bank), the call graph's symbols, the
// compatibility records, and relocations' types and reach are checked.
func TestImageKernelInfo(t *testing.T) {
	e := kernelInfoELF()
	require.NoError(t, checkELF(e.b, "the image"))
	ki := e.secOff[kiKernelInfo]
	at := func(rec int) uint64 { // the offset of record rec of .nv.info.k
		off := ki
		for range rec {
			off += 4
			if e.b[off-4] == eifmtSVAL {
				off += uint64(imgLE.Uint16(e.b[off-2:]))
			}
		}
		return off
	}
	cases := []struct {
		name, msg string
		damage    func(b []byte)
	}{
		{"parameters' bank symbol", "(attribute 0x0a): names symbol 9, but section 3 has 4 symbols", func(b []byte) { b[at(0)+4] = 9 }},
		{"parameters past their bank", "16 bytes of parameters at 368, past the 368 bytes of section 7", func(b []byte) { b[at(0)+8] = 0x70 }},
		{"parameters' bank record size", "the parameters' location in 6 bytes (want 8)", func(b []byte) { b[at(0)+2] = 6; copy(b[at(0)+10:], record(1, 0, 0)) }},
		{"a bank symbol in no section", "the parameters' symbol 3 is in no section (0)", func(b []byte) { b[at(0)+4] = 3 }},
		{"a parameter past the parameters", "a parameter of 8 bytes at offset 12, past the parameters' 16 bytes", func(b []byte) { b[at(3)+4+6] = 12 }},
		{"a parameter's size", "a parameter of 16 bytes at offset 8", func(b []byte) { imgLE.PutUint32(b[at(3)+4+8:], 16<<18|0x1f<<12|3) }},
		{"the parameters' size", "a parameter of 8 bytes at offset 8, past the parameters' 12 bytes", func(b []byte) { b[at(1)+2] = 12 }},
		{"a parameter's record size", "a parameter's record of 8 bytes (want 12)", func(b []byte) { b[at(2)+2] = 8; copy(b[at(2)+12:], record(1, 0, 0)) }},
		{"an exit past the code", "instruction offset 64 is not on a 16-byte instruction of section 6's 64 bytes", func(b []byte) { b[at(4)+8] = 64 }},
		{"an exit between instructions", "instruction offset 24 is not on a 16-byte instruction", func(b []byte) { b[at(4)+4] = 24 }},
		{"an exit far away", "instruction offset 1048592 is not on", func(b []byte) { b[at(4)+6] = 0x10 }},
		{"instruction offsets of no code", "instruction offsets, but section 7 (sh_info) is not code", func(b []byte) { imgLE.PutUint32(b[e.shdr(kiKernelInfo)+44:], kiConst) }},
		{"a ragged offset list", "a list of instruction offsets of 7 bytes", func(b []byte) { b[at(4)+2] = 7; b[at(4)+11] = 1 }},
		{"a parameter's record turned jump-table relocations", "(attribute 0x03): instruction offset 524289 is not on", func(b []byte) { b[at(3)+1] = 0x03 }},
		{"a parameter's record turned ATOMF16 emulation offsets", "(attribute 0x2d): instruction offset 524289 is not on", func(b []byte) { b[at(3)+1] = 0x2d }},
		{"constant bank 1", "(.nv.constant1.k): not a constant bank NVIDIA's tools name a section for", func(b []byte) {
			i := bytes.Index(b, []byte(".nv.constant0"))
			b[i+len(".nv.constant")] = '1'
		}},
		{"constant bank 5", "(.nv.constant5.k): not a constant bank", func(b []byte) {
			i := bytes.Index(b, []byte(".nv.constant0"))
			b[i+len(".nv.constant")] = '5'
		}},
		{"constant bank without a number", "(.nv.constantx.k): not a constant bank", func(b []byte) {
			i := bytes.Index(b, []byte(".nv.constant0"))
			b[i+len(".nv.constant")] = 'x'
		}},
		{"an external symbol", "(attribute 0x0f): names symbol 4, but section 3 has 4 symbols", func(b []byte) { b[at(5)+4] = 4 }},
		{"a callgraph symbol", "(.nv.callgraph): entry 4 names symbol 4, but section 3 has 4 symbols", func(b []byte) { b[e.secOff[kiCallgraph]+16] = 4 }},
		{"a callgraph marker", "entry 1 names symbol 4294967291", func(b []byte) { b[e.secOff[kiCallgraph]+4] = 0xfb }},
		{"a ragged callgraph", "(.nv.callgraph): 20 bytes, not whole pairs", func(b []byte) { imgLE.PutUint64(b[e.shdr(kiCallgraph)+32:], 20) }},
		{"a compat format", "(.nv.compat): the record at offset 4 has format 9", func(b []byte) { b[e.secOff[kiCompat]+4] = 9 }},
		{"a compat record past its section", "(.nv.compat): the record at offset 4 holds 4 bytes, past the section's 8", func(b []byte) {
			b[e.secOff[kiCompat]+4] = eifmtSVAL
			b[e.secOff[kiCompat]+6], b[e.secOff[kiCompat]+7] = 4, 0
		}},
		{"a relocation type", "relocation 0: type 0x74 is not one of CUDA's", func(b []byte) { b[e.secOff[kiRela]+8] = 0x74 }},
		{"a Mercury relocation type", "type 0x10040 is not one of CUDA's", func(b []byte) { imgLE.PutUint32(b[e.secOff[kiRela]+8:], 0x10040) }},
		{"a relocation between instruction words", "offset 36 does not leave the 8 bytes", func(b []byte) { b[e.secOff[kiRela]] = 0x24 }},
		{"a wide relocation at the end", "(type 0x43): offset 56 does not leave the 16 bytes", func(b []byte) {
			b[e.secOff[kiRela]] = 56
			b[e.secOff[kiRela]+8] = 0x43 // R_CUDA_INSTRUCTION128
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := e.clone()
			c.damage(b)
			assert.ErrorContains(t, checkELF(b, "the image"), c.msg)
		})
	}
	t.Run("a callgraph linked to no symbol table", func(t *testing.T) {
		b := e.clone()
		imgLE.PutUint32(b[e.shdr(kiCallgraph)+40:], 0)
		assert.NoError(t, checkELF(b, "the image"), "the image's symbol table")
		b[e.secOff[kiCallgraph]+16] = 4
		assert.ErrorContains(t, checkELF(b, "the image"), "entry 4 names symbol 4, but section 3 has 4 symbols")
	})
	t.Run("a Mercury relocation is not held to SASS's instruction words", func(t *testing.T) {
		b := e.clone()
		imgLE.PutUint32(b[e.secOff[kiRela]+8:], 0x10003) // R_MERCURY_ABS32
		b[e.secOff[kiRela]] = 60
		assert.NoError(t, checkELF(b, "the image"))
	})
	t.Run("a global .nv.info linked to no symbol table", func(t *testing.T) {
		// as older CUBINs have it: the image's symbol table is meant
		b := e.clone()
		imgLE.PutUint32(b[e.shdr(kiInfo)+40:], 0)
		assert.NoError(t, checkELF(b, "the image"))
		b[e.secOff[kiInfo]+4] = 4
		assert.ErrorContains(t, checkELF(b, "the image"), "(attribute 0x2f): names symbol 4, but section 3 has 4 symbols")
	})
	t.Run("a one-byte relocation on a section's last byte", func(t *testing.T) {
		b := e.clone()
		imgLE.PutUint32(b[e.shdr(kiRela)+44:], kiConst) // relocations for .nv.constant0.k (0x170 bytes)
		imgLE.PutUint64(b[e.secOff[kiRela]:], 0x16f)
		imgLE.PutUint64(b[e.secOff[kiRela]+8:], 3<<32|0x53) // R_CUDA_8_56
		assert.NoError(t, checkELF(b, "the image"))
		imgLE.PutUint64(b[e.secOff[kiRela]+8:], 3<<32|0x02) // R_CUDA_64 there
		assert.ErrorContains(t, checkELF(b, "the image"), "(type 0x2): offset 367 does not leave the 8 bytes it patches")
	})
	t.Run("accepted", func(t *testing.T) {
		b := e.clone()
		imgLE.PutUint32(b[e.secOff[kiRela]+8:], 0x1003d) // a Mercury relocation
		b[e.secOff[kiRela]] = 0x30                       // the last 16-byte instruction
		b[at(4)+8] = 0x30                                // an exit at the last instruction
		assert.NoError(t, checkELF(b, "the image"))
	})
}
