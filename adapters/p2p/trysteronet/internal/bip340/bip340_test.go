package bip340

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

func unhex32(t *testing.T, s string) (b [32]byte) {
	t.Helper()
	if _, err := hex.Decode(b[:], []byte(s)); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVector is the first of BIP-340's test vectors
// (bips bip-0340/test-vectors.csv, index 0).
func TestVector(t *testing.T) {
	sk := unhex32(t, "0000000000000000000000000000000000000000000000000000000000000003")
	pk, err := PublicKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(pk[:]); got != "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9" {
		t.Fatalf("public key %s", got)
	}
	sig, err := Sign(sk, [32]byte{}, [32]byte{})
	if err != nil {
		t.Fatal(err)
	}
	want := "e907831f80848d1069a5371b402410364bdf1c5f8307b0084c55f1ce2dca821525f66a4a85ea8b71e482a74f382d2ce5ebeee8fdb2172f477df4900d310536c0"
	if got := hex.EncodeToString(sig[:]); got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
}

// TestNostrAccepts: go-nostr (btcec) accepts events signed here, for
// fresh keys.
func TestNostrAccepts(t *testing.T) {
	for range 20 {
		sk, err := NewKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		pk, err := PublicKey(sk)
		if err != nil {
			t.Fatal(err)
		}
		ev := nostr.Event{PubKey: hex.EncodeToString(pk[:]), CreatedAt: 1700000000, Kind: 21234,
			Tags: nostr.Tags{{"x", "topic"}}, Content: `{"peerId":"abc"}`}
		id := ev.GetID()
		var msg, aux [32]byte
		hex.Decode(msg[:], []byte(id))
		rand.Read(aux[:])
		sig, err := Sign(sk, msg, aux)
		if err != nil {
			t.Fatal(err)
		}
		ev.ID, ev.Sig = id, hex.EncodeToString(sig[:])
		if ok, err := ev.CheckSignature(); !ok || err != nil {
			t.Fatalf("go-nostr refuses the signature: %v", err)
		}
	}
	if _, err := PublicKey([32]byte{}); err == nil {
		t.Fatal("a zero key was accepted")
	}
}
