package negotiate_test

import (
	"slices"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// TestAdmit: a new node registers (a write); a node a locked remote does
// not accept is refused and asks for no write (upstream would have
// written its registration), unless it joins; a read-only admission
// never asks for a write but reports the verdict it would get.
func TestAdmit(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	settings := negotiate.NewVaultTweaks()
	adm := func(node string) negotiate.Admission {
		return negotiate.Admission{Node: node, Range: negotiate.CouchDBChunkRange, Settings: settings, Now: now,
			Device: negotiate.DeviceInfo{DeviceName: node}}
	}
	m := negotiate.NewMilestone("owner", now)
	if write, v := negotiate.Admit(m, adm("owner")); !write || v.Kind != negotiate.VerdictOK {
		t.Fatalf("a new milestone: write %v, verdict %v", write, v.Kind)
	}
	m.Rev = "1-a"
	m.Lock("owner", negotiate.CouchDBChunkRange, false)

	for _, tc := range []struct {
		name    string
		a       negotiate.Admission
		write   bool
		verdict negotiate.VerdictKind
	}{
		{"refused", adm("newcomer"), false, negotiate.VerdictNodeLocked},
		{"read only", func() negotiate.Admission { a := adm("newcomer"); a.ReadOnly = true; return a }(), false, negotiate.VerdictNodeLocked},
		{"joins", func() negotiate.Admission { a := adm("newcomer"); a.AllowJoin = true; return a }(), true, negotiate.VerdictLocked},
		{"read only join", func() negotiate.Admission {
			a := adm("newcomer")
			a.AllowJoin, a.ReadOnly = true, true
			return a
		}(), false, negotiate.VerdictLocked},
		// tweakModified is unset, so an accepted node rewrites its entry
		// on every connection, as upstream does (Register).
		{"accepted", adm("owner"), true, negotiate.VerdictLocked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := m.Clone()
			write, v := negotiate.Admit(c, tc.a)
			if write != tc.write || v.Kind != tc.verdict {
				t.Errorf("write %v, verdict %v; want %v, %v", write, v.Kind, tc.write, tc.verdict)
			}
			if tc.a.AllowJoin && !slices.Contains(c.AcceptedNodes, tc.a.Node) {
				t.Errorf("accepted_nodes %v after joining", c.AcceptedNodes)
			}
		})
	}
}
