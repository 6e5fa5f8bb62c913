package journal_test

import (
	"testing"

	"github.com/livesync-go/livesync-go/engine/journal"
)

const benchPack = "journal/plain/decoded/1700000502000-docs.jsonl"

func BenchmarkDecodePack(b *testing.B) {
	payload := readVector(b, benchPack)
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, err := journal.DecodePack(payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodePack(b *testing.B) {
	payload := readVector(b, benchPack)
	recs, err := journal.DecodePack(payload)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, err := journal.EncodePack(recs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpen measures inflate + decode of a plain pack; bytes are the
// inflated payload.
func BenchmarkOpen(b *testing.B) {
	obj := readVector(b, "journal/plain/1700000502000-docs.jsonl.gz")
	payload := readVector(b, benchPack)
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, err := journal.Open("k", obj, nil, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSeal(b *testing.B) {
	payload := readVector(b, benchPack)
	recs, err := journal.DecodePack(payload)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, err := journal.Seal(recs, nil); err != nil {
			b.Fatal(err)
		}
	}
}
