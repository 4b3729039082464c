package driver

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// e_flags of real CUBINs: ptxas's for sm_80 with ABI version 7
// (EF_CUDA_TEXMODE_UNIFIED | EF_CUDA_64BIT_ADDRESS | EF_CUDA_SM80 |
// EF_CUDA_VIRTUAL_SM(EF_CUDA_SM80)), and NVRTC 13.0's with ABI version 8
// (OS ABI 0x41).
const (
	testFlagsV1      = 0x00500550
	testFlagsV2SM90  = 0x06005a04
	testFlagsV2SM100 = 0x06006402
)

// withHeader is cubinLike with the given OS ABI, ABI version and e_flags.
func withHeader(osabi, abiVersion byte, flags uint32) []byte {
	b := cubinLike().clone()
	b[7], b[8] = osabi, abiVersion
	imgLE.PutUint32(b[48:], flags)
	return b
}

func TestImageAcceptsCUDAHeaders(t *testing.T) {
	for _, c := range []struct {
		osabi, abi byte
		flags      uint32
	}{
		{0x33, 7, testFlagsV1},
		{0x33, 7, 0x00000d5a},             // sm_90a: 64-bit, accelerators, no texture mode, no virtual SM
		{0x33, 7, 0x005a1f5a &^ 0x200},    // every V1 flag but the second texture mode
		{0x33, 7, 0x00230432},             // sm_50 code from compute_35
		{0x29, 8, testFlagsV2SM90},        // CUDA 13, sm_90
		{0x29, 8, testFlagsV2SM100},       // CUDA 13, sm_100a
		{0x29, 8, 0x06007902},             // CUDA 13, sm_121a
		{0x29, 8, 0x0000780e},             // every known V2 flag
		{0x33, 8, testFlagsV2SM90},        // the OS ABI does not choose the layout
		{0x41, 8, 0x0f646e08 &^ 0x6e0000}, // high bits 0x0f, no virtual SM
	} {
		b := withHeader(c.osabi, c.abi, c.flags)
		assert.NoError(t, checkELF(b, "the image"), "OS ABI 0x%02x, ABI version %d, flags 0x%08x", c.osabi, c.abi, c.flags)
	}
	b := cubinLike().clone()
	imgLE.PutUint16(b[16:], etRel)
	assert.NoError(t, checkELF(b, "the image"), "a relocatable CUBIN")
}

// TestImageRefusesUnknownCUDAHeaders: fields libcuda trusts are checked
// against the known encodings. 0x06005a05 is the e_flags that crashed
// libcuda (driver 580) in cuModuleLoadDataEx.
func TestImageRefusesUnknownCUDAHeaders(t *testing.T) {
	cases := []struct {
		name, msg  string
		osabi, abi byte
		flags      uint32
	}{
		{"OS ABI", "ELF OS ABI 0x00 is not CUDA's", 0, 7, testFlagsV1},
		{"OS ABI flipped", "ELF OS ABI 0x32", 0x32, 7, testFlagsV1},
		{"ABI version 0", "ELF ABI version 0 is not one CUDA uses", 0x33, 0, testFlagsV1},
		{"ABI version 9", "ELF ABI version 9", 0x33, 9, testFlagsV1},
		{"V2 flag bit 0 (crashed libcuda)", "ELF flags 0x06005a05 (CUDA ABI version 8): unknown flags 0x01", 0x29, 8, 0x06005a05},
		{"V2 flag 0x10", "unknown flags 0x10", 0x29, 8, testFlagsV2SM90 | 0x10},
		{"V2 SM 91", "the SM, 91, is not an architecture", 0x29, 8, 0x06005b04},
		{"V2 SM 0", "the SM, 0,", 0x29, 8, 0x06000004},
		{"V2 virtual SM", "the virtual SM, 1, is not a known virtual architecture", 0x29, 8, testFlagsV2SM90 | 0x10000},
		{"V2 layout read as V1", "(CUDA ABI version 7): the SM, 4,", 0x33, 7, testFlagsV2SM90},
		{"V1 layout read as V2", "(CUDA ABI version 8): unknown flags 0x50", 0x29, 8, testFlagsV1},
		{"V1 SM 81", "the SM, 81,", 0x33, 7, testFlagsV1 ^ 1},
		{"V1 SM 20", "the SM, 20,", 0x33, 7, 0x00140514},
		{"V1 unknown flag", "unknown flags 0x2000", 0x33, 7, testFlagsV1 | 0x2000},
		{"V1 32-bit", "32-bit addresses", 0x33, 7, testFlagsV1 &^ 0x400},
		{"V1 both texture modes", "both texture modes", 0x33, 7, testFlagsV1 | 0x200},
		{"V1 virtual SM", "the virtual SM, 81,", 0x33, 7, testFlagsV1 ^ 0x10000},
		{"V1 high bits", "unknown bits 0x01000000", 0x33, 7, testFlagsV1 | 0x01000000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := withHeader(c.osabi, c.abi, c.flags)
			_, err := checkImage(b)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.msg)
		})
	}
	for _, typ := range []uint16{0, 3, 4, 0xfe00} {
		b := cubinLike().clone()
		imgLE.PutUint16(b[16:], typ)
		assert.ErrorContains(t, checkELF(b, "the image"), "CUDA device code is relocatable", "e_type %d", typ)
	}
}

// TestImageEveryFlagBitFlipOfACUDA13Cubin: of the 32 single-bit changes
// of CUDA 13's sm_90 e_flags, only those to known flags, to another known
// SM and to the high byte pass the check.
func TestImageEveryFlagBitFlipOfACUDA13Cubin(t *testing.T) {
	var passed []uint32
	for bit := range 32 {
		flags := uint32(testFlagsV2SM90) ^ 1<<bit
		if checkELF(withHeader(0x41, 8, flags), "the image") == nil {
			passed = append(passed, flags)
		}
	}
	// Flags 0x2, 0x4, 0x8; SM 90 → 88 (bit 9); the 8 bits of the top byte.
	assert.Equal(t, []uint32{
		0x06005a06, 0x06005a00, 0x06005a0c, 0x06005804,
		0x07005a04, 0x04005a04, 0x02005a04, 0x0e005a04, 0x16005a04, 0x26005a04, 0x46005a04, 0x86005a04,
	}, passed)
}

// The notes of NVRTC 13.0's sm_90 CUBIN: .note.nv.tkinfo and
// .note.nv.cuinfo.
const (
	testTKInfo = "0c0000008c000000d00700004e564944494120436f727000020000000000000001000000070000003600000066000000007074786173004375646120636f6d70696c6174696f6e20746f6f6c732c2072656c656173652031332e302c205631332e302e3838004275696c642073797374656d206d75737420646566696e6520544f4f4c535f56455253494f4e5f455854454e444544002d6172636820736d5f3930200000"
	testCUInfo = "0c00000008000000e80300004e564944494120436f72700002005a0082000000"
)

// withNotes is an ELF with NVIDIA's two notes, as sections 2 and 3.
func withNotes(t *testing.T) testELF {
	tk, err := hex.DecodeString(testTKInfo)
	require.NoError(t, err)
	cu, err := hex.DecodeString(testCUInfo)
	require.NoError(t, err)
	return buildELF([]testSection{
		{name: ".note.nv.tkinfo", typ: shtNote, data: tk},
		{name: ".note.nv.cuinfo", typ: shtNote, data: cu, link: 2},
	}, nil)
}

// TestImageNotes: a shifted or damaged note was read past its end by
// libcuda (driver 580): notes must fit their section, and NVIDIA's
// toolkit note's strings its description.
func TestImageNotes(t *testing.T) {
	e := withNotes(t)
	require.NoError(t, checkELF(e.b, "the image"))
	tk, cu := e.secOff[2], e.secOff[3]
	cases := []struct {
		name, msg string
		damage    func(b []byte)
	}{
		{"name size", "the note at offset 0 (name 268 bytes, description 140) runs past", func(b []byte) { b[tk+1] = 1 }},
		{"description size", "the note at offset 0 (name 12 bytes, description 396) runs past", func(b []byte) { b[tk+5] = 1 }},
		{"a cut header", "a note header at offset 0 runs past the section's 8 bytes", func(b []byte) { imgLE.PutUint64(b[e.shdr(3)+32:], 8) }},
		{"a string offset", "string 5 at offset 358 is not a NUL-terminated string inside its 116 bytes", func(b []byte) { b[tk+12+12+20+1] = 1 }},
		{"a string without NUL", "string 5 at offset 102 is not a NUL-terminated string", func(b []byte) {
			for i := tk + 12 + 12 + 24 + 102; i < tk+12+12+140; i++ {
				b[i] = 'x'
			}
		}},
		{"a short toolkit note", "NVIDIA's toolkit note has 20 bytes", func(b []byte) { b[tk+4] = 20 }},
		{"a short CUDA note", "NVIDIA's CUDA note has 4 bytes (want 8)", func(b []byte) { b[cu+4] = 4 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := e.clone()
			c.damage(b)
			assert.ErrorContains(t, checkELF(b, "the image"), c.msg)
		})
	}
	// Another owner's note, in a section of its own, is only sized.
	tkNote, err := hex.DecodeString(testTKInfo)
	require.NoError(t, err)
	tkNote[12] = 'M'
	tkNote[12+12+4] = 0xff
	other := buildELF([]testSection{{name: ".note.other", typ: shtNote, data: tkNote}}, nil)
	assert.NoError(t, checkELF(other.b, "the image"))
}

// TestImageNVIDIANoteSections: libcuda reads .note.nv.tkinfo and
// .note.nv.cuinfo by their section names, trusting what lies there: a
// toolkit note whose first 15 bytes were scrambled (its sizes still
// inside the section, its name no longer NVIDIA's) crashed it. Such a
// section must hold NVIDIA's notes of its type only: one, or several as
// nvJitLink writes (one per linked input and its own).
func TestImageNVIDIANoteSections(t *testing.T) {
	e := withNotes(t)
	tk, cu := e.secOff[2], e.secOff[3]
	cases := []struct {
		name, msg string
		damage    func(b []byte)
	}{
		{"the toolkit note renamed", `named "MVIDIA Corp\x00", of type 2000: the section holds NVIDIA's notes of type 2000 only`, func(b []byte) { b[tk+12] = 'M' }},
		{"the toolkit note's type", "of type 2001: the section holds NVIDIA's notes of type 2000 only", func(b []byte) { b[tk+8] = 0xd1 }},
		{"the CUDA note's type", "of type 2000: the section holds NVIDIA's notes of type 1000 only", func(b []byte) { imgLE.PutUint32(b[cu+8:], 2000) }},
		{"a shorter name", `named "NVIDIA Co", of type 2000`, func(b []byte) { b[tk] = 9 }},
		{"a scrambled start", "the section holds NVIDIA's notes", func(b []byte) {
			// the sizes stay inside the section: name 4 bytes, description 8
			copy(b[tk:], []byte{4, 0, 0, 0, 8, 0, 0, 0, 0x37, 0x13, 0, 0, 'a', 'b', 'c'})
		}},
		{"the CUDA note's architecture", "NVIDIA's CUDA note: the virtual SM, 91, is not a known virtual architecture", func(b []byte) { b[cu+12+12+2] = 91 }},
		{"a note section's type", "(.note.nv.cuinfo): type 1, not a note section (7)", func(b []byte) { imgLE.PutUint32(b[e.shdr(3)+4:], 1) }},
		{"an empty toolkit section", "(.note.nv.tkinfo) holds no note", func(b []byte) { imgLE.PutUint64(b[e.shdr(2)+32:], 0) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := e.clone()
			c.damage(b)
			assert.ErrorContains(t, checkELF(b, "the image"), c.msg)
		})
	}
	cuNote, err := hex.DecodeString(testCUInfo)
	require.NoError(t, err)
	two := buildELF([]testSection{{name: ".note.nv.cuinfo", typ: shtNote, data: append(bytes.Clone(cuNote), cuNote...)}}, nil)
	assert.NoError(t, checkELF(two.b, "the image"), "two of NVIDIA's notes in their section (nvJitLink's output)")
	foreign := append(bytes.Clone(cuNote), cuNote...)
	foreign[len(cuNote)+12] = 'M'
	other := buildELF([]testSection{{name: ".note.nv.cuinfo", typ: shtNote, data: foreign}}, nil)
	assert.ErrorContains(t, checkELF(other.b, "the image"), `the note at offset 32: named "MVIDIA Corp\x00"`, "NVIDIA's note, then another")
	badArch := append(bytes.Clone(cuNote), cuNote...)
	badArch[len(cuNote)+12+12+2] = 91
	third := buildELF([]testSection{{name: ".note.nv.cuinfo", typ: shtNote, data: badArch}}, nil)
	assert.ErrorContains(t, checkELF(third.b, "the image"), "the note at offset 32: NVIDIA's CUDA note: the virtual SM, 91", "every note is checked")
}
