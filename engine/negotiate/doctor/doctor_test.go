package doctor_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/negotiate/doctor"
	"github.com/livesync-go/livesync-go/engine/vault"
)

func words(local doctor.Local) doctor.Options {
	return doctor.Options{
		Local:    local,
		NewVault: negotiate.NewVaultTweaks(),
		Command: func(a doctor.Action) []string {
			return []string{map[doctor.Action]string{doctor.Pull: "pull", doctor.PullRebuildLocal: "pull --rebuild-local",
				doctor.Unlock: "unlock", doctor.PullFresh: "pull fresh", doctor.PushRebuild: "push --rebuild"}[a]}
		},
		Line:  func(args []string) string { return "cli " + strings.Join(args, " ") },
		Codes: doctor.Codes{Failed: 3, Unreachable: 4, Auth: 5, Passphrase: 6, Refused: 7},
	}
}

func lockedMilestone(t *testing.T) []byte {
	now := time.UnixMilli(1_700_000_000_000)
	m := negotiate.NewMilestone("owner", now)
	m.Register("owner", negotiate.CouchDBChunkRange, negotiate.DeviceInfo{DeviceName: "laptop"}, negotiate.NewVaultTweaks(), now)
	m.Lock("owner", negotiate.CouchDBChunkRange, false)
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// A locked remote: an empty replica is told to pull, one with documents
// to pull --rebuild-local; both may unlock. The commands come from the
// caller's words.
func TestMilestoneLocked(t *testing.T) {
	for _, tc := range []struct {
		local doctor.Local
		pull  string
	}{
		{doctor.Local{}, "pull"},
		{doctor.Local{Present: true, NodeID: "me"}, "pull --rebuild-local"},
	} {
		f := doctor.New(words(tc.local))
		if _, ok := f.Milestone(lockedMilestone(t), nil, negotiate.CouchDBChunkRange); !ok {
			t.Fatal("a refused device stops the checks")
		}
		got := f.List[len(f.List)-1]
		if got.Status != vault.FindingProblem || got.Code != 7 || len(got.Commands) != 2 || got.Commands[0][0] != tc.pull ||
			!strings.Contains(got.Advice, "cli "+tc.pull) || !strings.Contains(got.Message, `"laptop" (owner)`) {
			t.Fatalf("%+v: finding %+v", tc.local, got)
		}
	}
}

func TestMilestoneAbsentAndUnreadable(t *testing.T) {
	f := doctor.New(words(doctor.Local{}))
	s, ok := f.Milestone(nil, engine.ErrNotFound, negotiate.CouchDBChunkRange)
	if !ok || f.List[0].Status != vault.FindingOK || s.Encrypt {
		t.Fatalf("no milestone: %v %+v %+v", ok, f.List, s)
	}
	f = doctor.New(words(doctor.Local{}))
	if _, ok := f.Milestone(nil, errors.New("boom"), negotiate.CouchDBChunkRange); ok || f.List[0].Code != 3 {
		t.Fatalf("unreadable: %v %+v", ok, f.List)
	}
	f = doctor.New(words(doctor.Local{}))
	if _, ok := f.Milestone([]byte("[1]"), nil, negotiate.CouchDBChunkRange); ok || f.List[0].Code != 7 {
		t.Fatalf("damaged: %v %+v", ok, f.List)
	}
}

// Settings that differ from the remote's preferred ones name both ways
// out.
func TestMilestoneMismatch(t *testing.T) {
	tw := negotiate.NewVaultTweaks()
	if err := tw.Set("encrypt", true); err != nil {
		t.Fatal(err)
	}
	f := doctor.New(words(doctor.Local{Present: true, NodeID: "owner", Tweaks: &tw}))
	m := lockedMilestone(t)
	var mm negotiate.Milestone
	if err := json.Unmarshal(m, &mm); err != nil {
		t.Fatal(err)
	}
	mm.Unlock("owner", negotiate.CouchDBChunkRange)
	mm.TweakValues[negotiate.PreferredNode] = negotiate.NewVaultTweaks()
	raw, _ := json.Marshal(mm)
	f.Milestone(raw, nil, negotiate.CouchDBChunkRange)
	got := f.List[len(f.List)-1]
	if got.Check != "settings" || got.Code != 7 || len(got.Details) == 0 || len(got.Commands) != 2 {
		t.Fatalf("mismatch: %+v", f.List)
	}
}
