package driver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/purecuda/cuda/internal/cu"
)

// Images are checked before CUDA sees them. cuModuleLoadDataEx and
// cuLibraryLoadData take no length: they find an image's end from its own
// headers (or, for PTX, its terminating NUL), so a truncated or damaged
// CUBIN would make the driver read past the Go slice and crash the process.
// libcuda also trusts much of what it reads: on driver 580 single bit
// flips in a CUBIN's e_flags, in sections' sh_offset and sh_info, in
// section 0, in .nv.info symbol indices, in notes and in symbols crashed
// or hung it (see the damaged-image GPU test, which flips every bit of
// every header of three CUBINs and two fatbins). An image is accepted only
// as
//
//   - a 64-bit little-endian CUDA ELF (a CUBIN): CUDA's OS ABI, ABI version,
//     e_type and e_flags (a known SM, known flags: image_cudaelf.go); a
//     section header table with sections, section 0 all zero, no program
//     header table without program headers; the header tables and every
//     section with contents inside the slice, every section's offset inside
//     it and aligned to its sh_addralign; sh_link a section, sh_info a
//     section, symbol or symbol count as its section's kind says; string
//     tables ending in NUL; every section name, symbol name, symbol section,
//     relocation symbol and relocation offset inside what it names; symbol
//     0 all zero, symbols of known types and bindings, variables and
//     functions inside their sections; .nv.info records inside their
//     sections and the global .nv.info's symbol indices symbols; notes
//     inside their sections, NVIDIA's toolkit note's strings inside it;
//   - a fatbin (magic 0xBA55ED50, version 1): its header and every entry
//     (header, options, name and payload) lie inside the slice, the entries
//     fill the fatbin exactly, and an uncompressed ELF entry passes the ELF
//     checks inside its payload;
//   - text (PTX): UTF-8 without control characters other than white space
//     and without NUL bytes, except NULs at its end.
//
// Anything else is refused with an imageError, which matches
// ErrInvalidImage (the status CUDA itself returns for a bad image,
// CUDA_ERROR_INVALID_IMAGE) and ErrInvalidArgument, and says what is wrong
// and where: "driver: Context.LoadModule: invalid image: ELF section 7 ends
// at 5321, past the image's 4096 bytes".

// imageError is an image refused before it reached CUDA.
type imageError struct{ op, reason string }

func (e *imageError) Error() string { return "driver: " + e.op + ": invalid image: " + e.reason }

// Is matches ErrInvalidImage (as a Status or the raw table's code) and
// ErrInvalidArgument.
func (e *imageError) Is(target error) bool {
	switch target {
	case ErrInvalidImage, cu.CUDA_ERROR_INVALID_IMAGE, ErrInvalidArgument:
		return true
	}
	return false
}

// image returns a copy of code that is safe to hand to cuModuleLoadDataEx
// or cuLibraryLoadData, and what it is; or an error matching
// ErrInvalidImage. The copy ends in a NUL (PTX needs one; binary images
// don't mind it), and it is the copy that is checked, so that a caller
// changing code meanwhile cannot slip a damaged image past the check.
func image(op string, code []byte) ([]byte, imageKind, error) {
	if len(code) == 0 {
		return nil, 0, &imageError{op, "empty image"}
	}
	img := make([]byte, len(code)+1)
	copy(img, code)
	kind, err := checkImage(img[:len(code)])
	if err != nil {
		return nil, 0, &imageError{op, err.Error()}
	}
	return img, kind, nil
}

// imageKind is what checkImage found an image to be.
type imageKind int

const (
	imageText imageKind = iota + 1
	imageELF
	imageFatbin
)

func (k imageKind) String() string {
	switch k {
	case imageText:
		return "text"
	case imageELF:
		return "ELF"
	case imageFatbin:
		return "fatbin"
	}
	return "unknown"
}

// Magic numbers, as the bytes that start an image.
var (
	elfMagic       = []byte{0x7f, 'E', 'L', 'F'}
	fatbinMagic    = []byte{0x50, 0xed, 0x55, 0xba} // 0xBA55ED50, little-endian
	fatbinCWrapper = []byte{0xb1, 0x43, 0x62, 0x46} // 0x466243B1: __fatBinC_Wrapper_t
	oldFatbinMagic = []byte{0x01, 0x5a, 0xe5, 0x1e} // 0x1EE55A01: pre-CUDA 4 fatbins
)

// checkImage says what b is, or why no CUDA loader may be given it. It
// never reads outside b and never panics, whatever b holds.
func checkImage(b []byte) (imageKind, error) {
	switch {
	case len(b) == 0:
		return 0, errors.New("empty image")
	case bytes.HasPrefix(b, elfMagic):
		return imageELF, checkELF(b, "the image")
	case bytes.HasPrefix(b, fatbinMagic):
		return imageFatbin, checkFatbin(b)
	case bytes.HasPrefix(b, fatbinCWrapper):
		return 0, errors.New("a fatbin wrapper (__fatBinC_Wrapper_t, magic 0x466243B1) holds a pointer, not code: pass the fatbin it points to")
	case bytes.HasPrefix(b, oldFatbinMagic):
		return 0, errors.New("an old-style fatbin (magic 0x1EE55A01) is not supported")
	case len(b) < len(elfMagic) && bytes.HasPrefix(elfMagic, b):
		return 0, fmt.Errorf("an ELF header needs 64 bytes, the image has %d", len(b))
	case len(b) > 1 && len(b) < len(fatbinMagic) && bytes.HasPrefix(fatbinMagic, b):
		return 0, fmt.Errorf("a fatbin header needs 16 bytes, the image has %d", len(b))
	}
	return imageText, checkText(b)
}

// checkText accepts PTX: UTF-8 text with no control characters other than
// white space, ending at its first NUL, after which only NULs may follow.
func checkText(b []byte) error {
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	if end == 0 {
		return errors.New("the image is only NUL bytes")
	}
	for i := 0; i < end; {
		c := b[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(b[i:end])
			if r == utf8.RuneError && size == 1 {
				return fmt.Errorf("byte 0x%02x at offset %d is not UTF-8: the image is not PTX text, nor an ELF (CUBIN) or a fatbin", c, i)
			}
			i += size
			continue
		}
		switch {
		case c == 0:
			return fmt.Errorf("NUL byte at offset %d inside %d bytes of text: PTX is one NUL-terminated string", i, end)
		case c < 0x20 && c != '\t' && c != '\n' && c != '\v' && c != '\f' && c != '\r', c == 0x7f:
			return fmt.Errorf("control byte 0x%02x at offset %d: the image is not PTX text, nor an ELF (CUBIN) or a fatbin", c, i)
		}
		i++
	}
	return nil
}

// Fatbin layout (all little-endian). The container header:
//
//	0  u32 magic 0xBA55ED50   4  u16 version (1)   6  u16 header size
//	8  u64 size of the entries that follow the header
//
// Each entry, one after the other, with its payload after its header:
//
//	0  u16 kind (1 PTX, 2 ELF, …)   2  u16 entry version   4  u32 header size (≥ 64)
//	8  u64 payload size             16 u32 compressed size 20 u32 options offset
//	24 u16 minor, 26 u16 major      28 u32 arch (e.g. 90)
//	32 u32 name offset              36 u32 name length
//	40 u64 flags                    48 u64 reserved        56 u64 uncompressed size
//
// Offsets inside an entry count from the entry's start. At the options
// offset lie a u32 offset and a u32 size of the options string.
const (
	fatbinHeaderSize      = 16
	fatbinEntryHeaderSize = 64
	fatbinKindELF         = 2
	// fatbinCompressed are the flags that mark a compressed payload: the
	// older LZ-style compression and ZSTD.
	fatbinCompressed = 0x2000 | 0x8000
)

// checkFatbin checks a fatbin container and its entries.
func checkFatbin(b []byte) error {
	le := binary.LittleEndian
	n := uint64(len(b))
	if n < fatbinHeaderSize {
		return fmt.Errorf("a fatbin header needs %d bytes, the image has %d", fatbinHeaderSize, n)
	}
	if v := le.Uint16(b[4:]); v != 1 {
		return fmt.Errorf("fatbin version %d (only version 1 is known)", v)
	}
	hsize := uint64(le.Uint16(b[6:]))
	if hsize < fatbinHeaderSize {
		return fmt.Errorf("fatbin header size %d is below %d", hsize, fatbinHeaderSize)
	}
	if err := inside("the fatbin header", 0, hsize, n, "the image"); err != nil {
		return err
	}
	size := le.Uint64(b[8:])
	if err := inside("the fatbin (its entries)", hsize, size, n, "the image"); err != nil {
		return err
	}
	if size == 0 {
		return errors.New("the fatbin holds no entries")
	}
	end := hsize + size
	for i, off := 0, hsize; off < end; i++ {
		next, err := checkFatbinEntry(b, i, off, end)
		if err != nil {
			return err
		}
		off = next
	}
	return nil
}

// checkFatbinEntry checks entry i, which starts at off in a fatbin that
// ends at end (≤ len(b)), and returns where the next entry starts.
func checkFatbinEntry(b []byte, i int, off, end uint64) (uint64, error) {
	le := binary.LittleEndian
	if end-off < fatbinEntryHeaderSize {
		return 0, fmt.Errorf("fatbin entry %d at offset %d: an entry header needs %d bytes, %d are left in the fatbin", i, off, fatbinEntryHeaderSize, end-off)
	}
	e := b[off:end]
	kind := le.Uint16(e)
	hsize := uint64(le.Uint32(e[4:]))
	psize := le.Uint64(e[8:])
	if hsize < fatbinEntryHeaderSize {
		return 0, fmt.Errorf("fatbin entry %d at offset %d: header size %d is below %d", i, off, hsize, fatbinEntryHeaderSize)
	}
	what := fmt.Sprintf("fatbin entry %d (at offset %d)", i, off)
	if err := inside(what+": its header", 0, hsize, end-off, "the fatbin"); err != nil {
		return 0, err
	}
	if err := inside(what+": its payload", hsize, psize, end-off, "the fatbin"); err != nil {
		return 0, err
	}
	e = e[:hsize+psize]
	size := uint64(len(e))
	if opts := uint64(le.Uint32(e[20:])); opts != 0 {
		if err := inside(what+": its options field", opts, 8, size, "the entry"); err != nil {
			return 0, err
		}
		if o := uint64(le.Uint32(e[opts:])); o != 0 {
			if err := inside(what+": its options", o, uint64(le.Uint32(e[opts+4:])), size, "the entry"); err != nil {
				return 0, err
			}
		}
	}
	if name := uint64(le.Uint32(e[32:])); name != 0 {
		if err := inside(what+": its name", name, uint64(le.Uint32(e[36:])), size, "the entry"); err != nil {
			return 0, err
		}
	}
	flags := le.Uint64(e[40:])
	payload := e[hsize:]
	if flags&fatbinCompressed != 0 {
		if c := uint64(le.Uint32(e[16:])); c > psize {
			return 0, fmt.Errorf("%s: %d compressed bytes in a payload of %d", what, c, psize)
		}
	} else if kind == fatbinKindELF {
		if !bytes.HasPrefix(payload, elfMagic) {
			return 0, fmt.Errorf("%s: an uncompressed ELF entry whose payload is not an ELF", what)
		}
		if err := checkELF(payload, "the entry's payload"); err != nil {
			return 0, fmt.Errorf("%s, ELF for sm_%d, payload at offset %d: %w", what, le.Uint32(e[28:]), off+hsize, err)
		}
	}
	return off + hsize + psize, nil
}

// inside reports an error unless [off, off+size) lies inside [0, n);
// what names the range, whose the whole (as in "past the image's 4096
// bytes").
func inside(what string, off, size, n uint64, whose string) error {
	if off <= n && size <= n-off {
		return nil
	}
	return outside(what, off, size, n, whose)
}

// insideNth is inside for the k'th of a kind ("ELF section", 3), named
// only when it is not inside (the check runs on every load).
func insideNth(kind string, k, off, size, n uint64, whose string) error {
	if off <= n && size <= n-off {
		return nil
	}
	return outside(fmt.Sprintf("%s %d", kind, k), off, size, n, whose)
}

// outside is the error of inside.
func outside(what string, off, size, n uint64, whose string) error {
	if off+size >= off { // no overflow
		return fmt.Errorf("%s ends at %d, past %s's %d bytes", what, off+size, whose, n)
	}
	return fmt.Errorf("%s (offset %d, %d bytes) ends past %s's %d bytes", what, off, size, whose, n)
}
