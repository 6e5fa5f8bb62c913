package livesyncrpc

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine/rpcroom"
	"github.com/livesync-go/livesync-go/engine/store"
)

// The answers below were taken from PouchDB 9 (pouchdb-core with the
// memory adapter) for the same documents and requests; only the stack
// traces PouchDB leaks into error objects are left out.

// db.bulkGet answers as PouchDB's bulkGet shim: one result per entry,
// {missing: rev} for an absent revision, a found revision once, PouchDB
// error objects for a missing winner and a malformed revision.
func TestBulkGetPouchShape(t *testing.T) {
	n := &network{}
	a, b := newNode(t, n, "aaaa", nil), newNode(t, n, "bbbb", nil)
	meet(a, b)
	revA := put(t, a.st, "a", `"v":1`)
	revB := put(t, a.st, "b", `"v":1`)
	revB2 := put(t, a.st, "b", `"_rev":"`+revB+`","v":2`)
	revC := put(t, a.st, "c", `"v":1`)
	put(t, a.st, "c", `"_rev":"`+revC+`","_deleted":true`)
	got, err := call(t, b, MethodBulkGet, map[string]any{"revs": true, "docs": []map[string]string{
		{"id": "a", "rev": revA}, {"id": "a", "rev": "9-zzz"}, {"id": "b"}, {"id": "a", "rev": revA},
		{"id": "c"}, {"id": "zz"}, {"id": "zz", "rev": "bad"}, {"id": "a", "rev": "1-x"}}})
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Results []struct {
			ID   string            `json:"id"`
			Docs []json.RawMessage `json:"docs"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(got), &res); err != nil {
		t.Fatal(err)
	}
	var ids []string
	var docs []string
	for _, r := range res.Results {
		if len(r.Docs) != 1 {
			t.Fatalf("result %s has %d docs, want 1 each: %s", r.ID, len(r.Docs), got)
		}
		ids = append(ids, r.ID)
		docs = append(docs, string(r.Docs[0]))
	}
	if strings.Join(ids, ",") != "a,a,a,b,c,zz" {
		t.Fatalf("result ids %v, want a,a,a,b,c,zz: %s", ids, got)
	}
	for i, want := range []string{`{"ok":{`, `{"missing":"9-zzz"}`, `{"missing":"1-x"}`, `{"ok":{`,
		`{"error":{"status":404,"name":"not_found","message":"missing","error":true,"reason":"missing","docId":"c"}}`,
		`{"error":{"status":400,"name":"bad_request","message":"Invalid rev format","error":true}}`} {
		if !strings.HasPrefix(docs[i], want) {
			t.Errorf("entry %d = %s, want %s", i, docs[i], want)
		}
	}
	if !strings.Contains(docs[0], `"_rev":"`+revA+`"`) || !strings.Contains(docs[0], `"_revisions"`) ||
		!strings.Contains(docs[3], `"_rev":"`+revB2+`"`) {
		t.Errorf("documents %s and %s", docs[0], docs[3])
	}
	// Without revs:true there are no _revisions.
	got, _ = call(t, b, MethodBulkGet, map[string]any{"docs": []map[string]string{{"id": "a", "rev": revA}, {"id": "b"}}})
	if strings.Contains(got, "_revisions") || !strings.Contains(got, revB2) {
		t.Errorf("bulkGet without revs = %s", got)
	}
}

// db.changes: a limit of 0 means 1, "now" starts at update_seq, a since
// past the end comes back as last_seq, keys in PouchDB's order.
func TestChangesPouchShape(t *testing.T) {
	n := &network{}
	a, b := newNode(t, n, "aaaa", nil), newNode(t, n, "bbbb", nil)
	meet(a, b)
	rev := put(t, a.st, "d0", `"v":1`)
	put(t, a.st, "d1", `"v":1`)
	got, _ := call(t, b, MethodChanges, map[string]any{"since": 0, "limit": 0})
	if got != `{"results":[{"id":"d0","changes":[{"rev":"`+rev+`"}],"seq":1}],"last_seq":1}` {
		t.Errorf("limit 0 = %s", got)
	}
	got, _ = call(t, b, MethodChanges, map[string]any{"since": "now", "limit": 33})
	if got != `{"results":[],"last_seq":2}` {
		t.Errorf("since now = %s", got)
	}
	got, _ = call(t, b, MethodInfo)
	if got != `{"doc_count":2,"update_seq":2,"db_name":"vault-aaaa-livesync-v2"}` {
		t.Errorf("db.info = %s", got)
	}
}

// Errors of the served database cross as commonlib's asRpcErrorShape
// makes them of a PouchDB error: REMOTE_ERROR and the message, no
// details.
func TestServedErrorsHaveNoDetails(t *testing.T) {
	n := &network{}
	a, b := newNode(t, n, "aaaa", nil), newNode(t, n, "bbbb", nil)
	meet(a, b)
	_, err := call(t, b, MethodGet, "nothing")
	var re *rpcroom.Error
	if !errors.As(err, &re) || re.Code != rpcroom.CodeRemoteError || re.Message != "missing" || re.Details != nil {
		t.Fatalf("db.get of an absent document: %#v", err)
	}
	if !IsNotFound(err) {
		t.Fatal("IsNotFound does not recognise PouchDB's missing")
	}
}

// ReplicatorShim upserts the target checkpoint when it starts (so even a
// pull with nothing to do writes it once), and hands its progress
// callback the target's winning revision of every document of a page
// that had missing revisions, in source sequence order, without
// _revisions.
func TestReplicateShimCheckpointAndProgress(t *testing.T) {
	ctx := t.Context()
	n := &network{}
	a, b := newNode(t, n, "aaaa", nil), newNode(t, n, "bbbb", nil)
	meet(a, b)
	put(t, a.st, "y", `"v":1`)
	put(t, a.st, "x", `"v":1`)
	res, err := b.Pull(ctx, "aaaa", PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cpKey := "replication-checkpoint-" + DBName("vault-bbbb") + "-" + res.Mark
	rev := func() string {
		raw, err := b.st.GetLocal(ctx, cpKey)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Rev string `json:"_rev"`
		}
		_ = json.Unmarshal(raw, &d)
		return d.Rev
	}
	if got := rev(); got != "0-2" {
		t.Fatalf("checkpoint after the first pull at %s, want 0-2 (start, one batch)", got)
	}
	if _, err := b.Pull(ctx, "aaaa", PullOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := rev(); got != "0-3" {
		t.Fatalf("checkpoint after an idle pull at %s, want 0-3 (written back at the start)", got)
	}
	// y is edited on a; x is edited on both sides identically (b has
	// the revision already): the page holds both, only y is missing.
	yRev := leaves(t, a.st)["y"][0]
	xRev := leaves(t, a.st)["x"][0]
	put(t, a.st, "x", `"_rev":"`+xRev+`","v":2`)
	if _, err := b.st.BulkDocs(ctx, mustBulkGet(t, a, "x")); err != nil {
		t.Fatal(err)
	}
	put(t, a.st, "y", `"_rev":"`+yRev+`","v":2`)
	var got []string
	if _, err := b.Pull(ctx, "aaaa", PullOptions{OnBatch: func(_ context.Context, docs []json.RawMessage, _ ProgressInfo) {
		for _, d := range docs {
			got = append(got, string(d))
		}
	}}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !strings.Contains(got[0], `"_id":"x"`) || !strings.Contains(got[1], `"_id":"y"`) ||
		strings.Contains(got[0]+got[1], "_revisions") {
		t.Fatalf("progress documents %v, want the winners of x then y", got)
	}
}

// mustBulkGet returns the winning revision of id on n with _revisions.
func mustBulkGet(t *testing.T, n *node, id string) []json.RawMessage {
	t.Helper()
	doc, err := n.st.Get(t.Context(), id, store.GetOptions{Revs: true})
	if err != nil {
		t.Fatal(err)
	}
	return []json.RawMessage{doc}
}

// parseSeq is parseInt(String(seq).split("-")[0], 10), NaN as 0.
func TestParseSeqAsJavaScript(t *testing.T) {
	for in, want := range map[string]int64{`42`: 42, `"42-g1AAAA"`: 42, `""`: 0, `"x"`: 0, `" 7-a"`: 7,
		`"+8"`: 8, `"\u00a09"`: 9, `2.9`: 2, `-5`: 0, `1e21`: 1, `1.5e-7`: 1, `"12abc"`: 12, `true`: 0,
		`"99999999999999999999"`: math.MaxInt64} {
		if got := parseSeq(json.RawMessage(in)); got != want {
			t.Errorf("parseSeq(%s) = %d, want %d", in, got, want)
		}
	}
}

// Sync fails unless the peer answers legacy/reqSync with ok:true, as the
// plugin's p2p-sync command does; the plugin's Error objects arrive as {}.
func TestSyncNeedsOK(t *testing.T) {
	for answer, ok := range map[string]bool{`{"ok":true}`: true, `{"error":{}}`: false, `{}`: false,
		`{"ok":false}`: false, `{"error":{"message":"busy"}}`: false} {
		n := &network{}
		a, b := newNode(t, n, "aaaa", nil), newNode(t, n, "bbbb", nil)
		meet(a, b)
		b.room.Handle(MethodReqSync, func(context.Context, string, []json.RawMessage) (any, error) {
			return json.RawMessage(answer), nil
		})
		_, err := a.Sync(t.Context(), "bbbb", PullOptions{})
		if ok != (err == nil) || (!ok && !errors.Is(err, ErrRemoteSync)) {
			t.Errorf("reqSync answered %s: %v", answer, err)
		}
	}
}
