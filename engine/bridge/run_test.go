package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault/vaulttest"
)

// memLocal is a database without hold-back or passphrase.
type memLocal struct{ store.Store }

func (l memLocal) BulkDocsFrom(ctx context.Context, _ string, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	return l.BulkDocs(ctx, docs)
}
func (memLocal) ChunksArrived([]engine.ChunkID)   {}
func (memLocal) Codec() (*livesync.Codec, []byte) { return nil, nil }
func (memLocal) HasPassphrase() bool              { return false }

// rawDocs reads a store's documents by id, as couchdb.DB.DocsByID does.
type rawDocs struct{ st store.Store }

func (r rawDocs) DocsByID(ctx context.Context, ids []string) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	for _, id := range ids {
		raw, err := r.st.Get(ctx, id, store.GetOptions{})
		switch {
		case errors.Is(err, engine.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			out[id] = raw
		}
	}
	return out, nil
}

// memPair returns an in-memory relay database and an in-memory
// CouchDB-like upstream, both closed when the test ends.
func memPair(t *testing.T) (store.Store, *vaulttest.Remote) {
	t.Helper()
	local, err := store.NewMemory(store.Options{Name: "local"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	up := vaulttest.NewRemote("mem://up")
	t.Cleanup(func() { up.Close() })
	return local, up
}

// startMemBridge starts a bridge of local to the one upstream up, a
// CouchDB upstream in mode, and lets it run for two (virtual) seconds.
// Call it in a synctest bubble.
func startMemBridge(t *testing.T, local store.Store, up *vaulttest.Remote, mode string) *Bridge {
	t.Helper()
	b, err := New(memLocal{local}, Config{DB: "vault", UUID: "uuid", Upstreams: []Upstream{{
		Name: "up", Kind: KindCouchDB, Mode: mode, Location: "mem://up/db", ThrottleKey: "mem:1",
		Remote: up, Docs: rawDocs{up.Store()},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	b.Start()
	time.Sleep(2 * time.Second)
	synctest.Wait()
	return b
}

func putDoc(t *testing.T, st store.Store, id string) {
	t.Helper()
	raw := fmt.Sprintf(`{"_id":%q,"_rev":"1-%032x","type":"plain","data":"x","_revisions":{"start":1,"ids":["%032x"]}}`, id, len(id), len(id))
	if _, err := st.BulkDocs(t.Context(), []json.RawMessage{json.RawMessage(raw)}); err != nil {
		t.Fatal(err)
	}
}

func has(st store.Store, id string) bool {
	_, err := st.Get(context.Background(), id, store.GetOptions{})
	return err == nil
}

// TestBridgeForwardsBothWays runs a bridge over an in-memory database
// and an in-memory CouchDB-like upstream, with no salt and no
// passphrase: documents cross unchanged in both directions, the
// upstream is live with a forward boundary, the counters move, and the
// relay's marker and memory are written. Stop leaves the runners ended.
func TestBridgeForwardsBothWays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		local, up := memPair(t)
		putDoc(t, up.Store(), "from-upstream")
		putDoc(t, local, "from-local")
		b := startMemBridge(t, local, up, ModeSync)
		if !has(local, "from-upstream") || !has(up.Store(), "from-local") {
			t.Fatalf("not bridged: local has the upstream's %v, upstream has the local's %v", has(local, "from-upstream"), has(up.Store(), "from-local"))
		}
		ups, hs := b.Snapshot()
		u := ups[0]
		if u.State != StateLive || u.Boundary != BoundaryForward || u.DocsPulled == 0 || u.DocsPushed == 0 || u.Errors != 0 || u.Lag != 0 {
			t.Errorf("status %+v", u)
		}
		if !b.Up(0) || hs.Limits.MaxInFlight != hunt.DefaultMaxInFlight || b.SourceName("mem:1") != "up" {
			t.Errorf("up %v, hunt %+v, source %q", b.Up(0), hs, b.SourceName("mem:1"))
		}
		if _, err := up.Store().GetLocal(t.Context(), (&upstream{b: b}).markerID()); err != nil {
			t.Errorf("no marker on the upstream: %v", err)
		}
		putDoc(t, up.Store(), "later")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if !has(local, "later") {
			t.Error("live replication did not bring a later document")
		}
		b.Stop()
		if ups, _ := b.Snapshot(); ups[0].State != StateStopped {
			t.Errorf("after Stop: %s", ups[0].State)
		}
		if _, err := up.Store().Info(t.Context()); !errors.Is(err, store.ErrClosed) {
			t.Errorf("the upstream's remote is open after Stop: %v", err)
		}
	})
}

// TestBridgeAdoptsTheUpstreamSalt: a database without a salt takes the
// first CouchDB upstream's sync parameters, so documents cross
// unchanged; the relay's memory of the upstream keeps the salt's
// fingerprint, never the salt.
func TestBridgeAdoptsTheUpstreamSalt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		local, up := memPair(t)
		salt, _ := negotiate.NewSalt(nil)
		params, _ := json.Marshal(negotiate.NewSyncParameters(salt))
		if err := up.Store().PutLocal(t.Context(), negotiate.SyncParametersLocalID, params); err != nil {
			t.Fatal(err)
		}
		b := startMemBridge(t, local, up, ModePull)
		_, got, err := b.relaySalt(t.Context())
		if err != nil || !bytes.Equal(got, salt) {
			t.Fatalf("the database's salt %x (%v), want the upstream's", got, err)
		}
		ups, _ := b.Snapshot()
		if u := ups[0]; u.State != StateLive || u.Boundary != BoundaryForward || u.LagPush != 0 {
			t.Errorf("status %+v", u)
		}
		mem, err := (&upstream{b: b, spec: Upstream{Location: "mem://up/db"}}).loadMemory(t.Context())
		if err != nil || mem.Salt != saltFingerprint(salt) || mem.Marker == "" {
			t.Errorf("memory %+v %v", mem, err)
		}
		b.Stop()
	})
}
