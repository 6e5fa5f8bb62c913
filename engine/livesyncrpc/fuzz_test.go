package livesyncrpc

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine/rpcroom"
)

// FuzzDecodeAdvertisement: any "ad" message decodes or fails with an
// error; what decodes is kept only when its peerId is the sender's.
func FuzzDecodeAdvertisement(f *testing.F) {
	for _, s := range []string{`{"peerId":"p","name":"laptop","platform":"desktop"}`, `null`, `[]`,
		`{"peerId":5}`, `{"peerId":"p","name":"\ud83d"}`, `"x"`} {
		f.Add([]byte(s))
	}
	p, err := New(Config{SelfID: "self", DB: mustMemory(f), DBName: "x"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ad, err := DecodeAdvertisement(b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "livesyncrpc: advertisement: ") {
				t.Fatalf("unclear error %v", err)
			}
			return
		}
		kept := p.OnAdvertisement("p", ad)
		if kept != (ad.PeerID == "p") {
			t.Fatalf("advertisement %+v from p kept %v", ad, kept)
		}
		p.PeerLeft("p")
	})
}

// FuzzParsePatterns: any setting compiles or fails with an error naming
// the entry; matching never panics.
func FuzzParsePatterns(f *testing.F) {
	for _, s := range []string{"laptop, ~^phone", "~(", "a,,b", "~.*", "~[[:alpha:]]{1000}", "(a"} {
		f.Add(s, "Laptop")
	}
	f.Fuzz(func(t *testing.T, list, name string) {
		ps, err := ParsePatterns(list)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "livesyncrpc: peer pattern ") {
				t.Fatalf("unclear error %v", err)
			}
			return
		}
		_ = ps.Match(name)
	})
}

// FuzzSeq: seqString and parseSeq accept any JSON a peer sends as a
// sequence without panicking, and seqString's results are accepted back.
func FuzzSeq(f *testing.F) {
	for _, s := range []string{`42`, `"42-g1AAAA"`, `null`, `1e400`, `-1`, `1.5`, `"now"`, `{}`, `"\ud83d"`, `9007199254740993`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = parseSeq(b)
		s, err := seqString(b)
		if err != nil {
			return
		}
		if again, err := seqString(seqJSON(s)); err != nil || again != s {
			t.Fatalf("seqString(%s) = %q, back through seqJSON %q, %v", b, s, again, err)
		}
	})
}

// fuzzMethods are the methods a peer serves, by index.
var fuzzMethods = []string{MethodInfo, MethodChanges, MethodRevsDiff, MethodBulkGet, MethodBulkDocs,
	MethodGet, MethodPut, MethodReqAuth, MethodGetTweakSettings, MethodReqSync, MethodOnProgress,
	MethodOnProgressAcknowledged, MethodGetIsBroadcasting, MethodRequestBroadcasting, "db.nothing"}

// FuzzServe sends an accepted peer's requests with arbitrary arguments
// through a Room: every one is answered (data or an error response)
// within the call's time, and the peer keeps serving.
func FuzzServe(f *testing.F) {
	f.Add(uint8(1), []byte(`[{"since":"","style":"all_docs","limit":33}]`))
	f.Add(uint8(3), []byte(`[{"docs":[{"id":"a","rev":"1-x"},{"id":"a"}],"revs":true}]`))
	f.Add(uint8(4), []byte(`[[{"_id":"a","_rev":"1-a","_revisions":{"start":1,"ids":["a"]}}],{"new_edits":false}]`))
	f.Add(uint8(6), []byte(`[{"_id":"_local/m","mark":"1"},{}]`))
	f.Add(uint8(2), []byte(`[{"a":["1-a","2-b"]}]`))
	f.Add(uint8(9), []byte(`["bbbb"]`))
	f.Add(uint8(11), []byte(`["bbbb",{"lastSeq":1e400,"maxSeqInBatch":"x"}]`))
	f.Add(uint8(5), []byte(`["_local/m",{"rev":"0-1","revs":true}]`))
	n := &network{}
	a, b := newNode(f, n, "aaaa", nil), newNode(f, n, "bbbb", nil)
	meet(a, b)
	put(f, a.st, "a", `"v":1`)
	f.Fuzz(func(t *testing.T, m uint8, args []byte) {
		var raw []json.RawMessage
		if json.Unmarshal(args, &raw) != nil {
			return
		}
		for i, r := range raw {
			if r == nil {
				raw[i] = json.RawMessage("null")
			}
		}
		method := fuzzMethods[int(m)%len(fuzzMethods)]
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		vals := make([]any, len(raw))
		for i, r := range raw {
			vals[i] = r
		}
		_, err := b.room.CallTimeout(ctx, "aaaa", method, 0, vals...)
		var re *rpcroom.Error
		if err != nil && (!errors.As(err, &re) || (re.Code != rpcroom.CodeRemoteError && re.Code != rpcroom.CodeProtocol)) {
			t.Fatalf("%s(%s): %v", method, args, err)
		}
		if _, err := b.room.Call(ctx, "aaaa", MethodInfo); err != nil {
			t.Fatalf("the peer stopped serving after %s(%s): %v", method, args, err)
		}
	})
}

// FuzzPullAnswers pulls from a hostile source that answers db.info,
// db.get, db.put, db.changes and db.bulkGet with arbitrary JSON: the
// pull ends, with an error or not, and never panics.
func FuzzPullAnswers(f *testing.F) {
	f.Add([]byte(`{"db_name":"s","update_seq":1}`), []byte(`{"_id":"_local/x","mark":"1"}`), []byte(`{"ok":true}`),
		[]byte(`{"results":[{"id":"a","changes":[{"rev":"1-a"}],"seq":1}],"last_seq":1}`),
		[]byte(`{"results":[{"id":"a","docs":[{"ok":{"_id":"a","_rev":"1-a","_revisions":{"start":1,"ids":["a"]}}}]}]}`))
	f.Add([]byte(`null`), []byte(`{"mark":{}}`), []byte(`{"ok":1}`), []byte(`{"results":[{}],"last_seq":[]}`), []byte(`[]`))
	f.Add([]byte(`{"update_seq":"9-x"}`), []byte(`{"mark":1e300}`), []byte(`{"ok":true}`),
		[]byte(`{"results":[{"id":"","changes":[{"rev":"x"}]}],"last_seq":"2"}`),
		[]byte(`{"results":[{"docs":[{"ok":{"_id":"b"}},{"ok":"str"},{"ok":[1]}]}]}`))
	f.Fuzz(func(t *testing.T, info, get, putAns, changes, bulkGet []byte) {
		answers := map[string][]byte{MethodInfo: info, MethodGet: get, MethodPut: putAns,
			MethodChanges: changes, MethodBulkGet: bulkGet}
		for m, a := range answers {
			if !json.Valid(a) {
				return
			}
			answers[m] = a
		}
		n := &network{}
		target := newNode(t, n, "tttt", nil)
		src, err := rpcroom.New(rpcroom.Config{Transport: endpoint{n, "ssss"}})
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		n.mu.Lock()
		n.rooms["ssss"] = src
		n.mu.Unlock()
		for m, a := range answers {
			src.Handle(m, func(context.Context, string, []json.RawMessage) (any, error) { return json.RawMessage(a), nil })
		}
		src.Handle(MethodReqAuth, func(context.Context, string, []json.RawMessage) (any, error) { return true, nil })
		src.Handle(MethodGetTweakSettings, func(context.Context, string, []json.RawMessage) (any, error) {
			return TweakSettings(target.cfg.Tweaks, target.cfg.Passphrase, target.cfg.Now()), nil
		})
		src.Handle(MethodOnProgressAcknowledged, func(context.Context, string, []json.RawMessage) (any, error) { return nil, nil })
		target.OnAdvertisement("ssss", Advertisement{PeerID: "ssss", Name: "s", Platform: "desktop"})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := target.Pull(ctx, "ssss", PullOptions{}); errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the pull did not end: %v", err)
		}
	})
}
