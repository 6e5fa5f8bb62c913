package tests

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

func tweaks(t *testing.T, encrypt bool) negotiate.TweakValues {
	t.Helper()
	s := livesync.Settings{}
	if encrypt {
		s.Encrypt, s.Passphrase = true, "p"
	}
	return s.TweakValues()
}

func TestHandshakeFreshDatabaseCreatesSaltOnce(t *testing.T) {
	testHandshakeFreshDatabaseCreatesSaltOnce(t, couchServer)
}

func testHandshakeFreshDatabaseCreatesSaltOnce(t *testing.T, srv couchFactory) {
	name := dbName(t)
	db := openDB(t, srv, name, false, nil)
	ctx := ctxT(t)
	opts := couchdb.HandshakeOptions{NodeID: "node-a", Settings: tweaks(t, false), CreateIfMissing: true}
	salt, v, err := db.Handshake(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Destroy(ctxT(t)) })
	if len(salt) != negotiate.SaltSize || v.Kind != negotiate.VerdictOK {
		t.Fatalf("salt %d bytes, verdict %v", len(salt), v.Kind)
	}
	again, _, err := db.Handshake(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(salt) {
		t.Fatal("a second handshake changed the salt")
	}
	other, _, err := db.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "node-b", Settings: tweaks(t, false)})
	if err != nil || string(other) != string(salt) {
		t.Fatalf("second node: err %v, same salt %v", err, string(other) == string(salt))
	}
	// The version document and the milestone were written.
	raw, err := db.GetLocal(ctx, "obsydian_livesync_milestone")
	if err != nil {
		t.Fatal(err)
	}
	m, err := negotiate.ParseMilestone(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(m.AcceptedNodes, "node-a") || m.NodeInfo["node-b"].LastConnected == 0 {
		t.Fatalf("milestone %s", raw)
	}
	page, err := db.Changes(ctx, engine.ChangesRequest{})
	if err != nil || len(page.Results) != 1 || page.Results[0].ID != negotiate.VersionDocID {
		t.Fatalf("changes after handshake: %+v %v, want only the version document", page.Results, err)
	}
}

func TestHandshakeMissingDatabase(t *testing.T) { testHandshakeMissingDatabase(t, couchServer) }

func testHandshakeMissingDatabase(t *testing.T, srv couchFactory) {
	db := openDB(t, srv, dbName(t), false, nil)
	_, _, err := db.Handshake(ctxT(t), couchdb.HandshakeOptions{NodeID: "n", Settings: tweaks(t, false)})
	if !errors.Is(err, couchdb.ErrNoDatabase) {
		t.Fatalf("missing database: %v, want ErrNoDatabase", err)
	}
}

// A failed read of the sync parameters (here: a wrong password) is an
// error and never creates a salt (upstream created one:
// github.com/vrtmrz/obsidian-livesync/issues/1147).
func TestHandshakeFailedReadNeverCreatesSalt(t *testing.T) {
	testHandshakeFailedReadNeverCreatesSalt(t, couchServer)
}

func testHandshakeFailedReadNeverCreatesSalt(t *testing.T, srv couchFactory) {
	good := freshDB(t, srv, nil)
	bad := openDB(t, srv, good.Name(), false, func(c *couchdb.Config) { c.Password += "-wrong" })
	ctx := ctxT(t)
	_, _, err := bad.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "n", Settings: tweaks(t, false), CreateIfMissing: true})
	var ee *engine.Error
	if !errors.As(err, &ee) || ee.Stage != engine.StageAuth {
		t.Fatalf("wrong password: %v, want an auth error", err)
	}
	if _, err := good.GetLocal(ctx, "obsidian_livesync_sync_parameters"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("sync parameters after a failed handshake: %v, want none", err)
	}
}

func TestHandshakeKeepsExistingSalt(t *testing.T) { testHandshakeKeepsExistingSalt(t, couchServer) }

func testHandshakeKeepsExistingSalt(t *testing.T, srv couchFactory) {
	db := freshDB(t, srv, nil)
	ctx := ctxT(t)
	want := make([]byte, 32)
	want[0] = 7
	p, _ := json.Marshal(negotiate.NewSyncParameters(want))
	if err := db.PutLocal(ctx, "obsidian_livesync_sync_parameters", p); err != nil {
		t.Fatal(err)
	}
	salt, _, err := db.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "n", Settings: tweaks(t, false)})
	if err != nil || string(salt) != string(want) {
		t.Fatalf("salt kept: %v, err %v", string(salt) == string(want), err)
	}
}

func TestHandshakeLockedRemote(t *testing.T) { testHandshakeLockedRemote(t, couchServer) }

func testHandshakeLockedRemote(t *testing.T, srv couchFactory) {
	db := freshDB(t, srv, nil)
	ctx := ctxT(t)
	owner := couchdb.HandshakeOptions{NodeID: "owner", Settings: tweaks(t, false)}
	if _, _, err := db.Handshake(ctx, owner); err != nil {
		t.Fatal(err)
	}
	raw, _ := db.GetLocal(ctx, "obsydian_livesync_milestone")
	m, _ := negotiate.ParseMilestone(raw)
	m.Lock("owner", negotiate.CouchDBChunkRange, false)
	b, _ := json.Marshal(m)
	if err := db.PutLocal(ctx, "obsydian_livesync_milestone", b); err != nil {
		t.Fatal(err)
	}
	other := couchdb.HandshakeOptions{NodeID: "other", Settings: tweaks(t, false)}
	_, v, err := db.Handshake(ctx, other)
	if !errors.Is(err, negotiate.ErrNodeLocked) || v.Kind != negotiate.VerdictNodeLocked {
		t.Fatalf("locked remote: %v (%v), want ErrNodeLocked", err, v.Kind)
	}
	raw, _ = db.GetLocal(ctx, "obsydian_livesync_milestone")
	if m, _ = negotiate.ParseMilestone(raw); slices.Contains(m.AcceptedNodes, "other") {
		t.Fatal("joined accepted_nodes without AllowJoin")
	}
	other.AllowJoin = true
	_, v, err = db.Handshake(ctx, other)
	if err != nil || v.Kind != negotiate.VerdictLocked {
		t.Fatalf("with AllowJoin: %v (%v), want LOCKED and no error", err, v.Kind)
	}
	raw, _ = db.GetLocal(ctx, "obsydian_livesync_milestone")
	if m, _ = negotiate.ParseMilestone(raw); !slices.Contains(m.AcceptedNodes, "other") {
		t.Fatal("AllowJoin did not join accepted_nodes")
	}
}

func TestHandshakeTweakMismatch(t *testing.T) { testHandshakeTweakMismatch(t, couchServer) }

func testHandshakeTweakMismatch(t *testing.T, srv couchFactory) {
	db := freshDB(t, srv, nil)
	ctx := ctxT(t)
	if _, _, err := db.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "a", Settings: tweaks(t, false)}); err != nil {
		t.Fatal(err)
	}
	_, v, err := db.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "b", Settings: tweaks(t, true)})
	var tm *negotiate.TweakMismatchError
	if !errors.As(err, &tm) || v.Kind != negotiate.VerdictMismatched || !tm.Breaking() {
		t.Fatalf("mismatch: %v (%v), want a breaking *TweakMismatchError", err, v.Kind)
	}
}
