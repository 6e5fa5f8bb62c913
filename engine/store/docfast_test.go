package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine/internal/testvectors"
)

// vectorDocs returns the documents of the LiveSync vectors: both vault
// dumps' local and remote databases, as the dump files hold them
// (indented) and compacted, and the documents of the journal vectors, as
// PouchDB wrote them (compact, its key order, with _revisions).
func vectorDocs(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
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
				AllDocs   rows              `json:"allDocs"`
				LocalDocs []json.RawMessage `json:"localDocs"`
			} `json:"remote"`
		}
		if err := json.Unmarshal(raw, &dump); err != nil {
			t.Fatal(err)
		}
		docs := dump.Remote.LocalDocs
		for _, r := range append(dump.Local.AllDocs, dump.Remote.AllDocs...) {
			docs = append(docs, r.Doc)
		}
		for _, d := range docs {
			var c bytes.Buffer
			if err := json.Compact(&c, d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d, c.Bytes())
		}
	}
	files, _ := filepath.Glob(testvectors.Path("journal/*/decoded/*.jsonl"))
	if len(files) == 0 {
		t.Fatal("no journal vectors")
	}
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
	return out
}

// docVariants are documents the fast path must get right or hand over:
// each edge of encoding/json's behaviour the fast path copies.
var docVariants = []string{
	`{}`, ` {} `, `{"_id":"a"}`, `{"_id":"a","z":1,"b":[1,2],"m":{"y":1,"x":2}}`,
	`{"_id":"a","_rev":"1-x","_revisions":{"start":1,"ids":["x"]},"type":"leaf","data":"d"}`,
	`{"_id":"a","_rev":"3-x","_revisions":{"ids":["x","y","z"],"start":3},"b":true}`,
	`{"_id":"a","_rev":"3-x","_revisions":{"start":3,"ids":["x","y"]},"b":true}`,
	`{"_id":"a","_rev":"3-x","_revisions":{"start":3,"ids":["x",""]}}`,
	`{"_id":"a","_rev":"3-x","_revisions":{"start":3,"ids":["y"]}}`,
	`{"_id":"a","_rev":"3-x","_revisions":{"start":3.0,"ids":["x"]}}`,
	`{"_id":"a","_rev":"3-x","_revisions":{"start":"3","ids":["x"]}}`,
	`{"_id":"a","_rev":"3-x","_revisions":{"Start":3,"IDS":["x"]}}`,
	`{"_id":"a","_rev":"3-x","_revisions":{"start":3,"ids":["x"],"other":1}}`,
	`{"_id":"a","_rev":"3-x","_revisions":{"start":3,"start":3,"ids":["x"]}}`,
	`{"_id":"a","_rev":"3-x","_revisions":{"start":3,"ids":["\u0078"]}}`,
	`{"_id":"a","_rev":"3-x","_revisions":{"start":3,"ids":[null]}}`,
	`{"_id":"a","_rev":"3-x","_revisions":{"start":3,"ids":null}}`,
	`{"_id":"a","_rev":"3-x","_revisions":null}`, `{"_id":"a","_revisions":{"start":3}}`,
	`{"_id":"a","_rev":"1-x","_revisions":{"start":99999999999999999999,"ids":["x"]}}`,
	`{"_id":"a","_rev":"1-x","_revisions":{"start":-1,"ids":["x"]}}`,
	`{"_id":"a","_rev":"1-x","_revisions":{ "start" : 1 , "ids" : [ "x" ] }}`,
	`{"_id":"a","_deleted":true}`, `{"_id":"a","_deleted":false}`, `{"_id":"a","_deleted":null}`,
	`{"_id":"a","_deleted":"true"}`, `{"_id":"a","_deleted":1}`,
	`{"_id":null}`, `{"_id":1}`, `{"_id":"\u005fdesign/x"}`, `{"_id":"a\"b\\c\/d\n\u00e9\ud83d\ude00"}`,
	`{"_id":"a","_rev":null}`, `{"_id":"a","_rev":"x"}`, `{"_id":"a","_rev":"0-x"}`, `{"_id":"a","_rev":1}`,
	`{"_id":"a","_id":"b"}`, `{"_id":"a","x":1,"x":2}`, `{"\u0078":1,"x":2}`, `{"x\u0000":1}`,
	`{"_id":"a","_conflicts":["1-a"],"_deleted_conflicts":[],"_local_seq":1,"_revs_info":[],"_attachments":{}}`,
	`{"_id":"a","html":"<b>&amp;</b>","ls":"\u2028\u2029","raw":"` + "\u2028\u2029" + `"}`,
	`{"_id":"a","<k>":1}`, `{"_id":"a","&":1}`, `{"_id":"a","ké":1,"k":2,"kz":3}`, `{"_id":"a","` + "\u2028" + `":1}`,
	"{\n \"_id\": \"a\",\n \"v\": [ 1 , { \"x\" : null } ],\t\"w\" : \"s p\"\r\n}",
	`{"_id":"a","n":-0.5e+10,"m":1E-3,"z":0,"big":123456789012345678901234567890}`,
	`{"_id":"a","s":"` + "\xff" + `"}`, `{"_id":"` + "\xc3" + `"}`, `{"` + "\xff" + `":1}`,
	`{"_id":"a","d":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}`,
	`{"_id":"a","d":` + strings.Repeat("[", 999) + strings.Repeat("]", 999) + `}`,
	// Invalid documents: both paths must reject them with the same error.
	``, `null`, `[]`, `"s"`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1}x`, `{"a":01}`, `{"a":1.}`,
	`{"a":-}`, `{"a":tru}`, `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"` + "\x01" + `"}`, `{"a":[1,]}`,
	`{"a":{"b"}}`, `{"a":{"b":1,}}`, `{'a':1}`, `{"a":1}{}`, `{"a":"x}`,
}

// sameParse checks parseDoc against the encoding/json path for one input:
// the same document, byte for byte, or the same error.
func sameParse(t testing.TB, raw []byte) (fast bool) {
	t.Helper()
	want, werr := parseDocJSON(raw)
	got, gerr := parseDoc(raw)
	if fmt.Sprint(gerr) != fmt.Sprint(werr) {
		t.Fatalf("%q: error %v, want %v", raw, gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got %+v\nwant %+v\n body %s\n want %s", raw, got, want, got.Body, want.Body)
	}
	_, fast = parseDocFast(raw)
	if fast && werr != nil {
		t.Fatalf("%q: fast path took a document encoding/json rejects (%v)", raw, werr)
	}
	return fast
}

func TestParseDocFastMatchesJSON(t *testing.T) {
	docs := vectorDocs(t)
	fast, valid := 0, 0
	for _, d := range docs {
		if sameParse(t, d) {
			fast++
		}
		if _, err := parseDocJSON(d); err == nil {
			valid++
		}
	}
	// Every valid vector document is one the fast path reads itself.
	if fast != valid || valid < 1000 {
		t.Errorf("fast path took %d of %d valid vector documents (%d in all)", fast, valid, len(docs))
	}
	for _, v := range docVariants {
		sameParse(t, []byte(v))
	}
	for _, v := range []string{`{"_id":"a","html":"<b>&amp;</b>","ls":"\u2028\u2029","raw":"` + "\u2028\u2029" + `"}`,
		"{\n \"_id\": \"a\",\n \"v\": [ 1 , { \"x\" : null } ]}", `{"_id":"a","z":1,"b":2}`} {
		if !sameParse(t, []byte(v)) {
			t.Errorf("%s: not taken by the fast path", v)
		}
	}
	// WithoutRevisions and chunkData against their encoding/json forms.
	for _, d := range append(docs, stringsToBytes(docVariants)...) {
		if got, want := WithoutRevisions(d), withoutRevisionsJSON(d); !bytes.Equal(got, want) {
			t.Fatalf("WithoutRevisions(%q) = %s, want %s", d, got, want)
		}
		if pd, err := parseDocJSON(d); err == nil {
			gd, gok := chunkData(pd.Body)
			wd, wok := chunkDataJSON(pd.Body)
			if gd != wd || gok != wok {
				t.Fatalf("chunkData(%s) = %q %v, want %q %v", pd.Body, gd, gok, wd, wok)
			}
		}
	}
}

func stringsToBytes(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func withoutRevisionsJSON(doc json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(doc, &m) != nil {
		return doc
	}
	if _, ok := m["_revisions"]; !ok {
		return doc
	}
	delete(m, "_revisions")
	out, err := json.Marshal(m)
	if err != nil {
		return doc
	}
	return out
}

func chunkDataJSON(body []byte) (string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || len(m) != 2 || string(m["type"]) != `"leaf"` {
		return "", false
	}
	var data string
	if raw, ok := m["data"]; !ok || json.Unmarshal(raw, &data) != nil {
		return "", false
	}
	return data, true
}

// FuzzParseDoc compares parseDoc with its encoding/json path: the same
// document byte for byte, or the same error.
func FuzzParseDoc(f *testing.F) {
	for _, d := range vectorDocs(f)[:60] {
		f.Add(d)
	}
	for _, v := range docVariants {
		f.Add([]byte(v))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		sameParse(t, raw)
		if got, want := WithoutRevisions(raw), withoutRevisionsJSON(raw); !bytes.Equal(got, want) {
			t.Fatalf("WithoutRevisions(%q) = %s, want %s", raw, got, want)
		}
		gd, gok := chunkData(raw)
		wd, wok := chunkDataJSON(raw)
		if gd != wd || gok != wok {
			t.Fatalf("chunkData(%q) = %q %v, want %q %v", raw, gd, gok, wd, wok)
		}
	})
}

// sameRecord checks that encodeRecord writes what json.Marshal writes and
// that decodeRecord reads it back as json.Unmarshal does.
func sameRecord(t testing.TB, r *record) {
	t.Helper()
	want, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := encodeRecord(r)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("encodeRecord = %s (%v), want %s", got, err, want)
	}
	sameDecode(t, want)
}

// sameDecode checks decodeRecord against json.Unmarshal on v.
func sameDecode(t testing.TB, v []byte) {
	t.Helper()
	want := new(record)
	werr := json.Unmarshal(v, want)
	got, gerr := decodeRecord(v)
	if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
		t.Fatalf("%q: error %v, want %v", v, gerr, werr)
	}
	if gerr != nil {
		return
	}
	for i := range got.Nodes {
		got.Nodes[i].canon = false
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: decoded %+v, want %+v", v, got, want)
	}
	if fast, ok := decodeRecordFast(v); ok {
		// A record read by the fast decoder is written back as
		// json.Marshal writes what json.Unmarshal read.
		enc, err := encodeRecord(fast)
		wenc, _ := json.Marshal(want)
		if err != nil || !bytes.Equal(enc, wenc) {
			t.Fatalf("%q: re-encoded as %s, want %s", v, enc, wenc)
		}
	}
}

func randomRecord(rng *rand.Rand, bodies [][]byte) *record {
	strs := []string{"1-a", "2-b", "3-" + strings.Repeat("f", 32), "x<y>&z", "é\u2028", "q\"\\\n\x01", "\xff", ""}
	r := &record{Seq: rng.Uint64() >> rng.IntN(64)}
	if rng.IntN(10) == 0 {
		return r // no nodes: "n":null
	}
	r.Nodes = []node{}
	for range rng.IntN(4) {
		n := node{Rev: strs[rng.IntN(len(strs))], Deleted: rng.IntN(3) == 0, Kept: rng.IntN(4) == 0}
		if rng.IntN(2) == 0 {
			n.Parent = strs[rng.IntN(len(strs))]
		}
		if rng.IntN(3) > 0 {
			d, err := parseDoc(bodies[rng.IntN(len(bodies))])
			if err == nil {
				n.Body, n.canon = d.Body, true
			}
		}
		r.Nodes = append(r.Nodes, n)
	}
	return r
}

func TestRecordEncodingMatchesJSON(t *testing.T) {
	docs := append(vectorDocs(t), stringsToBytes(docVariants)...)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		sameRecord(t, randomRecord(rng, docs))
	}
	// A body not known to be canonical goes through json.Marshal.
	sameRecord(t, &record{Seq: 1, Nodes: []node{{Rev: "1-a", Body: json.RawMessage("{ \"a\" : \"<\" }")}}})
	for _, v := range []string{
		`{"s":1,"n":null}`, `{"s":1,"n":[]}`, `{"s":0,"n":[{"r":"1-a"}]}`, `{"n":[{"r":"1-a"}],"s":2}`,
		`{"s":1,"n":[{"r":"1-a","b":{ "x":1}}]}`, `{"s":1,"n":[{"r":"1-a","b":null}]}`,
		`{"s":1,"n":[{"r":"1-a","b":"<"}]}`, `{"s":1,"n":[{"r":"1-a","d":false}]}`,
		`{"s":1,"n":[{"r":"1-a","x":1}]}`, `{"S":1,"N":[{"R":"1-a"}]}`, `{"s":1,"n":[{"r":"\u0031-a"}]}`,
		`{"s":18446744073709551615,"n":null}`, `{"s":18446744073709551616,"n":null}`, `{"s":-1,"n":null}`,
		`{"s":1,"n":[{"r":"1-a"},]}`, `{"s":1,"n":[{"r":"1-a"}]`, `{"s":1,"n":[{"r":"1-a","b":{"x":[}}]}`,
		`{"s":1,"n":[{"r":"` + "\xff" + `"}]}`, `{"s":01,"n":null}`, `{"s":1,"n":[{"r":1}]}`,
		`{"s":1,"n":[{"r":"1-a","p":"","b":{}}]}`, ``, `{}`, `null`,
	} {
		sameDecode(t, []byte(v))
	}
}

// FuzzRecordDecode compares decodeRecord with json.Unmarshal.
func FuzzRecordDecode(f *testing.F) {
	docs := append(vectorDocs(f)[:40], stringsToBytes(docVariants)...)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		enc, err := json.Marshal(randomRecord(rng, docs))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
	}
	f.Fuzz(func(t *testing.T, v []byte) { sameDecode(t, v) })
}

func TestChunkBodyMatchesJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "a\nb\tc\"d\\e", "<&>", "\u2028\u2029", "\x00\x1f\x7f", "\xff\xfe", "日本語 😀", "%=abc+/="} {
		want, _ := json.Marshal(struct {
			Data string `json:"data"`
			Type string `json:"type"`
		}{s, "leaf"})
		if got := chunkBody(s); !bytes.Equal(got, want) {
			t.Errorf("chunkBody(%q) = %s, want %s", s, got, want)
		}
		var v struct {
			Data *string `json:"data"`
		}
		_ = json.Unmarshal(want, &v)
		if got, ok := chunkField(want); !ok || got != *v.Data {
			t.Errorf("chunkField(%s) = %q %v", want, got, ok)
		}
	}
	for _, b := range []string{`{"type":"leaf"}`, `{"data":null,"type":"leaf"}`, `{"data":1}`, `{"Data":"x"}`, `{"data":"a","data":"b"}`, `x`} {
		var v struct {
			Data *string `json:"data"`
		}
		werr := json.Unmarshal([]byte(b), &v)
		got, ok := chunkField([]byte(b))
		if wok := werr == nil && v.Data != nil; ok != wok || ok && got != *v.Data {
			t.Errorf("chunkField(%s) = %q %v, want %v", b, got, ok, wok)
		}
	}
}
