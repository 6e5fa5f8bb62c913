package trystero

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// The expected values below were computed with trystero 0.25.3's own
// functions (@trystero-p2p/core dist crypto.mjs sha1, deriveRoomNamespace,
// utils.mjs strToNum) and octagonal-wheels' mixedHash in Node.

func TestRoomPassword(t *testing.T) {
	for _, tc := range []struct{ passphrase, want string }{
		{"test", "1bhxaay1cs5qlh"}, // the plug-in's documented example
		{"", "0ztntfp"},
		{"passphrase with spaces", "1q10gen9nw71e"},
		{"パスワード", "3fyd4314t96gn"},
		{"🔑key", "p1rbu512g6a2q"},
	} {
		if got := RoomPassword(tc.passphrase); got != tc.want {
			t.Errorf("RoomPassword(%q) = %q, want %q", tc.passphrase, got, tc.want)
		}
	}
}

func TestTopicsAndToken(t *testing.T) {
	for _, tc := range []struct {
		app, room, self    string
		root, selfTopic    string
		rootKind, selfKind int
		token              string
	}{
		{"self-hosted-livesync", "myroom", "0123456789AaBbCcDdEe",
			"3d6f1573416b6d146g4z37116m282f1zi2r034", "1o6o6z3x572417342l2g3g516i1p252p382l2w", 22570, 22675,
			"ee15e569d08d67ff0ae63613136a49a5b98f0583ce7ba13b23149a0665cac407"},
		{"app", "グループ😀", "zZyYxX0123456789abcd",
			"551f686j6i14411z2110586t326j2r5k232y6g2o", "wl224ar176n1c3z8r64p5g502t6813715", 22709, 22357,
			"d4508fec7a49a5d1a76cd1f8cef1726864faa5eb98d47a0bfdfad8b06113fea3"},
	} {
		if got := RootTopic(tc.app, tc.room); got != tc.root {
			t.Errorf("RootTopic(%q, %q) = %q, want %q", tc.app, tc.room, got, tc.root)
		}
		if got := SelfTopic(tc.app, tc.room, tc.self); got != tc.selfTopic {
			t.Errorf("SelfTopic(%q) = %q, want %q", tc.self, got, tc.selfTopic)
		}
		if got := TopicKind(tc.root); got != tc.rootKind {
			t.Errorf("TopicKind(root) = %d, want %d", got, tc.rootKind)
		}
		if got := TopicKind(tc.selfTopic); got != tc.selfKind {
			t.Errorf("TopicKind(self) = %d, want %d", got, tc.selfKind)
		}
		if got := RoomToken(tc.app, tc.room); got != tc.token {
			t.Errorf("RoomToken = %q, want %q", got, tc.token)
		}
	}
	// The kind sums UTF-16 code units: é is 0xE9, 😀 two surrogates.
	if got := TopicKind("é😀x"); got != 22542 {
		t.Errorf("TopicKind(non-ASCII) = %d, want 22542", got)
	}
}

func TestSHA1B36NoPadding(t *testing.T) {
	// SHA-1("") starts da 39 a3 ee: 62 1l 4j 6m, each byte unpadded.
	if got := SHA1B36(""); !strings.HasPrefix(got, "621l4j6m") {
		t.Errorf("SHA1B36(\"\") = %q", got)
	}
}

func TestNewIDs(t *testing.T) {
	r := bytes.NewReader(bytes.Repeat([]byte{0, 61, 62, 247, 248, 255}, 100))
	id := NewSelfID(r)
	if len(id) != SelfIDLen {
		t.Fatalf("len(selfId) = %d", len(id))
	}
	// 0 -> '0', 61 -> 'z', 62 -> '0' (62 % 62), 247 -> 'z', 248 and 255 rejected.
	if !strings.HasPrefix(id, "0z0z0z0z") {
		t.Errorf("selfId = %q", id)
	}
	if n := len(NewOfferID(nil)); n != OfferIDLen {
		t.Errorf("len(offerId) = %d", n)
	}
	for _, c := range NewID(nil, 500) {
		if !strings.ContainsRune(idAlphabet, c) {
			t.Fatalf("id char %q not in alphabet", c)
		}
	}
}

func TestIsLeader(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"0abc", "Aabc", true}, {"a", "B", false}, {"B", "a", true}, {"x", "x", false},
		// UTF-16 order: U+FF61 sorts after the high surrogate of U+1F600,
		// though Go's UTF-8 byte order says the opposite.
		{"😀", "｡", true}, {"｡", "😀", false},
	} {
		if got := IsLeader(tc.a, tc.b); got != tc.want {
			t.Errorf("IsLeader(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}

func TestAnnounceSchedule(t *testing.T) {
	want := []time.Duration{233, 533, 1333, 5333, 5333, 5333}
	for n, w := range want {
		if got := NextAnnounce(n); got != w*time.Millisecond {
			t.Errorf("NextAnnounce(%d) = %v, want %v ms", n, got, w)
		}
	}
	d := AnnounceDelays()
	d[0] = 0
	if NextAnnounce(0) != 233*time.Millisecond {
		t.Error("AnnounceDelays exposes its backing array")
	}
}
