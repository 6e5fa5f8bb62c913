package main

import "testing"

// TestResetReason: what counts as a reset of a CouchDB upstream
// (upstream_identity.go).
func TestResetReason(t *testing.T) {
	mem := upstreamMemory{Marker: "m1", UpdateSeq: "120"}
	for _, tc := range []struct {
		name  string
		mem   upstreamMemory
		id    couchIdentity
		reset bool
	}{
		{"first contact", upstreamMemory{}, couchIdentity{updateSeq: "0"}, false},
		{"same marker, seq on", mem, couchIdentity{marker: "m1", updateSeq: "130"}, false},
		{"same marker, same seq", mem, couchIdentity{marker: "m1", updateSeq: "120"}, false},
		{"marker gone", mem, couchIdentity{updateSeq: "130"}, true},
		{"another marker", mem, couchIdentity{marker: "m2", updateSeq: "130"}, true},
		{"integer seq went back", mem, couchIdentity{marker: "m1", updateSeq: "7"}, true},
		// A CouchDB 2+ cluster's seq may come out lower from another
		// node: only the marker decides.
		{"opaque seq lower", upstreamMemory{Marker: "m1", UpdateSeq: "120-g1AAAA"}, couchIdentity{marker: "m1", updateSeq: "118-g1BBBB"}, false},
	} {
		if got := resetReason(tc.mem, tc.id) != ""; got != tc.reset {
			t.Errorf("%s: reset %v, want %v (%q)", tc.name, got, tc.reset, resetReason(tc.mem, tc.id))
		}
	}
}

// TestSeqLag: the upper bound of the changes between two sequences.
func TestSeqLag(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "10", 10}, {"4", "10", 6}, {"10", "10", 0}, {"12", "10", 0},
		{"3-abc", "9-def", 6}, {"x", "10", -1}, {"4", "", -1},
	} {
		if got := seqLag(tc.a, tc.b); got != tc.want {
			t.Errorf("seqLag(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestSaltFingerprint: short, stable, never the salt.
func TestSaltFingerprint(t *testing.T) {
	a, b := saltFingerprint([]byte("salt-one")), saltFingerprint([]byte("salt-two"))
	if len(a) != 8 || a == b || a != saltFingerprint([]byte("salt-one")) || saltFingerprint(nil) != "none" {
		t.Errorf("fingerprints %q %q", a, b)
	}
}
