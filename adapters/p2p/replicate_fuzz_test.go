//go:build !js

package p2p

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"testing"
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
