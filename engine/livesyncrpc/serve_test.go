package livesyncrpc

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine/rpcroom"
)

// call invokes method on a from b and returns the answer's JSON.
func call(t *testing.T, b *node, method string, args ...any) (string, error) {
	t.Helper()
	raw, err := b.room.Call(context.Background(), "aaaa", method, args...)
	return string(raw), err
}

func TestServedShapes(t *testing.T) {
	n := &network{}
	a, b := newNode(t, n, "aaaa", nil), newNode(t, n, "bbbb", nil)
	meet(a, b)
	rev1 := put(t, a.st, "n1", `"v":1`)
	rev2 := put(t, a.st, "n2", `"v":2`)
	del := put(t, a.st, "n2", `"_rev":"`+rev2+`","_deleted":true`)

	got, err := call(t, b, MethodInfo)
	if err != nil || got != `{"doc_count":1,"update_seq":3,"db_name":"vault-aaaa-livesync-v2"}` {
		t.Fatalf("db.info = %s, %v", got, err)
	}
	got, err = call(t, b, MethodChanges, map[string]any{"since": "", "style": "all_docs", "limit": 33})
	want := `{"results":[{"id":"n1","changes":[{"rev":"` + rev1 + `"}],"seq":1},` +
		`{"id":"n2","changes":[{"rev":"` + del + `"}],"deleted":true,"seq":3}],"last_seq":3}`
	if err != nil || got != want {
		t.Fatalf("db.changes = %s, %v\nwant %s", got, err, want)
	}
	got, _ = call(t, b, MethodChanges, map[string]any{"since": 1, "limit": 1})
	if !strings.Contains(got, `"id":"n2"`) || !strings.Contains(got, `"last_seq":3`) {
		t.Fatalf("db.changes since 1 = %s", got)
	}
	got, _ = call(t, b, MethodChanges, map[string]any{"since": 3})
	if got != `{"results":[],"last_seq":3}` {
		t.Fatalf("db.changes at the end = %s", got)
	}
	got, _ = call(t, b, MethodRevsDiff, map[string][]string{"n1": {rev1, "9-x"}, "zz": {"1-a"}})
	if got != `{"n1":{"missing":["9-x"]},"zz":{"missing":["1-a"]}}` {
		t.Fatalf("db.revsDiff = %s", got)
	}
	got, _ = call(t, b, MethodBulkGet, map[string]any{"revs": true, "docs": []map[string]string{
		{"id": "n1", "rev": rev1}, {"id": "n1", "rev": "9-x"}, {"id": "zz", "rev": "1-a"}}})
	if !strings.HasPrefix(got, `{"results":[{"id":"n1","docs":[{"ok":{`) || !strings.Contains(got, `"_revisions"`) ||
		!strings.Contains(got, `{"id":"n1","docs":[{"missing":"9-x"}]}`) ||
		!strings.HasSuffix(got, `{"id":"zz","docs":[{"missing":"1-a"}]}]}`) {
		t.Fatalf("db.bulkGet = %s", got)
	}
	got, err = call(t, b, MethodGet, "n1")
	if err != nil || !strings.Contains(got, `"_rev":"`+rev1+`"`) {
		t.Fatalf("db.get = %s, %v", got, err)
	}
	_, err = call(t, b, MethodGet, "n2")
	if !IsNotFound(err) || !errors.Is(err, rpcroom.ErrRemote) || err.(*rpcroom.Error).Message != "missing" {
		t.Fatalf("db.get of a deleted document: %v", err)
	}
	// bulkDocs: new_edits=false answers only errors; the default writes.
	got, err = call(t, b, MethodBulkDocs, []json.RawMessage{json.RawMessage(
		`{"_id":"r","_rev":"2-bb","_revisions":{"start":2,"ids":["bb","aa"]},"v":1}`)}, map[string]bool{"new_edits": false})
	if err != nil || got != `[]` {
		t.Fatalf("db.bulkDocs new_edits=false = %s, %v", got, err)
	}
	got, err = call(t, b, MethodBulkDocs, map[string]any{"docs": []map[string]any{{"_id": "w", "v": 1}, {"_id": "n1", "v": 2}}})
	if err != nil || !strings.HasPrefix(got, `[{"ok":true,"id":"w","rev":"1-`) ||
		!strings.HasSuffix(got, `{"status":409,"name":"conflict","message":"Document update conflict","error":true,"id":"n1"}]`) {
		t.Fatalf("db.bulkDocs = %s, %v", got, err)
	}
	got, err = call(t, b, MethodPut, map[string]any{"_id": "p", "v": 1}, map[string]any{})
	if err != nil || !strings.HasPrefix(got, `{"ok":true,"id":"p","rev":"1-`) {
		t.Fatalf("db.put = %s, %v", got, err)
	}
}

func TestLocalDocuments(t *testing.T) {
	n := &network{}
	a, b := newNode(t, n, "aaaa", nil), newNode(t, n, "bbbb", nil)
	meet(a, b)
	_, err := call(t, b, MethodGet, "_local/m")
	var re *rpcroom.Error
	if !errors.As(err, &re) || re.Code != rpcroom.CodeRemoteError || re.Message != "missing" {
		t.Fatalf("absent _local document: %v", err)
	}
	got, err := call(t, b, MethodPut, map[string]any{"_id": "_local/m", "mark": "1"}, map[string]any{})
	if err != nil || got != `{"ok":true,"id":"_local/m","rev":"0-1"}` {
		t.Fatalf("first put = %s, %v", got, err)
	}
	if _, err := call(t, b, MethodPut, map[string]any{"_id": "_local/m", "mark": "2"}); err == nil ||
		err.(*rpcroom.Error).Message != "Document update conflict" {
		t.Fatalf("put without the current revision: %v", err)
	}
	got, err = call(t, b, MethodGet, "_local/m")
	if err != nil || got != `{"_id":"_local/m","_rev":"0-1","mark":"1"}` {
		t.Fatalf("get = %s, %v", got, err)
	}
	got, err = call(t, b, MethodPut, map[string]any{"_id": "_local/m", "_rev": "0-1", "mark": "3"})
	if err != nil || got != `{"ok":true,"id":"_local/m","rev":"0-2"}` {
		t.Fatalf("second put = %s, %v", got, err)
	}
}

func TestSeqHelpers(t *testing.T) {
	for in, want := range map[string]string{"": `""`, "0": "0", "42": "42", "042": `"042"`, "12-abc": `"12-abc"`} {
		if got := string(seqJSON(in)); got != want {
			t.Errorf("seqJSON(%q) = %s, want %s", in, got, want)
		}
	}
	for in, want := range map[string]string{``: "", `null`: "", `""`: "", `0`: "", `17`: "17", `"17"`: "17"} {
		if got, err := seqString(json.RawMessage(in)); err != nil || got != want {
			t.Errorf("seqString(%s) = %q, %v", in, got, err)
		}
	}
	if _, err := seqString(json.RawMessage(`1.5`)); err == nil {
		t.Error("a fractional since is accepted")
	}
	for in, want := range map[string]int64{`42`: 42, `"42-g1AAAA"`: 42, `""`: 0, `"x"`: 0} {
		if got := parseSeq(json.RawMessage(in)); got != want {
			t.Errorf("parseSeq(%s) = %d, want %d", in, got, want)
		}
	}
}

// Arguments of the wrong shape are answered with an error, never a
// panic or a hang.
func TestMalformedArguments(t *testing.T) {
	n := &network{}
	a, b := newNode(t, n, "aaaa", nil), newNode(t, n, "bbbb", nil)
	meet(a, b)
	methods := []string{MethodChanges, MethodRevsDiff, MethodBulkGet, MethodBulkDocs, MethodGet, MethodPut,
		MethodReqAuth, MethodReqSync, MethodOnProgress, MethodOnProgressAcknowledged}
	bad := []any{"x", 5, []int{1}, map[string]any{"since": map[string]int{}}, map[string]any{"docs": "no", "_id": 3}}
	for _, m := range methods {
		for _, arg := range bad {
			raw, err := call(t, b, m, arg, arg)
			if err != nil && !errors.Is(err, rpcroom.ErrRemote) {
				t.Errorf("%s(%v): %v", m, arg, err)
			}
			_ = raw
		}
	}
	if _, err := call(t, b, MethodInfo); err != nil {
		t.Fatal("the peer stopped serving")
	}
}
