package vault

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

func newStore(t *testing.T) store.Store {
	t.Helper()
	st, err := store.NewMemory(store.Options{Name: "local"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func openVault(t *testing.T, st store.Store, o Options) *Vault {
	t.Helper()
	v, err := Open(t.Context(), st, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// events collects a vault's events.
type events struct {
	mu sync.Mutex
	ev []Event
}

func watch(v *Vault) *events {
	e := &events{}
	v.Watch(context.Background(), func(x Event) {
		e.mu.Lock()
		e.ev = append(e.ev, x)
		e.mu.Unlock()
	})
	return e
}

// files returns the file events, as "kind path".
func (e *events) files() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, x := range e.ev {
		if x.Kind.IsFile() {
			out = append(out, x.Kind.String()+" "+x.Path)
		}
	}
	return out
}

func TestWriteReadListDelete(t *testing.T) {
	ctx := t.Context()
	st := newStore(t)
	now := time.UnixMilli(1_700_000_000_000)
	v := openVault(t, st, Options{Settings: &livesync.Settings{}, Now: func() time.Time { return now }})
	ev := watch(v)

	res, err := v.Write(ctx, "notes/a.md", []byte("hello"), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Unchanged || res.NewChunks != 1 || res.Meta.MTime != now.UnixMilli() {
		t.Fatalf("first write: %+v", res)
	}
	if res2, err := v.Write(ctx, "notes/a.md", []byte("hello"), WriteOptions{}); err != nil || !res2.Unchanged {
		t.Fatalf("same content again: %+v %v", res2, err)
	}
	later := now.Add(time.Hour)
	if _, err := v.Write(ctx, "notes/a.md", []byte("hello, world"), WriteOptions{MTime: later}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Write(ctx, "notes/b.md", []byte("bee"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := v.Read(ctx, "notes/a.md")
	if err != nil || string(got) != "hello, world" {
		t.Fatalf("Read = %q, %v", got, err)
	}
	f, err := v.Stat(ctx, "notes/a.md")
	if err != nil || f.Meta.CTime != now.UnixMilli() || f.Meta.MTime != later.UnixMilli() || f.Chunks != f.LocalChunks {
		t.Fatalf("Stat = %+v, %v (ctime kept from the first revision)", f, err)
	}
	if _, err := v.Delete(ctx, "notes/b.md"); err != nil {
		t.Fatal(err)
	}
	list, err := v.List(ctx, "notes/", ListOptions{})
	if err != nil || len(list) != 1 || list[0].Meta.Path != "notes/a.md" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	list, err = v.List(ctx, "", ListOptions{Deleted: true})
	if err != nil || len(list) != 2 || !list[1].Meta.Deleted {
		t.Fatalf("List with deleted = %+v, %v", list, err)
	}
	if _, err := v.Read(ctx, "notes/b.md"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Read of a deleted file: %v", err)
	}
	want := []string{"created notes/a.md", "changed notes/a.md", "created notes/b.md", "deleted notes/b.md"}
	if got := ev.files(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

func TestOpenKeepsRecord(t *testing.T) {
	ctx := t.Context()
	st := newStore(t)
	// A replica written by the command-line client before the vault
	// package existed.
	old := `{"tweak_values":{"customChunkSize":60,"encrypt":true,"usePathObfuscation":false},"remotes":{"http://h/db":{"last_pull":"2025-01-02T03:04:05Z","last_pull_seq":"7"}}}`
	if err := st.PutLocal(ctx, RecordID, json.RawMessage(old)); err != nil {
		t.Fatal(err)
	}
	v := openVault(t, st, Options{Settings: &livesync.Settings{CustomChunkSize: 10}})
	s, err := v.Settings()
	if err != nil || !s.Encrypt || s.CustomChunkSize != 60 {
		t.Fatalf("Settings = %+v, %v: the record wins over new-vault settings", s, err)
	}
	if r := v.Remote("http://h/db"); r == nil || r.LastPullSeq != "7" {
		t.Fatalf("Remote = %+v", r)
	}
	if _, err := v.Write(ctx, "a.md", []byte("x"), WriteOptions{}); !errors.Is(err, ErrNeedPassphrase) {
		t.Fatalf("Write without passphrase: %v", err)
	}
	if err := v.SetPassphrase(ctx, "secret"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Write(ctx, "a.md", []byte("x"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	v.Close()

	// The passphrase is checked against the chunk ids written with it.
	if _, err := Open(ctx, st, Options{Passphrase: "other"}); !errors.As(err, new(*PassphraseError)) || !errors.Is(err, engine.ErrDecrypt) {
		t.Fatalf("Open with another passphrase: %v", err)
	}
	v2, err := Open(ctx, st, Options{Passphrase: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	if got, err := v2.Read(ctx, "a.md"); err != nil || string(got) != "x" {
		t.Fatalf("Read = %q, %v", got, err)
	}
	raw, _ := st.GetLocal(ctx, RecordID)
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(raw, &rec); err != nil || rec["tweak_values"] == nil || rec["remotes"] == nil {
		t.Fatalf("record %s", raw)
	}
}

func TestNoVault(t *testing.T) {
	v := openVault(t, newStore(t), Options{})
	if v.HasVault() {
		t.Fatal("an empty replica holds no vault")
	}
	if _, err := v.Write(t.Context(), "a.md", nil, WriteOptions{}); !errors.Is(err, ErrNoVault) {
		t.Fatalf("Write: %v", err)
	}
	if list, err := v.List(t.Context(), "", ListOptions{}); err != nil || len(list) != 0 {
		t.Fatalf("List: %v %v", list, err)
	}
}

func TestCreate(t *testing.T) {
	ctx := t.Context()
	v := openVault(t, newStore(t), Options{})
	if err := v.Create(ctx, livesync.Settings{PathObfuscation: true, Passphrase: "p", CustomChunkSize: 10}); err != nil {
		t.Fatal(err)
	}
	if err := v.Create(ctx, livesync.Settings{CustomChunkSize: 99}); err != nil {
		t.Fatal(err)
	}
	s, err := v.Settings()
	if err != nil || !s.PathObfuscation || s.CustomChunkSize != 10 || s.Passphrase != "" {
		t.Fatalf("Settings = %+v, %v: the first Create wins, without the passphrase", s, err)
	}
	if _, err := v.Write(ctx, "a.md", []byte("x"), WriteOptions{}); err != nil {
		t.Fatalf("Write with the passphrase given to Create: %v", err)
	}
}

func TestReadMissingChunkWithoutRemote(t *testing.T) {
	ctx := t.Context()
	st := newStore(t)
	v := openVault(t, st, Options{Settings: &livesync.Settings{}})
	putMetaOnly(t, st, "held.md", "some text")
	_, err := v.Read(ctx, "held.md")
	var me *MissingChunksError
	if !errors.As(err, &me) || !errors.Is(err, engine.ErrMissingChunk) || me.Missing != 1 {
		t.Fatalf("Read: %v", err)
	}
}

// putMetaOnly writes the metadata of a file whose chunks the replica
// lacks, and returns the chunks.
func putMetaOnly(t *testing.T, st store.Store, p, text string) []engine.Chunk {
	t.Helper()
	codec, err := livesync.New(livesync.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m, chunks, err := codec.FileDocs(p, []byte(text), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m.Doc().MarshalJSON()
	if _, err := st.Put(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	return chunks
}

func TestPathOf(t *testing.T) {
	for in, want := range map[string]string{"notes/a.md": "notes/a.md", "/x/../y.md": "y.md", ".obsidian/app.json": "i:.obsidian/app.json", `a\b.md`: "a/b.md"} {
		if got, err := PathOf(in); err != nil || got != want {
			t.Errorf("PathOf(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "/", "c:/x", "../"} {
		if _, err := PathOf(in); !errors.Is(err, ErrBadPath) {
			t.Errorf("PathOf(%q): %v", in, err)
		}
	}
}

func TestWatchStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		v := openVault(t, newStore(t), Options{Settings: &livesync.Settings{}})
		n := 0
		stop := v.Watch(ctx, func(Event) { n++ })
		wctx, cancel := context.WithCancel(ctx)
		m := 0
		v.Watch(wctx, func(Event) { m++ })
		v.Write(ctx, "a.md", []byte("1"), WriteOptions{})
		stop()
		cancel()
		synctest.Wait()
		v.Write(ctx, "a.md", []byte("2"), WriteOptions{})
		if n != 1 || m != 1 {
			t.Fatalf("events after stop: %d, after the context ended: %d", n, m)
		}
	})
}

func TestCloseLeavesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		v := openVault(t, newStore(t), Options{Settings: &livesync.Settings{}})
		v.Watch(ctx, func(Event) {})
		if _, err := v.Write(ctx, "a.md", []byte("x"), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := v.ReadMeta(ctx, livesync.Meta{}); !errors.Is(err, ErrClosed) {
			t.Fatalf("ReadMeta after Close: %v", err)
		}
		// synctest.Test fails if a goroutine of the bubble is left.
	})
}

// Without a remote that can fetch by id, a read waits while a finite
// sync of the vault runs, and gets the chunks it brought.
func TestReadWaitsForFiniteSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := newStore(t)
		v := openVault(t, st, Options{Settings: &livesync.Settings{}})
		chunks := putMetaOnly(t, st, "late.md", "arrives during the sync")
		got := make(chan string, 1)
		err := v.act.RunFinite(ctx, "pull", func(ctx context.Context) error {
			go func() {
				b, err := v.Read(context.Background(), "late.md")
				if err != nil {
					got <- err.Error()
					return
				}
				got <- string(b)
			}()
			synctest.Wait() // the read waits
			return st.PutChunks(ctx, chunks)
		})
		if err != nil {
			t.Fatal(err)
		}
		if s := <-got; s != "arrives during the sync" {
			t.Fatalf("read %q", s)
		}
	})
}

func TestDefaultSettings(t *testing.T) {
	if s := DefaultSettings(false); s.CustomChunkSize != 60 || s.Encrypt || s.PathObfuscation {
		t.Errorf("a CouchDB vault: %+v", s)
	}
	if s := DefaultSettings(true); s.CustomChunkSize != 10 || s.Encrypt || s.PathObfuscation {
		t.Errorf("a journal vault: %+v", s)
	}
}
