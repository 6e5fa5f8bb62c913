package holdback

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// A served database with a passphrase judges readable metadata only
// until the vault's salt is written; that write rebuilds the hold-back
// with the vault's codec (and tells the hooks), the milestone's write
// tells them too, and Close stops the hooks first and leaves the
// database open.
func TestServedRekeysWhenTheSaltArrives(t *testing.T) {
	ctx := context.Background()
	inner, err := store.NewMemory(store.Options{Name: "vault"})
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	v := NewServed(ctx, inner, ServedConfig{Name: "vault", Passphrase: "served-test", Holdback: Config{}})
	var params, settings, stops int
	err = v.Open(ServedHooks{
		ParamsChanged:   func(context.Context) { params++ },
		SettingsChanged: func() { settings++ },
		Stop:            func() { stops++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := v.Codec(); c != nil || v.Mode() != ModeReadable || !v.HasPassphrase() {
		t.Fatalf("before the salt: codec %v, mode %s", c, v.Mode())
	}

	salt := make([]byte, 32)
	salt[0] = 7
	raw, err := json.Marshal(negotiate.NewSyncParameters(salt))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.PutLocal(ctx, negotiate.SyncParametersLocalID, raw); err != nil {
		t.Fatal(err)
	}
	c, got := v.Codec()
	if c == nil || string(got) != string(salt) || v.Mode() != ModeDecrypt || params != 1 {
		t.Fatalf("after the salt: codec %v, salt %x, mode %s, params hook %d", c, got, v.Mode(), params)
	}
	if s := v.Stats(); s.Mode != ModeDecrypt {
		t.Fatalf("stats after the rebuild: %+v", s)
	}

	m := negotiate.NewMilestone("node1", time.UnixMilli(1700000000000))
	raw, err = json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.PutLocal(ctx, negotiate.MilestoneLocalID, raw); err != nil {
		t.Fatal(err)
	}
	if settings != 1 || params != 1 {
		t.Fatalf("milestone write: settings hook %d, params hook %d", settings, params)
	}

	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if stops != 1 {
		t.Fatalf("Stop hook called %d times", stops)
	}
	if _, err := inner.Info(ctx); err != nil {
		t.Fatalf("the database was closed with the served view: %v", err)
	}
}

// Without a passphrase the served database never builds a codec, even
// when the vault has a salt.
func TestServedWithoutPassphrase(t *testing.T) {
	ctx := context.Background()
	inner, err := store.NewMemory(store.Options{Name: "vault"})
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	raw, _ := json.Marshal(negotiate.NewSyncParameters(make([]byte, 32)))
	if err := inner.PutLocal(ctx, negotiate.SyncParametersLocalID, raw); err != nil {
		t.Fatal(err)
	}
	v := NewServed(ctx, inner, ServedConfig{Name: "vault", Holdback: Config{}})
	if err := v.Open(ServedHooks{}); err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if c, _ := v.Codec(); c != nil || v.Mode() != ModeReadable || v.HasPassphrase() {
		t.Fatalf("codec %v, mode %s", c, v.Mode())
	}
}
