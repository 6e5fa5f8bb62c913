package holdback

import (
	"testing"
	"testing/synctest"
)

// TestSettleWritesReleasesBeforeReturning: the note its chunks release
// is served when Settle returns, with no time passing, and a Store that
// is closed and opened again over the same inner store (a Worker's next
// request) serves it too.
func TestSettleWritesReleasesBeforeReturning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{})
		r.push(meta("a.md", "1-a", "h:1"))
		if got := r.rev("a.md"); got != "" {
			t.Fatalf("held note served as %q", got)
		}
		r.push(chunk("h:1"))
		if err := r.s.Settle(bg); err != nil {
			t.Fatal(err)
		}
		if got := r.rev("a.md"); got != "1-a" {
			t.Fatalf("after Settle a.md = %q, want 1-a", got)
		}
		r.s.Close()
		if err := r.s.Settle(bg); err == nil {
			t.Fatal("Settle after Close succeeded")
		}
	})
}
