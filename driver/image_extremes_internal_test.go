package driver

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
)

// TestImageExtremeFieldsNeverPanic: every byte and every aligned 2-, 4-
// and 8-byte field of the test images with CUDA's notes, kernel
// attributes, call graph and relocations, set to extreme values, and pairs
// of 4-byte fields set together (sizes with offsets): the check refuses or
// accepts, and never panics.
func TestImageExtremeFieldsNeverPanic(t *testing.T) {
	imgs := map[string][]byte{"kinfo": kernelInfoELF().b, "notes": withNotes(t).b, "cubinlike": cubinLike().b}
	vals := []uint64{0, 1, 2, 3, 4, 7, 8, 12, 16, 24, 0x7f, 0x80, 0xff, 0x100, 0xfff, 0x7fff, 0x8000, 0xfffb, 0xfffc, 0xffff,
		0x10000, 0x7fffffff, 0x80000000, 0xfffffffb, 0xfffffffc, 0xffffffff, 1 << 32, 1<<63 - 1, 1 << 63, ^uint64(0)}
	n := 0
	try := func(name string, b []byte) {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%s: panic %v", name, r)
			}
		}()
		n++
		_ = checkELF(b, "the image")
	}
	for nm, img := range imgs {
		for at := 0; at < len(img); at++ {
			for _, w := range []int{1, 2, 4, 8} {
				if at%w != 0 && w > 1 || at+w > len(img) {
					continue
				}
				for _, v := range vals {
					b := bytes.Clone(img)
					switch w {
					case 1:
						b[at] = byte(v)
					case 2:
						binary.LittleEndian.PutUint16(b[at:], uint16(v))
					case 4:
						binary.LittleEndian.PutUint32(b[at:], uint32(v))
					case 8:
						binary.LittleEndian.PutUint64(b[at:], v)
					}
					try(fmt.Sprintf("%s@%d w%d v%#x", nm, at, w, v), b)
				}
			}
		}
		// pairs of 4-byte fields at extreme values (sizes and offsets together)
		for a := 0; a+4 <= len(img); a += 4 {
			for c := a + 4; c+4 <= len(img) && c < a+64; c += 4 {
				for _, v := range []uint64{0, 0xffffffff, 0x80000000, 0xfffffffc} {
					b := bytes.Clone(img)
					binary.LittleEndian.PutUint32(b[a:], uint32(v))
					binary.LittleEndian.PutUint32(b[c:], uint32(v))
					try(fmt.Sprintf("%s pair %d,%d v%#x", nm, a, c, v), b)
				}
			}
		}
	}

	t.Logf("%d images", n)
}
