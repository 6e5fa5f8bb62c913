package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/negotiate/negotiatetest"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// newMemBucket returns an empty in-memory journal bucket under "vault/".
func newMemBucket() *enginetest.MemObjects {
	return enginetest.NewMemObjects("vault/", "http://127.0.0.1:9000,bucketvault/,r")
}

// memJournal is a journal remote over an in-memory bucket, named
// s3://h/b/vault/.
type memJournal struct {
	mb   *enginetest.MemObjects
	port *negotiatetest.MemPort
}

func (m memJournal) ID() string                                { return "s3://h/b/vault/" }
func (m memJournal) Negotiate() negotiate.Port                 { return m.port }
func (m memJournal) ChunkRange() negotiate.ChunkRange          { return negotiate.JournalChunkRange }
func (m memJournal) Endpoint() engine.Endpoint                 { return nil }
func (m memJournal) Objects() journalsync.Objects              { return m.mb }
func (m memJournal) Chunks(*livesync.Codec) engine.ChunkSource { return nil }
func (m memJournal) Reset(context.Context) error               { return nil }
func (m memJournal) Close() error                              { return nil }

// attachJournal opens a vault over st and attaches the bucket mb to it
// as the CLI does (the link names bucket "b" in its errors).
func attachJournal(t *testing.T, st store.Store, mb *enginetest.MemObjects) *link {
	t.Helper()
	ctx := context.Background()
	v, err := vault.Open(ctx, st, vault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	l, err := v.Attach(ctx, memJournal{mb: mb, port: negotiatetest.NewMemPort(true)}, vault.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &link{Link: l, v: v, bucket: "b"}
}

// sendFiles writes each file into a new store and sends it as its own
// pack (one second apart); it returns the pack keys in order.
func sendFiles(t *testing.T, b *enginetest.MemObjects, files ...string) []string {
	t.Helper()
	ctx := context.Background()
	st, err := store.NewMemory(store.Options{Name: "writer"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.UnixMilli(1700000000000)
	v, err := vault.Open(ctx, st, vault.Options{Settings: &livesync.Settings{}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	j, err := journalsync.New(journalsync.Config{Local: st, Remote: b, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, f := range files {
		if _, err := v.Write(ctx, f, []byte("content of "+f+"\n"), vault.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := j.Send(ctx); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, journal.PackKey(b.Prefix(), now.UnixMilli()))
		now = now.Add(time.Second)
	}
	return keys
}

// A watch on a bucket polls every interval; transport failures double
// the pause, a success resets it; exact virtual times.
func TestBucketWatchBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, err := store.NewMemory(store.Options{Name: "w"})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		mb := newMemBucket()
		l := attachJournal(t, st, mb)
		first := mb.Lists()
		mb.FailList(func(n int) error {
			if n-first >= 2 && n-first <= 4 {
				return &engine.Error{Op: "list packs", Stage: engine.StageTransport, Err: errors.New("connection reset by peer")}
			}
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		start := time.Now()
		var events []string
		stop := l.v.Watch(ctx, func(e vault.Event) {
			switch e.Kind {
			case vault.SyncPolled:
				events = append(events, fmt.Sprintf("ok@%s", time.Since(start)))
				if len(events) == 6 {
					cancel()
				}
			case vault.SyncRetrying:
				code, _ := classify(l.wrap(e.Retry.Err))
				events = append(events, fmt.Sprintf("fail@%s exit %d wait %s", time.Since(start), code, e.Retry.Delay))
			}
		})
		defer stop()
		_, err = l.v.Pull(ctx, l.Link, vault.SyncOptions{Live: true, Interval: 10 * time.Second})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("watch ended with %v, want context.Canceled", err)
		}
		want := []string{"ok@0s", "fail@10s exit 4 wait 20s", "fail@30s exit 4 wait 40s", "fail@1m10s exit 4 wait 1m20s", "ok@2m30s", "ok@2m40s"}
		if !slices.Equal(events, want) {
			t.Errorf("events\n got %q\nwant %q", events, want)
		}
	})
}

// A failure that waiting does not cure (credentials) ends the watch with
// its exit code.
func TestBucketWatchStopsOnAuth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := store.NewMemory(store.Options{Name: "w"})
		defer st.Close()
		mb := newMemBucket()
		l := attachJournal(t, st, mb)
		first := mb.Lists()
		mb.FailList(func(n int) error {
			if n-first == 2 {
				return &engine.Error{Op: "list packs", Stage: engine.StageAuth, Err: errors.New("minio: access denied (S3 AccessDenied, HTTP 403)")}
			}
			return nil
		})
		start := time.Now()
		_, err := l.v.Sync(context.Background(), l.Link, vault.SyncOptions{Live: true, Interval: 5 * time.Second})
		code, msg := classify(l.wrap(err))
		if code != exitAuth || !strings.Contains(msg, `bucket "b"`) || time.Since(start) != 5*time.Second {
			t.Errorf("after %s: exit %d: %s", time.Since(start), code, msg)
		}
	})
}

// A damaged pack is set aside (quarantined) and reported, the others
// arrive; the quarantine is read back without the bucket (status), a
// later run says it is still there, and --retry-quarantined brings the
// repaired pack.
func TestBucketQuarantine(t *testing.T) {
	ctx := context.Background()
	mb := newMemBucket()
	keys := sendFiles(t, mb, "one.md", "two.md", "three.md")
	good := mb.Body(keys[1])
	mb.Set(keys[1], append([]byte("not deflate"), good...))

	st, err := store.NewMemory(store.Options{Name: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l := attachJournal(t, st, mb)
	var packs []string
	stop := l.v.Watch(ctx, func(e vault.Event) {
		if p := e.Pack; e.Kind == vault.SyncProgress && p != nil {
			packs = append(packs, fmt.Sprintf("%d/%d %d+%d", p.Packs, p.Total, p.Docs, p.Chunks))
		}
	})
	res, err := l.v.Pull(ctx, l.Link, vault.SyncOptions{})
	stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Quarantined) != 1 || res.Quarantined[0].Key != keys[1] || res.Quarantined[0].Stage != string(engine.StageDecode) || !res.NewlyQuarantined(res.Quarantined[0]) {
		t.Fatalf("quarantined: %+v", res.Quarantined)
	}
	if res.Pull.DocsWritten != 4 || res.Pull.LastSeq != keys[2] || res.Journal.PacksReceived != 2 {
		t.Errorf("result: %+v, journal %+v", res.Result, *res.Journal)
	}
	if want := []string{"1/3 1+1", "2/3 1+1", "3/3 2+2"}; !slices.Equal(packs, want) {
		t.Errorf("progress %q, want %q", packs, want)
	}
	code, msg := classify(journalOutcome(res))
	if code != exitPartial || !strings.Contains(msg, "1 pack could not be opened") || !strings.Contains(msg, "--retry-quarantined") {
		t.Errorf("outcome: exit %d %s", code, msg)
	}
	q, err := l.v.Quarantined(ctx, l.ID())
	if err != nil || len(q) != 1 || q[0].Key != keys[1] {
		t.Errorf("quarantine read offline: %+v %v", q, err)
	}
	if q, err := l.v.Quarantined(ctx, "http://couch/db"); err != nil || q != nil {
		t.Errorf("a remote never synced has no quarantine: %+v %v", q, err)
	}

	res, err = l.v.Pull(ctx, l.Link, vault.SyncOptions{})
	if err != nil || len(res.Quarantined) != 1 || res.NewlyQuarantined(res.Quarantined[0]) {
		t.Errorf("second pull: %+v %v", res.Quarantined, err)
	}
	mb.Set(keys[1], good)
	res, err = l.v.Pull(ctx, l.Link, vault.SyncOptions{RetryQuarantined: true})
	if err != nil || len(res.Quarantined) != 0 || res.Journal.PacksReceived != 1 || journalOutcome(res) != nil {
		t.Errorf("retry after the repair: %+v %v", res, err)
	}
	files, err := l.v.List(ctx, "", vault.ListOptions{Deleted: true})
	if err != nil || len(files) != 3 {
		t.Errorf("files after the retry: %d %v", len(files), err)
	}
}

// status lists a journal's quarantined packs from the replica alone.
func TestStatusListsQuarantine(t *testing.T) {
	ctx := context.Background()
	s := newSession(t)
	mb := newMemBucket()
	keys := sendFiles(t, mb, "one.md", "two.md")
	mb.Set(keys[0], []byte("damaged"))
	bs, err := boltstore.Open(s.store, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j, _ := journalsync.New(journalsync.Config{Local: bs, Remote: mb})
	if _, err := j.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(map[string]any{"tweak_values": newVaultSettings(vaultConfig{}, false).TweakValues(),
		"remotes": map[string]*vault.RemoteState{"s3://h:9000/b/vault/": {LastPull: s.now, LastPullSeq: keys[1], JournalID: mb.ID(), JournalPrefix: mb.Prefix()}}})
	if err := bs.PutLocal(ctx, vault.RecordID, rec); err != nil {
		t.Fatal(err)
	}
	bs.Close()
	out := s.ok("", "status")
	for _, want := range []string{`quarantined\s+1 pack`, keys[0] + ` \(decode, `, `\(pack ` + keys[1] + `\)`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	var js struct {
		Remotes map[string]struct {
			Quarantined []struct {
				Key   string `json:"key"`
				Stage string `json:"stage"`
			} `json:"quarantined"`
		} `json:"remotes"`
	}
	if err := json.Unmarshal([]byte(s.ok("", "status", "--json")), &js); err != nil {
		t.Fatal(err)
	}
	if q := js.Remotes["s3://h:9000/b/vault/"].Quarantined; len(q) != 1 || q[0].Key != keys[0] || q[0].Stage != string(engine.StageDecode) {
		t.Errorf("status --json: %+v", js)
	}
}
