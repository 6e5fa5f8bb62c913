//go:build !js && !wasip1

package holdback

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
)

func openBolt(t *testing.T, path string) store.Store {
	t.Helper()
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// "Expiry follows the core's rules", across a restart: the holding area
// and the purgatory state live in the bbolt file; timers continue with
// the downtime subtracted, and chunks delivered after the restart release
// the note at a new sequence.
func TestRestartResumes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		r := newRig(t, Config{}, Deps{Inner: openBolt(t, path)})
		r.push(chunk("h:1"), meta("a.md", "1-a", "h:1", "h:2"), meta("b.md", "1-b", "h:3"))
		time.Sleep(10 * time.Minute)
		_, checkpoint := r.changes("")
		if err := r.s.Close(); err != nil {
			t.Fatal(err)
		}

		time.Sleep(15 * time.Minute) // downtime
		r = newRig(t, Config{}, Deps{Inner: openBolt(t, path)})
		r.start = start
		held := r.s.Held()
		if len(held) != 2 || held[0].Doc != "a.md" || held[0].Missing != 1 || held[0].State.String() != "active" ||
			!held[0].Since.Equal(start) || !held[0].Deadline.Equal(start.Add(30*time.Minute)) {
			t.Fatalf("after restart: %+v", held)
		}
		if r.rev("a.md") != "" {
			t.Fatal("held note served after a restart")
		}
		if diff, _ := r.s.RevsDiff(bg, map[string][]string{"a.md": {"1-a"}}); len(diff) != 0 {
			t.Fatalf("RevsDiff after restart = %v", diff)
		}
		// The 30 minutes of active hunting count from the first hold.
		r.sleepUntil(30*time.Minute - time.Nanosecond)
		if state, _, _ := r.heldDoc("b.md"); state != "active" {
			t.Fatalf("b.md %s", state)
		}
		r.sleepUntil(30 * time.Minute)
		synctest.Wait()
		if state, _, _ := r.heldDoc("b.md"); state != "soft-expired" {
			t.Fatalf("b.md %s at 30 min", state)
		}
		r.push(chunk("h:2"))
		synctest.Wait()
		cs, _ := r.changes(checkpoint)
		if got := ids(cs); !reflect.DeepEqual(got, []string{"h:2", "a.md"}) {
			t.Fatalf("feed after the restart = %v", got)
		}
		if st := r.s.Stats(); st.Held != 1 || st.Released != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// A crash after a hold but before the purgatory state was saved: the
// holding area (written before the client was answered) is the truth;
// the revision is held again on restart and released when its chunks
// come.
func TestRestartAfterCrashBeforeSave(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{Inner: openBolt(t, path)})
		r.push(meta("a.md", "1-a", "h:1"))
		if err := r.s.Close(); err != nil {
			t.Fatal(err)
		}
		// Simulate the crash: the saved state predates the hold.
		inner := openBolt(t, path)
		empty, _ := json.Marshal(map[string]any{"version": 1, "saved_at": time.Now(), "entries": []any{}})
		if err := inner.PutLocal(bg, localState, empty); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		r = newRig(t, Config{}, Deps{Inner: inner})
		if state, revs, ok := r.heldDoc("a.md"); !ok || state != "active" || !reflect.DeepEqual(revs, []string{"1-a"}) {
			t.Fatalf("not held again: %+v", r.s.Held())
		}
		if r.rev("a.md") != "" {
			t.Fatal("served before its chunks")
		}
		r.push(chunk("h:1"))
		synctest.Wait()
		if r.rev("a.md") != "1-a" {
			t.Fatal("not released after the restart")
		}
	})
}

// The decorator keeps bbolt's part of the contract.
func TestConformanceBolt(t *testing.T) {
	runConformance(t, func(t *testing.T, opts store.Options) store.Store {
		st, err := boltstore.Open(filepath.Join(t.TempDir(), "c.db"), boltstore.Options{Options: opts})
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

func boltBench(b *testing.B) store.Store {
	st, err := boltstore.Open(filepath.Join(b.TempDir(), "b.db"), boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return st
}

func BenchmarkPushBoltInner(b *testing.B) {
	st := boltBench(b)
	defer st.Close()
	benchPush(b, st, false)
}

func BenchmarkPushBoltWrittenThrough(b *testing.B) {
	s, err := New(Config{}, Deps{Inner: boltBench(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchPush(b, s, false)
}

func BenchmarkPushBoltHeldThenReleased(b *testing.B) {
	s, err := New(Config{}, Deps{Inner: boltBench(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchPush(b, s, true)
}
