package driver

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testEntry is a fatbin entry for buildFatbin.
type testEntry struct {
	kind       uint16
	arch       uint32
	flags      uint64
	payload    []byte
	options    string // ptxas options, kept in the entry's header
	name       string // kept in the entry's header
	compressed uint32 // the compressed-size field
}

// buildFatbin lays out a fatbin as nvcc's fatbinary does: a 16-byte header,
// then each entry's header (64 bytes, more with options or a name) and its
// payload, padded to 8 bytes.
func buildFatbin(entries ...testEntry) []byte {
	var body []byte
	for _, e := range entries {
		h := make([]byte, fatbinEntryHeaderSize)
		var extra []byte
		if e.options != "" {
			imgLE.PutUint32(h[20:], fatbinEntryHeaderSize)
			opts := make([]byte, 8)
			imgLE.PutUint32(opts, fatbinEntryHeaderSize+8)
			imgLE.PutUint32(opts[4:], uint32(len(e.options)))
			extra = append(append(extra, opts...), e.options...)
		}
		if e.name != "" {
			imgLE.PutUint32(h[32:], uint32(fatbinEntryHeaderSize+len(extra)))
			imgLE.PutUint32(h[36:], uint32(len(e.name)))
			extra = append(extra, e.name...)
		}
		for len(extra)%8 != 0 {
			extra = append(extra, 0)
		}
		payload := bytes.Clone(e.payload)
		for len(payload)%8 != 0 {
			payload = append(payload, 0)
		}
		imgLE.PutUint16(h[0:], e.kind)
		imgLE.PutUint16(h[2:], 0x0101)
		imgLE.PutUint32(h[4:], uint32(len(h)+len(extra)))
		imgLE.PutUint64(h[8:], uint64(len(payload)))
		imgLE.PutUint32(h[16:], e.compressed)
		imgLE.PutUint32(h[28:], e.arch)
		imgLE.PutUint64(h[40:], 0x11|e.flags) // 64-bit, Linux host
		body = append(append(append(body, h...), extra...), payload...)
	}
	b := make([]byte, fatbinHeaderSize, fatbinHeaderSize+len(body))
	copy(b, fatbinMagic)
	imgLE.PutUint16(b[4:], 1)
	imgLE.PutUint16(b[6:], fatbinHeaderSize)
	imgLE.PutUint64(b[8:], uint64(len(body)))
	return append(b, body...)
}

const testPTX = ".version 8.0\n.target sm_75\n.address_size 64\n.visible .entry k()\n{\n\tret;\n}\n"

// testFatbin holds a CUBIN for sm_90 and PTX, as nvcc -fatbin makes with
// two -gencode options.
func testFatbin() []byte {
	return buildFatbin(
		testEntry{kind: fatbinKindELF, arch: 90, payload: cubinLike().b, name: "k.cu"},
		testEntry{kind: 1, arch: 75, payload: []byte(testPTX + "\x00"), options: "-O3", name: "k.cu"},
	)
}

func TestImageAcceptsFatbin(t *testing.T) {
	b := testFatbin()
	kind, err := checkImage(b)
	require.NoError(t, err)
	assert.Equal(t, imageFatbin, kind)
	// Bytes after the fatbin are not the fatbin's: CUDA reads up to its end.
	_, err = checkImage(append(bytes.Clone(b), 0xff, 0xff, 0xff))
	assert.NoError(t, err)
	// A compressed ELF entry's payload is not an ELF; only its size is checked.
	_, err = checkImage(buildFatbin(testEntry{kind: fatbinKindELF, arch: 90, flags: 0x8000, payload: []byte{0x28, 0xb5, 0x2f, 0xfd, 1, 2, 3}, compressed: 7}))
	assert.NoError(t, err)
	_, err = checkImage(buildFatbin(testEntry{kind: fatbinKindELF, arch: 90, flags: 0x2000, payload: []byte{0xf0, 1, 2, 3}, compressed: 4}))
	assert.NoError(t, err)
}

func TestImageRefusesEveryTruncatedFatbin(t *testing.T) {
	b := testFatbin()
	_, err := checkImage(b[:1])
	assert.NoError(t, err, `"P" alone is text`)
	for n := 2; n < len(b); n++ {
		_, err := checkImage(b[:n])
		assert.Error(t, err, "truncated to %d of %d bytes", n, len(b))
	}
}

// TestImageRefusesDamagedFatbin: each damage is refused with a message that
// says what and where.
func TestImageRefusesDamagedFatbin(t *testing.T) {
	good := testFatbin()
	n := uint64(len(good))
	first := uint64(fatbinHeaderSize)
	firstSize := imgLE.Uint32(good[first+4:])
	second := first + uint64(firstSize) + imgLE.Uint64(good[first+8:])
	cases := []struct {
		name, msg string
		damage    func(b []byte)
	}{
		{"version", "fatbin version 2", func(b []byte) { imgLE.PutUint16(b[4:], 2) }},
		{"small header", "fatbin header size 8 is below 16", func(b []byte) { imgLE.PutUint16(b[6:], 8) }},
		{"header past the end", "the fatbin header ends at 4096", func(b []byte) { imgLE.PutUint16(b[6:], 4096) }},
		{"entries past the end", "the fatbin (its entries) ends at", func(b []byte) { imgLE.PutUint64(b[8:], n) }},
		{"entries size overflows", "the fatbin (its entries) (offset 16, 18446744073709551615 bytes) ends past", func(b []byte) { imgLE.PutUint64(b[8:], ^uint64(0)) }},
		{"no entries", "holds no entries", func(b []byte) { imgLE.PutUint64(b[8:], 0) }},
		{"small entry header", "fatbin entry 0 at offset 16: header size 32 is below 64", func(b []byte) { imgLE.PutUint32(b[first+4:], 32) }},
		{"entry header past the fatbin", "fatbin entry 1 (at offset " + itoa(second) + "): its header ends at", func(b []byte) { imgLE.PutUint32(b[second+4:], 1<<30) }},
		{"payload past the fatbin", "fatbin entry 0 (at offset 16): its payload ends at", func(b []byte) { imgLE.PutUint64(b[first+8:], n) }},
		{"payload size overflows", "its payload (offset", func(b []byte) { imgLE.PutUint64(b[first+8:], ^uint64(0)-8) }},
		{"options field outside the entry", "its options field ends at", func(b []byte) { imgLE.PutUint32(b[second+20:], 1<<20) }},
		{"options outside the entry", "its options ends at", func(b []byte) { imgLE.PutUint32(b[second+64+4:], 1<<20) }},
		{"name outside the entry", "fatbin entry 0 (at offset 16): its name ends at", func(b []byte) { imgLE.PutUint32(b[first+36:], 1<<20) }},
		{"compressed size", "40000 compressed bytes in a payload of", func(b []byte) {
			imgLE.PutUint64(b[first+40:], 0x2011)
			imgLE.PutUint32(b[first+16:], 40000)
		}},
		{"ELF entry that is not ELF", "an uncompressed ELF entry whose payload is not an ELF", func(b []byte) { b[first+uint64(firstSize)+1] = 'X' }},
		{"damaged ELF inside", "fatbin entry 0 (at offset 16), ELF for sm_90, payload at offset " + itoa(first+uint64(firstSize)) + ": ELF section 5 ends at", func(b []byte) {
			p := first + uint64(firstSize)
			imgLE.PutUint64(b[p+cubinLike().shdr(secText)+32:], 1<<20)
		}},
	}
	cases = append(cases, struct {
		name, msg string
		damage    func(b []byte)
	}{"left-over bytes", "fatbin entry 2 at offset " + itoa(n) + ": an entry header needs 64 bytes, 8 are left in the fatbin", func(b []byte) {
		imgLE.PutUint64(b[8:], imgLE.Uint64(b[8:])+8)
	}})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := append(bytes.Clone(good), make([]byte, 8)...)
			c.damage(b)
			_, err := checkImage(b)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.msg)
		})
	}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
