package vault

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault/vaulttest"
)

// device is one device of a test: a vault over its own replica.
type device struct {
	v  *Vault
	st store.Store
	ev *events
}

func newDevice(t *testing.T, o Options) *device {
	t.Helper()
	st, err := store.NewMemory(store.Options{Name: "local"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := Open(context.Background(), st, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		v.Close()
		st.Close()
	})
	return &device{v: v, st: st, ev: watch(v)}
}

func (d *device) attach(t *testing.T, r Remote, o AttachOptions) *Link {
	t.Helper()
	l, err := d.v.Attach(context.Background(), r, o)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	return l
}

func (d *device) write(t *testing.T, p, text string) {
	t.Helper()
	if _, err := d.v.Write(context.Background(), p, []byte(text), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (d *device) read(t *testing.T, p string) string {
	t.Helper()
	b, err := d.v.Read(context.Background(), p)
	if err != nil {
		t.Fatalf("Read %s: %v", p, err)
	}
	return string(b)
}

// metadataOnlyDevice is a device that pulled, metadata only, a.md
// ("alpha") that another device pushed to r: a.md is held, its chunks
// on r only; lb is its link to r.
func metadataOnlyDevice(t *testing.T, r *vaulttest.Remote) (b *device, lb *Link) {
	t.Helper()
	ctx := context.Background()
	a := newDevice(t, Options{Settings: &livesync.Settings{}})
	la := a.attach(t, r, AttachOptions{Create: true})
	a.write(t, "a.md", "alpha")
	if _, err := a.v.Push(ctx, la, SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	b = newDevice(t, Options{})
	lb = b.attach(t, r, AttachOptions{})
	if _, err := b.v.Pull(ctx, lb, SyncOptions{MetadataOnly: true}); err != nil {
		t.Fatal(err)
	}
	return b, lb
}

func remotes() map[string]func() *vaulttest.Remote {
	return map[string]func() *vaulttest.Remote{
		"endpoint": func() *vaulttest.Remote { return vaulttest.NewRemote("mem://couch/db") },
		"journal":  func() *vaulttest.Remote { return vaulttest.NewJournal("mem://bucket/vault", true) },
	}
}

func TestPushPull(t *testing.T) {
	for name, newRemote := range remotes() {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			r := newRemote()
			defer r.Close()
			a := newDevice(t, Options{Settings: &livesync.Settings{CustomChunkSize: 30}})
			la := a.attach(t, r, AttachOptions{Create: true})
			a.write(t, "notes/a.md", "alpha")
			a.write(t, "notes/b.md", "beta")
			res, err := a.v.Push(ctx, la, SyncOptions{})
			if err != nil || res.Push.DocsWritten == 0 {
				t.Fatalf("Push: %+v %v", res, err)
			}
			if s := a.v.Remote(r.ID()); s == nil || s.LastPush.IsZero() {
				t.Fatalf("the push is not remembered: %+v", s)
			}

			b := newDevice(t, Options{})
			lb := b.attach(t, r, AttachOptions{})
			if _, err := b.v.Pull(ctx, lb, SyncOptions{}); err != nil {
				t.Fatal(err)
			}
			if got := b.read(t, "notes/a.md") + b.read(t, "notes/b.md"); got != "alphabeta" {
				t.Fatalf("read %q", got)
			}
			if s, err := b.v.Settings(); err != nil || s.CustomChunkSize != 30 {
				t.Fatalf("b took the remote's preferred settings: %+v %v", s, err)
			}
			want := []string{"created notes/a.md", "created notes/b.md"}
			if got := b.ev.files(); !slices.Equal(got, want) {
				t.Fatalf("events %v, want %v", got, want)
			}
			if s := b.v.Remote(r.ID()); s == nil || s.LastPull.IsZero() {
				t.Fatalf("the pull is not remembered: %+v", s)
			}
		})
	}
}

func TestMetadataOnlyHeldThenRead(t *testing.T) {
	ctx := t.Context()
	r := vaulttest.NewRemote("mem://couch/db")
	defer r.Close()
	b, lb := metadataOnlyDevice(t, r)
	held, err := b.v.Held(ctx)
	if err != nil || len(held) != 1 || held[0].Meta.Path != "a.md" || held[0].Source != r.ID() || held[0].Since.IsZero() {
		t.Fatalf("Held = %+v, %v", held, err)
	}
	if got := b.read(t, "a.md"); got != "alpha" {
		t.Fatalf("read %q", got)
	}
	if held, _ := b.v.Held(ctx); len(held) != 0 {
		t.Fatalf("still held after the read fetched its chunks: %+v", held)
	}
	want := []string{"held a.md", "released a.md"}
	if got := b.ev.files(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	// The chunks were kept: the file reads without the remote.
	b.v.Detach(lb)
	if got := b.read(t, "a.md"); got != "alpha" {
		t.Fatalf("read after detaching %q", got)
	}
}

func TestJournalWithoutDirectFetch(t *testing.T) {
	ctx := t.Context()
	r := vaulttest.NewJournal("mem://bucket/vault", false)
	b := newDevice(t, Options{Settings: &livesync.Settings{}})
	lb := b.attach(t, r, AttachOptions{Create: true})
	if lb.Chunks() != nil {
		t.Fatal("a journal without direct fetch has no chunk source")
	}
	if _, err := b.v.Pull(ctx, lb, SyncOptions{MetadataOnly: true}); !errors.Is(err, ErrMetadataOnlyJournal) {
		t.Fatalf("metadata-only pull of a journal: %v", err)
	}
	putMetaOnly(t, b.st, "x.md", "text")
	_, err := b.v.Read(ctx, "x.md")
	var me *MissingChunksError
	if !errors.As(err, &me) || len(me.NoFetch) != 1 || me.NoFetch[0] != r.ID() {
		t.Fatalf("Read: %v", err)
	}
}

func TestAttachWrongPassphrase(t *testing.T) {
	for name, newRemote := range remotes() {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			r := newRemote()
			a := newDevice(t, Options{Settings: &livesync.Settings{Encrypt: true, Passphrase: "right"}})
			la := a.attach(t, r, AttachOptions{Create: true})
			a.write(t, "a.md", "secret text")
			if _, err := a.v.Push(ctx, la, SyncOptions{}); err != nil {
				t.Fatal(err)
			}
			b := newDevice(t, Options{})
			_, err := b.v.Attach(ctx, r, AttachOptions{Passphrase: func() (string, error) { return "wrong", nil }})
			var pe *PassphraseError
			if !errors.As(err, &pe) || pe.Remote != r.ID() || !errors.Is(err, engine.ErrDecrypt) {
				t.Fatalf("Attach with a wrong passphrase: %v", err)
			}
			if b.v.HasVault() {
				t.Fatal("a refused attach recorded the vault")
			}
			lb := b.attach(t, r, AttachOptions{Passphrase: func() (string, error) { return "right", nil }})
			if _, err := b.v.Pull(ctx, lb, SyncOptions{}); err != nil {
				t.Fatal(err)
			}
			if got := b.read(t, "a.md"); got != "secret text" {
				t.Fatalf("read %q", got)
			}
		})
	}
}

func TestAttachLockedRemote(t *testing.T) {
	ctx := t.Context()
	r := vaulttest.NewRemote("mem://couch/db")
	a := newDevice(t, Options{Settings: &livesync.Settings{}})
	la := a.attach(t, r, AttachOptions{Create: true})
	a.write(t, "a.md", "alpha")
	if _, err := a.v.Push(ctx, la, SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	node, _ := a.v.NodeID(ctx)
	if _, err := negotiate.Lock(ctx, r.Port(), node, r.ChunkRange(), false, time.Now()); err != nil {
		t.Fatal(err)
	}

	// A replica holding documents is refused, and may read without
	// joining.
	stale := newDevice(t, Options{Settings: &livesync.Settings{}})
	stale.write(t, "old.md", "old")
	_, err := stale.v.Attach(ctx, r, AttachOptions{})
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, negotiate.ErrNodeLocked) {
		t.Fatalf("Attach of a stale replica: %v", err)
	}
	stale.attach(t, r, AttachOptions{ReadOnly: true})

	// An empty one joins.
	asked := false
	fresh := newDevice(t, Options{})
	lf := fresh.attach(t, r, AttachOptions{Admit: func(ctx context.Context, l Locked) (bool, error) {
		asked = true
		return DefaultAdmit(ctx, l)
	}})
	if !asked {
		t.Fatal("Admit was not asked")
	}
	if _, err := fresh.v.Pull(ctx, lf, SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	m, _ := negotiate.ReadMilestone(ctx, r.Port())
	fnode, _ := fresh.v.NodeID(ctx)
	if len(m.AcceptedNodes) != 2 || m.AcceptedNodes[1] != fnode && m.AcceptedNodes[0] != fnode {
		t.Fatalf("accepted nodes %v", m.AcceptedNodes)
	}
}

func TestLiveSyncStopsOnContext(t *testing.T) {
	for name, newRemote := range remotes() {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRemote()
				defer r.Close()
				a := newDevice(t, Options{Settings: &livesync.Settings{}})
				la := a.attach(t, r, AttachOptions{Create: true})
				b := newDevice(t, Options{})
				lb := b.attach(t, r, AttachOptions{})

				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() {
					_, err := b.v.Sync(ctx, lb, SyncOptions{Live: true, Interval: time.Second})
					done <- err
				}()
				synctest.Wait()
				a.write(t, "live.md", "arrives live")
				if _, err := a.v.Push(context.Background(), la, SyncOptions{}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(2 * time.Second) // the bubble's clock: one poll of a journal
				synctest.Wait()
				if got := b.ev.files(); !slices.Equal(got, []string{"created live.md"}) {
					t.Fatalf("events %v", got)
				}
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Fatalf("live sync ended with %v", err)
				}
				var states []string
				for _, e := range b.ev.ev {
					if e.Kind == SyncStarted || e.Kind == SyncStopped {
						states = append(states, e.Kind.String())
						if e.Kind == SyncStopped && !errors.Is(e.Err, context.Canceled) {
							t.Errorf("stopped with %v", e.Err)
						}
					}
				}
				if !slices.Equal(states, []string{"sync-started", "sync-stopped"}) {
					t.Fatalf("states %v", states)
				}
			})
		})
	}
}

func TestCloseStopsLiveSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := vaulttest.NewRemote("mem://couch/db")
		defer r.Close()
		b := newDevice(t, Options{Settings: &livesync.Settings{}})
		lb := b.attach(t, r, AttachOptions{Create: true})
		done := make(chan error, 1)
		go func() {
			_, err := b.v.Sync(context.Background(), lb, SyncOptions{Live: true})
			done <- err
		}()
		synctest.Wait()
		b.v.Close()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("live sync ended with %v", err)
		}
		if _, err := b.v.Pull(context.Background(), lb, SyncOptions{}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Pull after Close: %v", err)
		}
	})
}

func TestReadThroughJournalPackIndex(t *testing.T) {
	ctx := t.Context()
	r := vaulttest.NewJournal("mem://bucket/vault", true)
	a := newDevice(t, Options{Settings: &livesync.Settings{}})
	la := a.attach(t, r, AttachOptions{Create: true})
	a.write(t, "x.md", "in a pack")
	if _, err := a.v.Push(ctx, la, SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	b := newDevice(t, Options{})
	lb := b.attach(t, r, AttachOptions{})
	if lb.Chunks() == nil {
		t.Fatal("a journal with direct fetch has a chunk source")
	}
	putMetaOnly(t, b.st, "x.md", "in a pack")
	if got := b.read(t, "x.md"); got != "in a pack" {
		t.Fatalf("read %q", got)
	}
}
