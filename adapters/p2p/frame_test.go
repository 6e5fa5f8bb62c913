//go:build !js

package p2p

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	for _, p := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("é"), 5000)} {
		if err := writeFrame(&buf, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []int{0, 1, 10000} {
		got, err := readFrame(&buf, MaxFrameSize)
		if err != nil || len(got) != want {
			t.Fatalf("read %d bytes, %v; want %d", len(got), err, want)
		}
	}
	if _, err := readFrame(&buf, MaxFrameSize); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
}

// A length over the limit is rejected from the header alone: the reader
// neither allocates nor waits for the announced bytes.
func TestFrameOverLimitRejected(t *testing.T) {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], MaxFrameSize+1)
	r := io.MultiReader(bytes.NewReader(hdr[:]), blockingReader{t})
	if _, err := readFrame(r, MaxFrameSize); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("over-limit frame: %v, want ErrFrameTooLarge", err)
	}
	allocs := testing.AllocsPerRun(10, func() {
		binary.BigEndian.PutUint32(hdr[:], 0xFFFFFFFF)
		_, _ = readFrame(bytes.NewReader(hdr[:]), MaxFrameSize)
	})
	if allocs > 8 {
		t.Fatalf("%v allocations for a rejected 4 GiB frame", allocs)
	}
	binary.BigEndian.PutUint32(hdr[:], 100)
	if _, err := readFrame(bytes.NewReader(hdr[:]), 99); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("frame over a smaller limit: %v, want ErrFrameTooLarge", err)
	}
	if err := writeFrame(io.Discard, make([]byte, MaxFrameSize+1)); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("writing an over-limit frame: %v, want ErrFrameTooLarge", err)
	}
}

func TestFrameTruncated(t *testing.T) {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 10)
	_, err := readFrame(bytes.NewReader(append(hdr[:], "abc"...)), MaxFrameSize)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated frame: %v, want ErrUnexpectedEOF", err)
	}
}

// blockingReader fails the test if the frame reader reads past the header.
type blockingReader struct{ t *testing.T }

func (b blockingReader) Read([]byte) (int, error) {
	b.t.Error("read the body of an over-limit frame")
	return 0, io.EOF
}
