package nccl_test

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/gob"
	"encoding/json"
	"flag"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/nccl"
)

// sample is an ID whose bytes all differ from their neighbours, so that
// a shifted or truncated copy shows.
func sample() nccl.UniqueID {
	var id nccl.UniqueID
	for i := range id {
		id[i] = byte(i*37 + 11)
	}
	return id
}

var (
	_ encoding.BinaryMarshaler   = nccl.UniqueID{}
	_ encoding.BinaryUnmarshaler = (*nccl.UniqueID)(nil)
	_ encoding.TextMarshaler     = nccl.UniqueID{}
	_ encoding.TextUnmarshaler   = (*nccl.UniqueID)(nil)
)

func TestUniqueIDBinaryRoundTrip(t *testing.T) {
	id := sample()
	b, err := id.MarshalBinary()
	require.NoError(t, err)
	require.Len(t, b, nccl.UniqueIDSize)
	assert.Equal(t, id[:], b)
	b[0]++ // a copy: changing it leaves the ID alone
	assert.Equal(t, sample(), id)
	b[0]--
	var back nccl.UniqueID
	require.NoError(t, back.UnmarshalBinary(b))
	assert.Equal(t, id, back)
	assert.Equal(t, 128, nccl.UniqueIDSize)
}

func TestUniqueIDTextRoundTrip(t *testing.T) {
	id := sample()
	text, err := id.MarshalText()
	require.NoError(t, err)
	assert.Len(t, text, 256)
	assert.Equal(t, strings.ToLower(string(text)), string(text))
	assert.Equal(t, string(text), id.String())
	forms := map[string]string{
		"hex":                string(text),
		"upper-case hex":     strings.ToUpper(string(text)),
		"base64":             base64.StdEncoding.EncodeToString(id[:]),
		"base64 unpadded":    base64.RawStdEncoding.EncodeToString(id[:]),
		"base64url":          base64.URLEncoding.EncodeToString(id[:]),
		"base64url unpadded": base64.RawURLEncoding.EncodeToString(id[:]),
		"hex with a newline": string(text) + "\n",
		"base64 in spaces":   "  " + base64.StdEncoding.EncodeToString(id[:]) + " \r\n",
	}
	for name, form := range forms {
		var back nccl.UniqueID
		require.NoError(t, back.UnmarshalText([]byte(form)), name)
		assert.Equal(t, id, back, name)
	}
}

// TestUniqueIDEncodings: JSON, gob and flag.TextVar carry an ID as it is.
func TestUniqueIDEncodings(t *testing.T) {
	id := sample()
	type msg struct{ ID nccl.UniqueID }
	j, err := json.Marshal(msg{id})
	require.NoError(t, err)
	assert.Equal(t, `{"ID":"`+id.String()+`"}`, string(j))
	var m msg
	require.NoError(t, json.Unmarshal(j, &m))
	assert.Equal(t, id, m.ID)

	var buf bytes.Buffer
	require.NoError(t, gob.NewEncoder(&buf).Encode(id))
	var g nccl.UniqueID
	require.NoError(t, gob.NewDecoder(&buf).Decode(&g))
	assert.Equal(t, id, g)

	fs := flag.NewFlagSet("rank", flag.ContinueOnError)
	var f nccl.UniqueID
	fs.TextVar(&f, "id", nccl.UniqueID{}, "the communicator's ID")
	require.NoError(t, fs.Parse([]string{"-id", base64.StdEncoding.EncodeToString(id[:])}))
	assert.Equal(t, id, f)
}

// TestUniqueIDRejectsBadInput: wrong lengths and bad characters are refused
// with an error that says what was expected, matching ErrInvalidArgument
// and driver.ErrInvalidArgument, and leave the ID as it was.
func TestUniqueIDRejectsBadInput(t *testing.T) {
	hexText := sample().String()
	b64 := base64.StdEncoding.EncodeToString(make([]byte, 128))
	raw := base64.RawStdEncoding.EncodeToString(make([]byte, 128))
	for name, c := range map[string]struct {
		binary bool
		in     string
		want   string
	}{
		"no bytes":          {true, "", "a unique ID is 128 bytes, not 0"},
		"127 bytes":         {true, strings.Repeat("x", 127), "a unique ID is 128 bytes, not 127"},
		"129 bytes":         {true, strings.Repeat("x", 129), "a unique ID is 128 bytes, not 129"},
		"empty text":        {false, "", "a unique ID is 256 hex digits or 172 base64 characters (171 unpadded), not 0 characters"},
		"spaces only":       {false, "   \n", "not 0 characters"},
		"short hex":         {false, hexText[:254], "not 254 characters"},
		"long hex":          {false, hexText + "00", "not 258 characters"},
		"a non-hex digit":   {false, hexText[:100] + "g" + hexText[101:], "a unique ID of 256 characters is hex, but: encoding/hex: invalid byte"},
		"base64 not base64": {false, "!" + b64[1:], "a unique ID of 172 characters is base64 (standard or URL-safe), but this is not"},
		"stray bits":        {false, raw[:170] + "B", "a unique ID of 171 characters is base64"}, // decodes only loosely
		"a space inside":    {false, hexText[:128] + " " + hexText[129:], "is hex, but"},
		"mixed alphabets":   {false, "-+" + b64[2:], "is base64"},
	} {
		id := sample()
		var err error
		if c.binary {
			err = id.UnmarshalBinary([]byte(c.in))
		} else {
			err = id.UnmarshalText([]byte(c.in))
		}
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), c.want, name)
		assert.True(t, strings.HasPrefix(err.Error(), "nccl: "), name)
		assert.ErrorIs(t, err, nccl.ErrInvalidArgument, name)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, name)
		assert.Equal(t, sample(), id, "%s: a refused input leaves the ID as it was", name)
	}
}

func TestUniqueIDNilReceiver(t *testing.T) {
	var p *nccl.UniqueID
	for _, err := range []error{p.UnmarshalBinary(make([]byte, 128)), p.UnmarshalText([]byte(sample().String()))} {
		assert.ErrorIs(t, err, nccl.ErrInvalidArgument)
		assert.ErrorContains(t, err, "nil *UniqueID")
	}
}
