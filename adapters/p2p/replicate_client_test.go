//go:build !js

package p2p

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/livesync-go/livesync-go/engine"
)

// hostile is a peer that answers what a test sets.
type hostile struct {
	mu    sync.Mutex // held while answering
	asked atomic.Int64
}

// set runs fn (which changes what the peer answers) under the peer's
// lock.
func (h *hostile) set(fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fn()
}

// hostilePeer serves ReplicateProtocol with answer, under the returned
// peer's lock (the client is not checked for approval), and returns a
// Remote of it with the given timeout; asked counts the requests.
func hostilePeer(t *testing.T, timeout time.Duration, answer func(req request) response) (*Remote, *hostile) {
	t.Helper()
	server, client := newTestHost(t), newTestHost(t)
	hp := &hostile{}
	server.SetStreamHandler(ReplicateProtocol, func(s network.Stream) {
		defer s.Close()
		var req request
		if _, err := readJSON(s, MaxFrameSize, &req); err != nil {
			_ = s.Reset()
			return
		}
		hp.asked.Add(1)
		hp.mu.Lock()
		resp := answer(req)
		hp.mu.Unlock()
		if resp.Status == "" {
			resp.Status = statusOK
		}
		_, _ = writeJSON(s, resp)
	})
	return NewRemote(client, addrInfo(server), RemoteOptions{Group: "g", Timeout: timeout}), hp
}

func isProtocolErr(err error) bool {
	var ee *engine.Error
	return errors.As(err, &ee) && ee.Stage == engine.StageProtocol
}

// A bulk_get answer holding a document not asked for (another id, another
// revision), one asked once but sent twice, or something that is not a
// JSON object is a protocol error; a good answer comes back in request
// order.
func TestClientChecksBulkGet(t *testing.T) {
	var docs []json.RawMessage
	r, hp := hostilePeer(t, 5*time.Second, func(request) response { return response{Docs: docs} })
	ep := r.Endpoint()
	asked := []engine.DocRev{{ID: "a", Rev: "1-a"}, {ID: "b", Rev: "1-b"}}
	for _, bad := range [][]json.RawMessage{
		{json.RawMessage(`{"_id":"secret","_rev":"1-a"}`)},
		{json.RawMessage(`{"_id":"a","_rev":"9-z"}`)},
		{json.RawMessage(`{"_id":"a","_rev":"1-a"}`), json.RawMessage(`{"_id":"a","_rev":"1-a"}`)},
		{json.RawMessage(`["_id","a"]`)},
		{json.RawMessage(`"{\"_id\":\"a\"}"`)},
	} {
		hp.set(func() { docs = bad })
		if got, err := ep.BulkGet(t.Context(), asked); !isProtocolErr(err) {
			t.Fatalf("answer %s: %s, %v; want a protocol error", bad, got, err)
		}
	}
	hp.set(func() {
		docs = []json.RawMessage{json.RawMessage(`{"_id":"b","_rev":"1-b"}`), json.RawMessage(`{"_id":"a","_rev":"1-a"}`)}
	})
	got, err := ep.BulkGet(t.Context(), asked)
	if err != nil || len(got) != 2 || !strings.Contains(string(got[0]), `"a"`) {
		t.Fatalf("a good answer: %s, %v; want a then b", got, err)
	}
}

// A revs_diff answer about a document or a revision not asked about is a
// protocol error (a push would otherwise send documents the engine never
// meant to).
func TestClientChecksRevsDiff(t *testing.T) {
	var missing map[string][]string
	r, hp := hostilePeer(t, 5*time.Second, func(request) response { return response{Missing: missing} })
	asked := map[string][]string{"a": {"1-a", "2-a"}}
	for _, bad := range []map[string][]string{{"other": {"1-o"}}, {"a": {"3-a"}}, {"a": {"1-a", "1-a"}}} {
		hp.set(func() { missing = bad })
		if got, err := r.Endpoint().RevsDiff(t.Context(), asked); !isProtocolErr(err) {
			t.Fatalf("answer %v: %v, %v; want a protocol error", bad, got, err)
		}
	}
	hp.set(func() { missing = map[string][]string{"a": {"2-a"}} })
	if got, err := r.Endpoint().RevsDiff(t.Context(), asked); err != nil || len(got["a"]) != 1 {
		t.Fatalf("a good answer: %v, %v", got, err)
	}
}

// A bulk_docs answer may report only on the documents sent, once each.
func TestClientChecksBulkDocs(t *testing.T) {
	var written []wireResult
	r, hp := hostilePeer(t, 5*time.Second, func(request) response { return response{Written: written} })
	docs := []json.RawMessage{json.RawMessage(`{"_id":"a","_rev":"1-a"}`)}
	for _, bad := range [][]wireResult{{{ID: "b", Rev: "1-b"}}, {{ID: "a"}, {ID: "a"}}} {
		hp.set(func() { written = bad })
		if got, err := r.Endpoint().BulkDocs(t.Context(), docs); !isProtocolErr(err) {
			t.Fatalf("answer %v: %v, %v; want a protocol error", bad, got, err)
		}
	}
}

// A changes page with more rows than the limit asked for, or a sequence
// far longer than any store's (in a page or in the database's info), is
// a protocol error.
func TestClientChecksChanges(t *testing.T) {
	var resp response
	r, hp := hostilePeer(t, 5*time.Second, func(request) response { return resp })
	row := wireChange{Seq: "1", ID: "a", Revs: []string{"1-a"}}
	hp.set(func() { resp = response{Results: []wireChange{row, row, row}, LastSeq: "3"} })
	if got, err := r.Endpoint().Changes(t.Context(), engine.ChangesRequest{Limit: 2}); !isProtocolErr(err) {
		t.Fatalf("3 rows for a limit of 2: %+v, %v; want a protocol error", got, err)
	}
	hp.set(func() { resp = response{Results: []wireChange{row}, LastSeq: strings.Repeat("9", 1<<20)} })
	if got, err := r.Endpoint().Changes(t.Context(), engine.ChangesRequest{}); !isProtocolErr(err) {
		t.Fatalf("a last_seq of 1 MiB: %d rows, %v; want a protocol error", len(got.Results), err)
	}
	hp.set(func() { resp = response{Info: &wireInfo{Name: "db", UpdateSeq: strings.Repeat("9", 1<<20)}} })
	if got, err := r.Endpoint().Info(t.Context()); !isProtocolErr(err) {
		t.Fatalf("an update_seq of 1 MiB: %d bytes, %v; want a protocol error", len(got.UpdateSeq), err)
	}
}

// A peer that answers a longpoll at once with an empty page at the same
// sequence is asked again only after a pause, not in a tight loop.
func TestClientLongpollNoBusyLoop(t *testing.T) {
	r, hp := hostilePeer(t, 2*time.Second, func(req request) response { return response{LastSeq: req.Since} })
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	_, err := r.Endpoint().Changes(ctx, engine.ChangesRequest{Since: "5", Wait: true})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a longpoll never answered: %v; want the caller's deadline", err)
	}
	if n := hp.asked.Load(); n > 4 {
		t.Fatalf("the client asked %d times in 1.5 s", n)
	}
}
