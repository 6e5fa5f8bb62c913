package couchdb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/rawjson"
)

// decodedChanges is how a _changes answer was read before parseChanges:
// decoded into structs. parseChanges must agree with it.
func decodedChanges(b []byte) (engine.ChangesPage, bool) {
	var a struct {
		Results []struct {
			Seq     json.RawMessage `json:"seq"`
			ID      string          `json:"id"`
			Changes []struct {
				Rev string `json:"rev"`
			} `json:"changes"`
			Deleted bool `json:"deleted"`
		} `json:"results"`
		LastSeq json.RawMessage `json:"last_seq"`
		Pending *int            `json:"pending"`
	}
	if json.Unmarshal(b, &a) != nil {
		return engine.ChangesPage{}, false
	}
	page := engine.ChangesPage{LastSeq: seqString(a.LastSeq), Pending: -1}
	if a.Pending != nil {
		page.Pending = *a.Pending
	}
	for _, r := range a.Results {
		c := engine.Change{Seq: seqString(r.Seq), ID: r.ID, Deleted: r.Deleted}
		for _, ch := range r.Changes {
			c.Revs = append(c.Revs, ch.Rev)
		}
		page.Results = append(page.Results, c)
	}
	return page, true
}

var changesAnswers = []string{
	`{"results":[],"last_seq":"0"}`,
	`{"results":[{"seq":"1-x","id":"a","changes":[{"rev":"1-a"}]},{"seq":2,"id":"b","changes":[{"rev":"2-b"},{"rev":"1-c"}],"deleted":true}],"last_seq":"2-y","pending":3}`,
	` {"results" : [ {"seq" : 1 , "id" : "a\u0041" , "changes" : [ {"rev" : "1-a"} ] } ] , "last_seq" : 1 } `,
	`{"results":null,"last_seq":null,"pending":null}`,
	`{"Results":[{"ID":"a","Changes":[{"REV":"1-a"}],"Deleted":false,"Seq":"5"}],"Last_Seq":"5","Pending":0}`,
	`{"results":[null,{"id":"a","changes":[null,{"rev":null}]}]}`,
	`{"results":[{"id":"a","changes":[{"rev":"1-a","x":[1,{"y":2}]}],"doc":{"_id":"a"}}],"other":{"k":[true,false,null]}}`,
	`{"results":[{"id":"a","deleted":null,"changes":null}]}`,
	`null`,
	`{}`,
	`{"pending":-1}`,
	`{"results":[{"id":5}]}`,
	`{"results":[{"id":"a","changes":"1-a"}]}`,
	`{"results":[{"id":"a","changes":[{"rev":1}]}]}`,
	`{"results":[{"id":"a","changes":[5]}]}`,
	`{"results":[{"id":"a","deleted":"yes"}]}`,
	`{"results":[{"id":"a","deleted":1}]}`,
	`{"results":{}}`,
	`{"results":"x"}`,
	`{"results":[1]}`,
	`{"results":[[]]}`,
	`{"results":[],"pending":"3"}`,
	`{"results":[],"pending":1.5}`,
	`{"results":[],"pending":1e2}`,
	`{"results":[],"pending":99999999999999999999}`,
	`{"results":[],"pending":true}`,
	`[]`,
	`"x"`,
	`1`,
	`true`,
}

// TestParseChangesAsDecoded: parseChanges reads every answer, well or
// badly shaped, as decoding it into structs did.
func TestParseChangesAsDecoded(t *testing.T) {
	for _, a := range changesAnswers {
		want, wantOK := decodedChanges([]byte(a))
		got, err := parseChanges(trimmed(a))
		if (err == nil) != wantOK {
			t.Errorf("%s: error %v, decoding ok %v", a, err, wantOK)
			continue
		}
		if err != nil {
			if !errors.Is(err, engine.ErrMalformed) {
				t.Errorf("%s: %v, want an error wrapping engine.ErrMalformed", a, err)
			}
			continue
		}
		if len(got.Results) == 0 {
			got.Results = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got  %+v\n want %+v", a, got, want)
		}
	}
}

// trimmed is an answer as rawAnswer.read hands it over.
func trimmed(s string) []byte { return bytes.TrimSpace([]byte(s)) }

// decodedBulkGet is how a _bulk_get answer was read before parseBulkGet.
func decodedBulkGet(b []byte) (map[engine.DocRev]string, bool) {
	var a struct {
		Results []struct {
			ID   string `json:"id"`
			Docs []struct {
				OK json.RawMessage `json:"ok"`
			} `json:"docs"`
		} `json:"results"`
	}
	if json.Unmarshal(b, &a) != nil {
		return nil, false
	}
	out := map[engine.DocRev]string{}
	for _, r := range a.Results {
		for _, doc := range r.Docs {
			if len(doc.OK) == 0 || string(doc.OK) == "null" {
				continue
			}
			var head struct {
				ID  string `json:"_id"`
				Rev string `json:"_rev"`
			}
			if json.Unmarshal(doc.OK, &head) != nil {
				return nil, false
			}
			out[engine.DocRev{ID: head.ID, Rev: head.Rev}] = string(doc.OK)
		}
	}
	return out, true
}

var bulkGetAnswers = []string{
	`{"results":[]}`,
	`{"results":[{"id":"a","docs":[{"ok":{"_id":"a","_rev":"1-a","_revisions":{"start":1,"ids":["a"]},"data":"x\"y"}}]}]}`,
	`{"results":[{"id":"a","docs":[{"error":{"id":"a","rev":"1-a","error":"not_found","reason":"missing"}}]},{"id":"b","docs":[{}]},{"id":"c","docs":[{"ok":null}]}]}`,
	`{"results":[{"id":"a","docs":[{"ok":{"_id":"a","_rev":"1-a"}},{"ok":{"_id":"a","_rev":"2-b","nested":{"_id":"no"}}}]}]}`,
	`{"Results":[{"ID":"a","Docs":[{"OK":{"_ID":"a","_Rev":"1-a"}}]}]}`,
	`{"results":[null,{"id":null,"docs":null},{"id":"a","docs":[null]}]}`,
	`null`,
	`{}`,
	`{"results":[{"id":"a","docs":[{"ok":1}]}]}`,
	`{"results":[{"id":"a","docs":[{"ok":[]}]}]}`,
	`{"results":[{"id":"a","docs":[{"ok":"x"}]}]}`,
	`{"results":[{"id":"a","docs":[{"ok":{"_id":5}}]}]}`,
	`{"results":[{"id":"a","docs":[{"ok":{"_id":"a","_rev":false}}]}]}`,
	`{"results":[{"id":"a","docs":[1]}]}`,
	`{"results":[{"id":"a","docs":{}}]}`,
	`{"results":[{"id":1,"docs":[]}]}`,
	`{"results":[5]}`,
	`{"results":{}}`,
	`[]`,
	`"x"`,
}

// TestParseBulkGetAsDecoded: parseBulkGet finds the
// documents that decoding into structs found, and refuses what it
// refused.
func TestParseBulkGetAsDecoded(t *testing.T) {
	for _, a := range bulkGetAnswers {
		want, wantOK := decodedBulkGet([]byte(a))
		found, err := parseBulkGet([]byte(a))
		got := map[engine.DocRev]string{}
		for _, f := range found {
			got[engine.DocRev{ID: f.id, Rev: f.rev}] = string(f.doc)
		}
		if (err == nil) != wantOK {
			t.Errorf("%s: error %v, decoding ok %v", a, err, wantOK)
			continue
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got  %v\n want %v", a, got, want)
		}
	}
}

// TestBulkDocsBody: the request body holds the documents as they are,
// and one that is not JSON fails before anything is sent.
func TestBulkDocsBody(t *testing.T) {
	docs := []json.RawMessage{json.RawMessage(`{"_id":"a","t":"<&>"}`), json.RawMessage(`{ "_id" : "b" }`)}
	b, err := bulkDocsBody(docs)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"docs":[{"_id":"a","t":"<&>"},{ "_id" : "b" }],"new_edits":false}`; string(b) != want {
		t.Errorf("body %s, want %s", b, want)
	}
	for _, bad := range []string{`{"_id":"c","x":tru}`, `{"_id":"c"`, ``, `{"_id":"c"} {}`} {
		_, err := bulkDocsBody(append(docs, json.RawMessage(bad)))
		var ee *engine.Error
		if !errors.As(err, &ee) || ee.Stage != engine.StageEncode || !errors.Is(err, engine.ErrMalformed) {
			t.Errorf("document %q: %v, want an encode error wrapping engine.ErrMalformed", bad, err)
		}
	}
}

// FuzzParseAnswers: on any JSON answer, the one-pass readers never panic
// and accept and refuse what decoding into structs accepted and refused.
func FuzzParseAnswers(f *testing.F) {
	for _, a := range append(append([]string{}, changesAnswers...), bulkGetAnswers...) {
		f.Add(a)
	}
	f.Fuzz(func(t *testing.T, a string) {
		if !json.Valid([]byte(a)) {
			return
		}
		b := trimmed(a)
		_, wantOK := decodedBulkGet(b)
		if _, err := parseBulkGet(b); (err == nil) != wantOK {
			t.Errorf("bulk get %s: error %v, decoding ok %v", a, err, wantOK)
		}
		_, wantOK = decodedChanges(b)
		if _, err := parseChanges(b); (err == nil) != wantOK {
			t.Errorf("changes %s: error %v, decoding ok %v", a, err, wantOK)
		}
	})
}

// bulkGetBody is a _bulk_get answer of n chunks of 1 KiB.
func bulkGetBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"results":[`)
	data := bytes.Repeat([]byte("abcdefghij"), 100)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"h:%04d","docs":[{"ok":{"_id":"h:%04d","_rev":"1-%032x","_revisions":{"start":1,"ids":["%032x"]},"data":"%s\n","type":"leaf"}}]}`, i, i, i, i, data)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

func BenchmarkCheckAnswer(b *testing.B) {
	body := bulkGetBody(100)
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			_ = json.Valid(body)
		}
	})
	b.Run("rawjson.Scan", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			_, _, _ = rawjson.Scan(body, 0)
		}
	})
	b.Run("parseBulkGet", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			_, _ = parseBulkGet(body)
		}
	})
}
