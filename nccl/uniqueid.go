package nccl

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"

	"github.com/purecuda/cuda/internal/ncclraw"
)

// UniqueIDSize is the size of a UniqueID in bytes (NCCL_UNIQUE_ID_BYTES).
const UniqueIDSize = 128

// UniqueID names one communicator's rendezvous (ncclUniqueId): one rank
// makes it with NewUniqueID and hands it to every other rank of the
// communicator by any means (a file, an environment variable, a TCP
// connection); every rank then joins with the same ID. It is a value:
// copy and compare it freely.
//
// It marshals to its 128 bytes (MarshalBinary) and to text (MarshalText,
// String: 256 lower-case hex digits), so encoding/json, encoding/gob and
// flag.TextVar take it as it is. UnmarshalText reads hex or base64.
type UniqueID [UniqueIDSize]byte

// NewUniqueID makes the ID of a new communicator (ncclGetUniqueId). It needs
// no GPU. Unless NCCL_COMM_ID is set, NCCL serves the rendezvous from the
// process that made the ID (a thread listening on the address the ID holds,
// on the interface NCCL_SOCKET_IFNAME chooses), so that process must stay
// alive until every rank has joined. Without NCCL the error matches
// ErrNotSupported.
func NewUniqueID() (UniqueID, error) {
	var raw ncclraw.UniqueId
	if err := ncclraw.GetUniqueId(&raw); err != nil {
		return UniqueID{}, wrap(err, 0)
	}
	return UniqueID(raw.Internal), nil
}

// MarshalBinary returns a copy of the ID's 128 bytes.
func (id UniqueID) MarshalBinary() ([]byte, error) {
	return bytes.Clone(id[:]), nil
}

// UnmarshalBinary sets the ID from exactly 128 bytes. Any other length is
// refused, with an error matching ErrInvalidArgument, and leaves the ID as
// it was.
func (id *UniqueID) UnmarshalBinary(data []byte) error {
	if id == nil {
		return invalid("UnmarshalBinary into a nil *UniqueID")
	}
	if len(data) != UniqueIDSize {
		return invalid("a unique ID is %d bytes, not %d", UniqueIDSize, len(data))
	}
	copy(id[:], data)
	return nil
}

// MarshalText returns the ID as 256 lower-case hex digits.
func (id UniqueID) MarshalText() ([]byte, error) {
	out := make([]byte, hex.EncodedLen(UniqueIDSize))
	hex.Encode(out, id[:])
	return out, nil
}

// String is the ID as 256 lower-case hex digits, the text MarshalText
// writes and UnmarshalText reads.
func (id UniqueID) String() string { return hex.EncodeToString(id[:]) }

// Lengths of the text forms UnmarshalText reads.
var (
	hexLen       = hex.EncodedLen(UniqueIDSize)                   // 256
	base64Len    = base64.StdEncoding.EncodedLen(UniqueIDSize)    // 172, padded
	base64RawLen = base64.RawStdEncoding.EncodedLen(UniqueIDSize) // 171
)

// UnmarshalText sets the ID from text: 256 hex digits (either case), or
// base64, standard or URL-safe, padded (172 characters) or not (171).
// Spaces and line ends around the text are ignored, so that a line read
// from a file or a variable works as it is. Anything else is refused, with
// an error matching ErrInvalidArgument that says what was expected, and
// leaves the ID as it was.
func (id *UniqueID) UnmarshalText(text []byte) error {
	if id == nil {
		return invalid("UnmarshalText into a nil *UniqueID")
	}
	text = bytes.TrimSpace(text)
	var out UniqueID
	switch len(text) {
	case hexLen:
		if _, err := hex.Decode(out[:], text); err != nil {
			return invalid("a unique ID of %d characters is hex, but: %v", hexLen, err)
		}
	case base64Len, base64RawLen:
		if !decodeBase64(out[:], text) {
			return invalid("a unique ID of %d characters is base64 (standard or URL-safe), but this is not", len(text))
		}
	default:
		return invalid("a unique ID is %d hex digits or %d base64 characters (%d unpadded), not %d characters",
			hexLen, base64Len, base64RawLen, len(text))
	}
	*id = out
	return nil
}

// decodeBase64 decodes text, in any of the four base64 forms, into exactly
// len(dst) bytes.
func decodeBase64(dst, text []byte) bool {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if enc.DecodedLen(len(text)) < len(dst) {
			continue
		}
		buf := make([]byte, enc.DecodedLen(len(text)))
		if n, err := enc.Strict().Decode(buf, text); err == nil && n == len(dst) {
			copy(dst, buf)
			return true
		}
	}
	return false
}
