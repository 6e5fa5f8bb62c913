//go:build !js

package p2p

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
)

func frameOf(payload []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	return append(b, payload...)
}

// FuzzReadRequest feeds the server's request reader arbitrary streams: it
// never panics, a request it accepts passes the protocol's checks (a
// changes limit within MaxChangesLimit, bulk_get and revs_diff within
// their counts, a known op) and only bulk_docs is read past
// maxReplicateRequest.
func FuzzReadRequest(f *testing.F) {
	for _, r := range []request{
		{Op: opInfo}, {Op: opChanges, Since: "3", Limit: 5000, Wait: true, WaitMS: 100, Selector: json.RawMessage(`{"type":{"$ne":"leaf"}}`)},
		{Op: opRevsDiff, Revs: map[string][]string{"a": {"1-a"}}}, {Op: opBulkGet, Get: []wireDocRev{{"a", "1-a"}}},
		{Op: opBulkDocs, Docs: []json.RawMessage{json.RawMessage(`{"_id":"a","_rev":"1-a"}`)}},
		{Op: opPutLocal, ID: "cp", Doc: json.RawMessage(`{}`)}, {Op: opRecWrite, Record: "_local/obsydian_livesync_milestone", Doc: json.RawMessage(`{}`)},
		{Op: opGetLocal, ID: "livesync-go-cli"}, {Op: "drop"},
	} {
		b, _ := json.Marshal(r)
		f.Add(frameOf(b))
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add(binary.BigEndian.AppendUint32(nil, maxReplicateRequest+1))
	f.Add(append(binary.BigEndian.AppendUint32(nil, maxReplicateRequest+100), bulkDocsPrefix...))
	f.Fuzz(func(t *testing.T, stream []byte) {
		req, n, drain, err := readRequest(bytes.NewReader(stream))
		var re *requestError
		if err != nil {
			if drain > 0 && (!errors.As(err, &re) || re.code != codeTooLarge) {
				t.Fatalf("drain %d after %v", drain, err)
			}
			return
		}
		if req.Op != opBulkDocs && n > maxReplicateRequest {
			t.Fatalf("a %s request of %d bytes was read", req.Op, n)
		}
		if err := checkRequest(&req); err != nil {
			t.Fatalf("an accepted request fails its check: %v", err)
		}
		if req.Op == opChanges && (req.Limit < 1 || req.Limit > MaxChangesLimit) {
			t.Fatalf("changes limit %d", req.Limit)
		}
		if len(req.Get) > MaxBulkGet || len(req.Revs) > MaxRevsDiff {
			t.Fatalf("counts over the limits: %d, %d", len(req.Get), len(req.Revs))
		}
		if (req.Op == opGetLocal || req.Op == opPutLocal) && reservedLocal(req.ID) {
			t.Fatalf("a reserved _local id %q was accepted", req.ID)
		}
	})
}

// An oversize request that is not bulk_docs is refused from its first
// bytes, and the rest of it is left to drain; one over the frame limit is
// refused from its header.
func TestReadRequestLimits(t *testing.T) {
	body := append([]byte(`{"op":"put_local","id":"x","doc":"`), bytes.Repeat([]byte("a"), maxReplicateRequest)...)
	body = append(body, `"}`...)
	_, _, drain, err := readRequest(bytes.NewReader(frameOf(body)))
	var re *requestError
	if !errors.As(err, &re) || re.code != codeTooLarge || drain != int64(len(body)-len(bulkDocsPrefix)) {
		t.Fatalf("oversize put_local: %v, drain %d", err, drain)
	}
	_, _, drain, err = readRequest(io.MultiReader(bytes.NewReader(binary.BigEndian.AppendUint32(nil, MaxFrameSize+1)), blockingReader{t}))
	if !errors.As(err, &re) || re.code != codeTooLarge || drain != 0 {
		t.Fatalf("over the frame limit: %v, drain %d", err, drain)
	}
	docs, _ := json.Marshal(request{Op: opBulkDocs, Docs: []json.RawMessage{json.RawMessage(`{"_id":"a","_rev":"1-a","d":"` + string(bytes.Repeat([]byte("b"), maxReplicateRequest)) + `"}`)}})
	if req, _, _, err := readRequest(bytes.NewReader(frameOf(docs))); err != nil || len(req.Docs) != 1 {
		t.Fatalf("a large bulk_docs: %v", err)
	}
}

// FuzzClientAnswer feeds the client's answer checks arbitrary answer
// frames: they never panic, and what they accept keeps the protocol's
// promises (rows within the limit, bulk_get documents among those asked,
// each once, revs_diff entries about what was asked).
func FuzzClientAnswer(f *testing.F) {
	for _, r := range []response{
		{Status: statusOK, Results: []wireChange{{Seq: "1", ID: "a", Revs: []string{"1-a"}}}, LastSeq: "1"},
		{Status: statusOK, Docs: []json.RawMessage{json.RawMessage(`{"_id":"a","_rev":"1-a"}`), json.RawMessage(`{"_id":"x","_rev":"1-a"}`)}},
		{Status: statusOK, Missing: map[string][]string{"a": {"1-a"}, "z": {"1-z"}}},
		{Status: statusError, Code: codeNotFound, Error: "missing"}, {Status: statusRefused}, {Status: "weird"},
	} {
		b, _ := json.Marshal(r)
		f.Add(frameOf(b))
	}
	f.Add([]byte{0, 0, 0, 2, '{', '}'})
	e := streamEndpoint{c: &peerClient{}}
	asked := []engine.DocRev{{ID: "a", Rev: "1-a"}, {ID: "b", Rev: "2-b"}}
	revs := map[string][]string{"a": {"1-a", "2-a"}}
	f.Fuzz(func(t *testing.T, stream []byte) {
		var resp response
		if _, err := readJSON(bytes.NewReader(stream), MaxFrameSize, &resp); err != nil {
			return
		}
		_ = e.c.status("changes", resp.Status, resp.Code, resp.Error)
		if page, err := e.changesPage(engine.ChangesRequest{Limit: 2}, resp); err == nil && len(page.Results) > 2 {
			t.Fatalf("%d rows accepted for a limit of 2", len(page.Results))
		}
		if docs, err := e.checkDocs(asked, resp.Docs); err == nil {
			if len(docs) > len(asked) {
				t.Fatalf("%d documents accepted for %d asked", len(docs), len(asked))
			}
			for _, d := range docs {
				var h2 struct {
					ID  string `json:"_id"`
					Rev string `json:"_rev"`
				}
				if json.Unmarshal(d, &h2) != nil || !slices.Contains(asked, engine.DocRev{ID: h2.ID, Rev: h2.Rev}) {
					t.Fatalf("accepted a document not asked for: %s", d)
				}
			}
		}
		if m, err := e.checkMissing(revs, resp.Missing); err == nil {
			for id, rs := range m {
				for _, r := range rs {
					if !slices.Contains(revs[id], r) {
						t.Fatalf("accepted a revision not asked about: %s %s", id, r)
					}
				}
			}
		}
	})
}

// A bulk_docs of more than MaxBulkDocs documents, a bulk_get of more
// than MaxBulkGet revisions or a revs_diff of more than MaxRevsDiff
// documents is refused as too large while it is decoded, before
// the whole list is in memory; up to the limits they decode as before.
func TestDecodeRequestCounts(t *testing.T) {
	docs := `{"op":"bulk_docs","docs":[` + strings.Repeat(`{},`, MaxBulkDocs) + `{}]}`
	var re *requestError
	if _, err := decodeRequest([]byte(docs)); !errors.As(err, &re) || re.code != codeTooLarge {
		t.Fatalf("%d documents: %v; want too_large", MaxBulkDocs+1, err)
	}
	get := `{"op":"bulk_get","get":[` + strings.Repeat(`{"id":"a","rev":"1-a"},`, MaxBulkGet) + `{}]}`
	if _, err := decodeRequest([]byte(get)); !errors.As(err, &re) || re.code != codeTooLarge {
		t.Fatalf("%d revisions in bulk_get: %v; want too_large", MaxBulkGet+1, err)
	}
	revs := `{"op":"revs_diff","revs":{` + strings.Repeat(`"a":[],`, 3)
	for i := range MaxRevsDiff {
		revs += fmt.Sprintf(`"d%d":["1-a"],`, i)
	}
	revs += `"last":[]}}`
	if _, err := decodeRequest([]byte(revs)); !errors.As(err, &re) || re.code != codeTooLarge {
		t.Fatalf("%d documents in revs_diff: %v; want too_large", MaxRevsDiff+2, err)
	}
	for _, ok := range []string{`{"op":"bulk_docs","docs":[{"_id":"a"},{"_id":"b"}]}`, `{"op":"bulk_docs","docs":null}`,
		`{"op":"revs_diff","revs":{"a":["1-a","2-b"],"b":[]}}`, `{"op":"revs_diff","revs":null}`,
		`{"op":"bulk_get","get":[{"id":"a","rev":"1-a"}]}`} {
		req, err := decodeRequest([]byte(ok))
		if err != nil {
			t.Fatalf("%s: %v", ok, err)
		}
		back, _ := json.Marshal(request{Op: req.Op, Docs: req.Docs, Revs: req.Revs, Get: req.Get})
		var again request
		if err := json.Unmarshal(back, &again); err != nil || len(again.Docs) != len(req.Docs) || len(again.Revs) != len(req.Revs) ||
			len(again.Get) != len(req.Get) {
			t.Fatalf("%s does not round-trip: %s, %v", ok, back, err)
		}
	}
	if _, err := decodeRequest([]byte(`{"op":"bulk_docs","docs":{}}`)); err == nil {
		t.Fatal("docs as an object accepted")
	}
	// The client's answers are bounded the same way.
	for name, answer := range map[string]string{
		"rows":    `{"status":"ok","results":[` + strings.Repeat(`{},`, MaxChangesLimit) + `{}]}`,
		"docs":    `{"status":"ok","docs":[` + strings.Repeat(`{},`, MaxBulkDocs) + `{}]}`,
		"results": `{"status":"ok","written":[` + strings.Repeat(`{},`, MaxBulkDocs) + `{}]}`,
		"chunks":  `{"status":"ok","found":[` + strings.Repeat(`{},`, MaxIDsPerRequest) + `{}]}`,
		"missing": `{"status":"ok","missing":[` + strings.Repeat(`"h:a",`, MaxIDsPerRequest) + `"h:b"]}`,
	} {
		var into any = &response{}
		if name == "chunks" || name == "missing" {
			into = &chunksResponse{}
		}
		if err := json.Unmarshal([]byte(answer), into); !errors.Is(err, errTooMany) {
			t.Fatalf("an answer with too many %s: %v; want errTooMany", name, err)
		}
	}
}
