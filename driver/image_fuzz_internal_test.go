package driver

import (
	"bytes"
	"debug/elf"
	"testing"
)

// FuzzValidateImage: the image check never panics, never reads outside its
// slice (Go would panic), and an image it accepts as ELF has every
// section's contents inside the slice by Go's own ELF reader too. go test
// runs the seeds below; go test -fuzz=FuzzValidateImage explores further.
func FuzzValidateImage(f *testing.F) {
	cubin := cubinLike().b
	fatbin := testFatbin()
	for _, seed := range [][]byte{
		cubin, fatbin, []byte(testPTX), []byte("FAKE module"), []byte("FAKE library"),
		{}, {0}, elfMagic, fatbinMagic, fatbinCWrapper,
	} {
		f.Add(seed)
	}
	for _, img := range [][]byte{cubin, fatbin, []byte(testPTX)} {
		for _, n := range []int{1, 4, 15, 16, 63, 64, 65, 80, len(img) / 2, len(img) - 64, len(img) - 1} {
			if n > 0 && n < len(img) {
				f.Add(img[:n]) // truncated
			}
		}
		for _, at := range []int{4, 5, 6, 7, 8, 18, 33, 41, 52, 56, 60, 62, 70, 100, len(img) / 3, len(img) - 60, len(img) - 20} {
			for _, bit := range []byte{0x01, 0x10, 0x80} {
				if at < len(img) {
					b := bytes.Clone(img)
					b[at] ^= bit // bit-flipped
					f.Add(b)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		kind, err := checkImage(b)
		if _, ikind, ierr := image("fuzz", b); (ierr == nil) != (err == nil) || (err == nil && ikind != kind) {
			t.Fatalf("image and checkImage disagree: %v, %v", ierr, err)
		}
		if err != nil || kind != imageELF {
			return
		}
		// An accepted ELF, checked with Go's reader where it can read it
		// (it wants e_version 1, which CUDA's ELFs do not have).
		c := bytes.Clone(b)
		imgLE.PutUint32(c[20:], 1)
		ef, perr := elf.NewFile(bytes.NewReader(c))
		if perr != nil {
			return
		}
		for i, s := range ef.Sections {
			if s.Type == elf.SHT_NOBITS || s.Type == elf.SHT_NULL || s.Size == 0 {
				continue
			}
			if s.Offset > uint64(len(b)) || s.FileSize > uint64(len(b))-s.Offset {
				t.Fatalf("accepted an ELF whose section %d (offset %d, %d bytes) is outside its %d bytes", i, s.Offset, s.FileSize, len(b))
			}
		}
		for i, p := range ef.Progs {
			if p.Filesz != 0 && (p.Off > uint64(len(b)) || p.Filesz > uint64(len(b))-p.Off) {
				t.Fatalf("accepted an ELF whose segment %d is outside its %d bytes", i, len(b))
			}
		}
	})
}
