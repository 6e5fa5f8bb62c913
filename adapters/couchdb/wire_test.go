package couchdb_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
)

// dbAt opens a DB over database "db" at url.
func dbAt(t *testing.T, url string) *couchdb.DB {
	t.Helper()
	db, err := couchdb.New(couchdb.Config{URL: url, Database: "db"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestEndpointAnswersChecked: the replication answers are read without
// being decoded, but are still checked to be JSON as a whole: JSON
// broken anywhere in them, also inside a document that is handed on as
// it is, is a protocol error wrapping engine.ErrMalformed; an answer cut
// short is a transport failure.
func TestEndpointAnswersChecked(t *testing.T) {
	ctx := t.Context()
	bulkGet := func(db *couchdb.DB) error {
		_, err := db.BulkGet(ctx, []engine.DocRev{{ID: "a", Rev: "1-a"}})
		return err
	}
	changes := func(db *couchdb.DB) error {
		_, err := db.Changes(ctx, engine.ChangesRequest{})
		return err
	}
	malformed := []struct {
		body string
		call func(*couchdb.DB) error
	}{
		{`{"results":[{"id":"a","docs":[{"ok":{"_id":"a","_rev":"1-a","data":tru}}]}]}`, bulkGet},
		{`{"results":[{"id":"a","docs":[{"ok":{"_id":"a","_rev":"1-a","data":"\x"}}]}]}`, bulkGet},
		{`{"results":[{"id":"a","docs":[{"ok":{"_id":"a","_rev":"1-a","n":[1,]}}]}]}`, bulkGet},
		{`{"results":[{"id":"a","docs":[{"ok":{"_id":"a","_rev":"1-a","data":"` + "\x01" + `"}}]}]}`, bulkGet},
		{`{"results":[{"id":"a","docs":[{"ok":{"_id":"a","_rev":"1-a"}}]}],}`, bulkGet},
		{`{"results":[{"id":"a","docs":[{"ok":1}]}]}`, bulkGet},
		{`{"results":[{"id":"a","docs":[{"ok":{"_id":["a"],"_rev":"1-a"}}]}]}`, bulkGet},
		{`{"results":[{"id":"a","seq":"1","changes":[{"rev":"1-a"}],"doc":{"x":01}}],"last_seq":"1"}`, changes},
		{`{"results":[{"id":"a","seq":"1","changes":[{"rev":1}]}],"last_seq":"1"}`, changes},
		{`{"results":[],"last_seq":"1","pending":"many"}`, changes},
	}
	for _, c := range malformed {
		err := c.call(dbAt(t, hostileServer(t, 200, c.body).URL))
		var ee *engine.Error
		if !errors.Is(err, engine.ErrMalformed) || !errors.As(err, &ee) || ee.Stage != engine.StageProtocol {
			t.Errorf("answer %s: %v, want a protocol error wrapping engine.ErrMalformed", c.body, err)
		}
	}

	// Cut short: the body ends before its Content-Length, or mid-value.
	for _, cut := range []struct {
		length int
		body   string
	}{
		{200, `{"results":[{"id":"a","docs":[{"ok":{"_id":"a"`},
		{0, `{"results":[{"id":"a","docs":[{"ok":{"_id":"a"`},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if cut.length > 0 {
				w.Header().Set("Content-Length", strconv.Itoa(cut.length))
			}
			w.Write([]byte(cut.body))
		}))
		t.Cleanup(srv.Close)
		err := bulkGet(dbAt(t, srv.URL))
		var ee *engine.Error
		if !errors.As(err, &ee) || ee.Stage != engine.StageTransport {
			t.Errorf("answer cut short (Content-Length %d): %v, want a transport error", cut.length, err)
		}
	}
}

// TestEndpointDocumentsAsSent: BulkGet hands on each document exactly
// as the server sent it, in request order, leaving out missing ones and
// ignoring text after the answer (as a decoder did); BulkDocs sends each
// document as it was given.
func TestEndpointDocumentsAsSent(t *testing.T) {
	docA := `{ "_id" : "a", "_rev":"1-a", "data":"<x>\u00e9\"", "n":[1, 2.50e1] }`
	docB := `{"_rev":"2-b","_id":"b","_revisions":{"start":2,"ids":["b","z"]}}`
	var sent atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/db/_bulk_get":
			w.Write([]byte(`{"results":[{"id":"b","docs":[{"ok":` + docB + `}]},{"id":"c","docs":[{"error":{"id":"c","rev":"1-c","error":"not_found"}}]},` +
				`{"id":"a","docs":[{"ok":` + docA + `}]}]}` + "\n garbage"))
		case "/db/_bulk_docs":
			var body struct {
				Docs     []json.RawMessage `json:"docs"`
				NewEdits *bool             `json:"new_edits"`
			}
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.NewEdits == nil || *body.NewEdits {
				http.Error(w, `{"error":"bad_request"}`, http.StatusBadRequest)
				return
			}
			sent.Store(body.Docs)
			w.Write([]byte(`[{"id":"a","rev":"1-a"},{"id":"b","rev":"2-b"}]`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	db := dbAt(t, srv.URL)
	docs, err := db.BulkGet(t.Context(), []engine.DocRev{{ID: "a", Rev: "1-a"}, {ID: "c", Rev: "1-c"}, {ID: "b", Rev: "2-b"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 || string(docs[0]) != docA || string(docs[1]) != docB {
		t.Fatalf("BulkGet gave %q, want the two documents as sent, in request order", docs)
	}
	res, err := db.BulkDocs(t.Context(), docs)
	if err != nil || len(res) != 2 || res[0].Error != "" {
		t.Fatalf("BulkDocs: %v %+v", err, res)
	}
	got, _ := sent.Load().([]json.RawMessage)
	if len(got) != 2 || string(got[0]) != docA || string(got[1]) != docB {
		t.Errorf("BulkDocs sent %q, want the documents as given", got)
	}
	if _, err := db.BulkDocs(t.Context(), []json.RawMessage{json.RawMessage(`{"_id":"x",}`)}); !errors.Is(err, engine.ErrMalformed) {
		t.Errorf("BulkDocs of a document that is not JSON: %v, want engine.ErrMalformed", err)
	}
}
