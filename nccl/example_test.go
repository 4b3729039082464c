package nccl_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/purecuda/cuda/nccl"
)

// One rank makes the ID and hands it to the others as text: here through
// an environment variable that a launcher would set on every rank.
func ExampleNewUniqueID() {
	id, err := nccl.NewUniqueID()
	if errors.Is(err, nccl.ErrNotSupported) {
		fmt.Println("no NCCL here:", err) // the error lists every place searched
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	os.Setenv("MY_NCCL_ID", id.String())
}

// Every other rank reads the ID back from its text.
func ExampleUniqueID_UnmarshalText() {
	var sent nccl.UniqueID
	sent[0], sent[127] = 0x02, 0xff
	text, _ := sent.MarshalText()

	var id nccl.UniqueID
	if err := id.UnmarshalText(text); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(id == sent)

	err := id.UnmarshalText([]byte("not an ID"))
	fmt.Println(errors.Is(err, nccl.ErrInvalidArgument))
	fmt.Println(err)
	// Output:
	// true
	// true
	// nccl: a unique ID is 256 hex digits or 172 base64 characters (171 unpadded), not 9 characters
}

// A Version call needs only the library, no GPU.
func ExampleVersion() {
	major, minor, patch, err := nccl.Version()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("NCCL %d.%d.%d\n", major, minor, patch)
}
