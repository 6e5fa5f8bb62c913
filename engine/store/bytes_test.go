package store_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/internal/testvectors"
	"github.com/livesync-go/livesync-go/engine/store"
)

// storedBytesDigest is the SHA-256 of every byte TestStoredBytes sees: what
// the store keeps in its backend and what it serves, for the LiveSync
// vectors and edge cases of JSON encoding. It was computed with the
// store's encoding/json implementation; a change to the store's encoding
// must leave it as it is, so that stores written before and after it hold
// and serve the same bytes.
const storedBytesDigest = "1c7267d716d28fd149506955523e28f7ea94ce9425666d25e0e55f2c0603d475"

// goldenDocs returns the documents TestStoredBytes writes: the vector
// documents (as the dumps hold them, indented, and as PouchDB writes them)
// and edge cases.
func goldenDocs(t *testing.T) []json.RawMessage {
	var out []json.RawMessage
	for _, name := range []string{"vault-dump-plain.json", "vault-dump-e2ee.json"} {
		raw, err := os.ReadFile(testvectors.Path(name))
		if err != nil {
			t.Fatal(err)
		}
		type rows []struct {
			Doc json.RawMessage `json:"doc"`
		}
		var dump struct {
			Local  struct{ AllDocs rows } `json:"local"`
			Remote struct {
				AllDocs rows `json:"allDocs"`
			} `json:"remote"`
		}
		if err := json.Unmarshal(raw, &dump); err != nil {
			t.Fatal(err)
		}
		for _, r := range dump.Local.AllDocs {
			out = append(out, r.Doc) // indented, with the local revisions
		}
		for _, r := range dump.Remote.AllDocs {
			var c bytes.Buffer
			_ = json.Compact(&c, r.Doc)
			out = append(out, c.Bytes())
		}
	}
	files, _ := filepath.Glob(testvectors.Path("journal/*/decoded/*.jsonl"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			if line := sc.Bytes(); len(line) > 0 && line[0] == '{' {
				out = append(out, bytes.Clone(line))
			}
		}
		fh.Close()
	}
	for _, s := range []string{
		`{"_id":"edge/html","_rev":"1-a","html":"<b>&amp;</b>","ls":"` + "\u2028\u2029" + `","z":1,"a":{"y":[1, 2],"x":"<"}}`,
		"{\n \"_id\": \"edge/space\",\n \"_rev\": \"1-b\",\n \"v\": [ 1 , { \"x\" : null } ],\t\"w\" : \"s p\"\r\n}",
		`{"_rev":"1-c","b":1,"_id":"edge/order","a":-0.5e+10,"_deleted_conflicts":[],"c":"\u00e9\ud83d\ude00\/"}`,
		`{"_id":"edge/dup","_rev":"1-d","x":1,"x":2}`, `{"_id":"edge/esckey","_rev":"1-e","\u0078":1,"k\u00e9":2}`,
		`{"_id":"edge/utf8","_rev":"1-f","s":"` + "\xff\xfe" + `","` + "\xc3" + `":1}`,
		`{"_id":"edge/deep","_rev":"1-g","d":` + strings.Repeat(`[{"a":`, 600) + `1` + strings.Repeat(`}]`, 600) + `}`,
		`{"_id":"edge/hist","_rev":"3-x","_revisions":{"start":3,"ids":["x","y","z"]},"v":3}`,
		`{"_id":"edge/hist","_rev":"2-w","_revisions":{"ids":["w","z"],"start":2},"v":"2w"}`,
		`{"_id":"edge/hist","_rev":"4-q","_revisions":{"start":4,"ids":["q","x"]},"_deleted":true}`,
		`{"_id":"edge/\"quote\"<tag>&","_rev":"1-h","a":1}`, `{"_id":"edge/\u2028","_rev":"1-\u00e9","a":1}`,
		`{"_id":"edge/bad","_rev":"1-i","_revisions":{"start":2,"ids":["i"]}}`, `{"_id":"_reserved","_rev":"1-j"}`,
		`{"_id":"edge/norev","a":1}`, `not json`, `{"_id":1,"_rev":"1-k"}`, `{"_id":"edge/delnull","_rev":"1-l","_deleted":null}`,
	} {
		out = append(out, json.RawMessage(s))
	}
	return out
}

// digestStore writes the golden documents into st and hashes what it
// keeps and serves.
func digestStore(t *testing.T, h hash.Hash, st store.Store, be store.Backend) {
	ctx := context.Background()
	put := func(what string, v any, err error) {
		enc, _ := json.Marshal(v)
		fmt.Fprintf(h, "%s %s %v\n", what, enc, err)
	}
	// Documents served are hashed as they are: json.Marshal would
	// compact and escape them.
	putDocs := func(what string, err error, docs ...json.RawMessage) {
		fmt.Fprintf(h, "%s %d %v\n", what, len(docs), err)
		for _, d := range docs {
			fmt.Fprintf(h, "%q\n", d)
		}
	}
	docs := goldenDocs(t)
	res, err := st.BulkDocs(ctx, docs)
	put("bulkdocs", res, err)
	var ids []string
	for _, r := range res {
		if r.Error == "" {
			ids = append(ids, r.ID)
		}
	}
	var local []json.RawMessage
	for i, s := range []string{"a", "<b>&", "\u2028", "x\ny\"z", "\xff", "日本語 😀"} {
		local = append(local, json.RawMessage(fmt.Sprintf(`{"_id":"put/%d","v":%q, "n" : %d}`, i, s, i)))
	}
	local = append(local, json.RawMessage(`{"_id":"h:putchunk","data":"line\n<&>","type":"leaf"}`))
	pres, err := st.PutBatch(ctx, local)
	put("putbatch", pres, err)
	if len(pres) > 0 && pres[0].Rev != "" {
		rev, err := st.Put(ctx, json.RawMessage(`{"_id":"put/0","_rev":"`+pres[0].Rev+`","v":"second <edit>"}`))
		put("put", rev, err)
		rev, err = st.Put(ctx, json.RawMessage(`{"_id":"put/1","_rev":"`+pres[1].Rev+`","_deleted":true}`))
		put("delete", rev, err)
	}
	var chunks []engine.Chunk
	for i, s := range []string{"plain", "a\nb\tc\"d\\e", "<&>", "\u2028\u2029", "\x00\x1f\x7f", "\xff\xfe", "日本語 😀", "%=abc+/="} {
		chunks = append(chunks, engine.Chunk{ID: fmt.Sprintf("h:golden%d", i), Data: s})
	}
	put("putchunks", nil, st.PutChunks(ctx, chunks))
	for _, c := range chunks {
		ids = append(ids, c.ID)
	}
	for _, r := range pres {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	for _, id := range ids {
		doc, err := st.Get(ctx, id, store.GetOptions{Revs: true, RevsInfo: true, Conflicts: true})
		putDocs("get "+id, err, doc)
		doc, err = st.Get(ctx, id, store.GetOptions{})
		putDocs("get plain "+id, err, doc)
		revs, err := st.GetRevs(ctx, id, store.RevsOptions{All: true, History: true})
		for _, r := range revs {
			putDocs("getrevs "+id+" "+r.Rev, err, r.Docs...)
		}
	}
	var drs []engine.DocRev
	for _, id := range ids {
		drs = append(drs, engine.DocRev{ID: id})
	}
	bg, err := st.BulkGet(ctx, drs)
	putDocs("bulkget", err, bg...)
	page, err := st.Changes(ctx, engine.ChangesRequest{})
	put("changes", page, err)
	page, err = st.Changes(ctx, engine.ChangesRequest{Selector: json.RawMessage(`{"type":"leaf"}`)})
	put("changes selector", page, err)
	all, err := st.AllDocs(ctx, store.AllDocsOptions{})
	put("alldocs", all, err)
	got, err := st.GetChunks(ctx, ids)
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		put("chunk", got[k], nil)
	}
	put("getchunks", len(got), err)
	dump := func() {
		_ = be.View(func(tx store.Tx) error {
			for b := store.Bucket(0); b < store.NumBuckets; b++ {
				_ = tx.Ascend(b, nil, func(k, v []byte) bool {
					fmt.Fprintf(h, "%d %q %q\n", b, k, v)
					return true
				})
			}
			return nil
		})
	}
	dump()
	put("compact", nil, st.Compact(ctx))
	dump()
}

// TestStoredBytes checks that the store keeps and serves the same bytes
// as its encoding/json implementation did, for the vectors and JSON's
// edge cases (HTML characters, whitespace, key order, escapes, invalid
// UTF-8, deep nesting), on a relay-like store (every body kept) and a
// replica-like one.
func TestStoredBytes(t *testing.T) {
	h := sha256.New()
	for _, opts := range []store.Options{{KeepBodies: store.KeepAllBodies}, {RevsLimit: 2}} {
		be := store.NewMemoryBackend()
		st, err := store.Open(be, opts)
		if err != nil {
			t.Fatal(err)
		}
		digestStore(t, h, st, be)
		st.Close()
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != storedBytesDigest {
		t.Errorf("stored and served bytes changed: digest %s, want %s", got, storedBytesDigest)
	}
}
