package bridge

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// "the retry schedule for an error state is the same backoff as for a
// transport error, not a fixed 60 s".
func TestBackoffForPermanentErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, permanent := range []bool{false, true} {
			d := MinRetry
			var waits []time.Duration
			for range 8 {
				start := time.Now()
				if !backoff(t.Context(), &d) {
					t.Fatal("retry ended early")
				}
				waits = append(waits, time.Since(start))
			}
			want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60}
			for i := range want {
				if waits[i] != want[i]*time.Second {
					t.Fatalf("permanent %v: waits %v, want %v s", permanent, waits, want)
				}
			}
		}
	})
}

// The mismatch error names the keys, both values and the fix, and is
// permanent (state "error").
func TestSettingsDifferError(t *testing.T) {
	err := error(&settingsDifferError{db: "vault", where: `upstream "d"`, diffs: negotiate.TweakMismatch(
		tweaks(t, true), tweaks(t, false).WithDefaults())})
	for _, w := range []string{`upstream "d"`, `database "vault"`, "encrypt: vault true, upstream false", "overwrites neither"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q lacks %q", err, w)
		}
	}
	if !errors.Is(err, errSettingsDiffer) || !permanent(err) {
		t.Error("a settings difference is not a permanent errSettingsDiffer")
	}
}

func tweaks(t *testing.T, encrypt bool) negotiate.TweakValues {
	tv := negotiate.NewVaultTweaks()
	if err := tv.Set("encrypt", encrypt); err != nil {
		t.Fatal(err)
	}
	return tv
}

// TestResetReason: what counts as a reset of a CouchDB upstream
// .
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
