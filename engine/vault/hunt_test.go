package vault

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/vault/vaulttest"
)

// heldDevice is a device that pulled the metadata of a.md from r without
// its chunks, and holds lost.md whose chunks are on no remote.
func heldDevice(t *testing.T, r *vaulttest.Remote) *device {
	t.Helper()
	b, _ := metadataOnlyDevice(t, r)
	putMetaOnly(t, b.st, "lost.md", "never pushed")
	return b
}

func TestHuntOnceReleasesAndExplains(t *testing.T) {
	ctx := t.Context()
	r := vaulttest.NewRemote("mem://couch/db")
	b := heldDevice(t, r)
	res, err := b.v.Hunt(ctx, HuntOptions{Once: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Released) != 1 || res.Released[0].Meta.Path != "a.md" || len(res.Released[0].Missing) != 1 {
		t.Fatalf("released %+v", res.Released)
	}
	if len(res.Held) != 1 || res.Held[0].Meta.Path != "lost.md" || len(res.Held[0].Reasons) != 1 {
		t.Fatalf("held %+v", res.Held)
	}
	if got := res.Held[0].Reasons[0].Text(nil); got != "1 chunk is on no remote" {
		t.Fatalf("reason %q", got)
	}
	if len(res.Sources) != 1 || !res.Sources[0].CanFetch || res.Sources[0].Stats.Requests == 0 {
		t.Fatalf("sources %+v", res.Sources)
	}
	held, err := b.v.Held(ctx)
	if err != nil || len(held) != 1 || held[0].LastAttempt.IsZero() || !strings.Contains(held[0].LastResult, "on no remote") {
		t.Fatalf("Held after the hunt %+v, %v", held, err)
	}
	if got := b.read(t, "a.md"); got != "alpha" {
		t.Fatalf("read %q", got)
	}
	want := []string{"held a.md", "released a.md"}
	if got := b.ev.files(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

func TestHuntWithoutFetchingRemote(t *testing.T) {
	ctx := t.Context()
	st := newStore(t)
	v := openVault(t, st, Options{Settings: &livesync.Settings{}})
	putMetaOnly(t, st, "lost.md", "text")
	res, err := v.Hunt(ctx, HuntOptions{Once: true})
	if err != nil || len(res.Held) != 1 || !res.Held[0].Reasons[0].NoSource {
		t.Fatalf("Hunt = %+v, %v", res, err)
	}
}

func TestReasonsNameTheFailedSource(t *testing.T) {
	a := &answers{m: map[string]map[engine.ChunkID]error{}}
	down := errors.New("connection refused")
	a.m["a"] = map[engine.ChunkID]error{"h:1": nil, "h:2": down}
	a.m["b"] = map[engine.ChunkID]error{"h:1": nil, "h:2": nil}
	got := a.reasons([]engine.ChunkID{"h:1", "h:2", "h:3"}, []string{"a", "b"})
	if len(got) != 2 || got[0].Chunks != 2 || got[0].Err != nil || got[1].Source != "a" || got[1].Chunks != 1 {
		t.Fatalf("reasons %+v", got)
	}
	if s := got[1].Text(nil); s != "1 chunk: a failed: connection refused" {
		t.Fatalf("text %q", s)
	}
	if s := got[0].Text(nil); s != "2 chunks are on no remote" {
		t.Fatalf("text %q", s)
	}
}

// A background hunt (not Once) keeps hunting with backoff; Close ends it
// and leaves no goroutine or timer (the bubble would report them).
func TestCloseEndsBackgroundHunt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := vaulttest.NewRemote("mem://couch/db")
		defer r.Close()
		b := heldDevice(t, r)
		done := make(chan error, 1)
		go func() {
			_, err := b.v.Hunt(context.Background(), HuntOptions{})
			done <- err
		}()
		synctest.Wait()
		// a.md was released at once, lost.md waits for its next pass.
		if got := b.ev.files(); !slices.Equal(got, []string{"held a.md", "released a.md"}) {
			t.Fatalf("events %v", got)
		}
		b.v.Close()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Hunt ended with %v", err)
		}
	})
}
