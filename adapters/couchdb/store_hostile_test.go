package couchdb_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// storeAt opens a Store over database "db" at url.
func storeAt(t testing.TB, url string) *couchdb.Store {
	t.Helper()
	st, err := couchdb.OpenStore(couchdb.Config{URL: url, Database: "db"}, couchdb.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// everyCall calls each Store method once and returns their errors by name.
func everyCall(ctx context.Context, st *couchdb.Store) map[string]error {
	errs := map[string]error{}
	rec := func(name string, err error) { errs[name] = err }
	_, err := st.Info(ctx)
	rec("Info", err)
	_, err = st.Changes(ctx, engine.ChangesRequest{Limit: 10})
	rec("Changes", err)
	_, err = st.Changes(ctx, engine.ChangesRequest{Selector: json.RawMessage(`{"type":{"$ne":"leaf"}}`)})
	rec("ChangesSelector", err)
	_, err = st.RevsDiff(ctx, map[string][]string{"a": {"1-a"}})
	rec("RevsDiff", err)
	_, err = st.BulkGet(ctx, []engine.DocRev{{ID: "a", Rev: "1-a"}})
	rec("BulkGet", err)
	_, err = st.BulkDocs(ctx, []json.RawMessage{json.RawMessage(`{"_id":"a","_rev":"1-a"}`)})
	rec("BulkDocs", err)
	_, err = st.Get(ctx, "a", store.GetOptions{Revs: true, RevsInfo: true, Conflicts: true})
	rec("Get", err)
	_, err = st.GetRevs(ctx, "a", store.RevsOptions{All: true})
	rec("GetRevsAll", err)
	_, err = st.GetRevs(ctx, "a", store.RevsOptions{Revs: []string{"1-a"}})
	rec("GetRevs", err)
	_, err = st.Put(ctx, json.RawMessage(`{"_id":"a","v":1}`))
	rec("Put", err)
	_, err = st.PutBatch(ctx, []json.RawMessage{json.RawMessage(`{"_id":"a","v":1}`)})
	rec("PutBatch", err)
	_, err = st.AllDocs(ctx, store.AllDocsOptions{})
	rec("AllDocs", err)
	_, err = st.GetLocal(ctx, "cp")
	rec("GetLocal", err)
	rec("PutLocal", st.PutLocal(ctx, "cp", json.RawMessage(`{"v":1}`)))
	rec("UpdateLocal", st.UpdateLocal(ctx, "cp", func(old json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"v":2}`), nil
	}))
	_, err = st.GetLocals(ctx, []string{"cp", "cq"})
	rec("GetLocals", err)
	_, err = st.GetChunks(ctx, []engine.ChunkID{"h:a"})
	rec("GetChunks", err)
	rec("PutChunks", st.PutChunks(ctx, []engine.Chunk{{ID: "h:a", Data: "x"}}))
	_, err = st.RevsLimit(ctx)
	rec("RevsLimit", err)
	rec("SetRevsLimit", st.SetRevsLimit(ctx, 10))
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	rec("Compact", st.Compact(cctx))
	return errs
}

// TestStoreUnavailable: a server that cannot be reached, resets the
// connection, or is behind a proxy answering 502/503/504 gives
// store.ErrUnavailable from every method; a server's own 500 does not.
func TestStoreUnavailable(t *testing.T) {
	ctx := t.Context()
	check := func(t *testing.T, st *couchdb.Store, want bool) {
		t.Helper()
		for name, err := range everyCall(ctx, st) {
			if err == nil {
				t.Errorf("%s: no error", name)
			} else if errors.Is(err, store.ErrUnavailable) != want {
				t.Errorf("%s: %v; ErrUnavailable: %v, want %v", name, err, errors.Is(err, store.ErrUnavailable), want)
			}
		}
	}
	t.Run("ClosedPort", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		check(t, storeAt(t, "http://"+addr), true)
	})
	t.Run("StoppedServer", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"db_name":"db","update_seq":"1","doc_count":0}`))
		}))
		st := storeAt(t, srv.URL)
		if _, err := st.Info(ctx); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		check(t, st, true)
	})
	t.Run("Reset", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				if tc, ok := c.(*net.TCPConn); ok {
					tc.SetLinger(0)
				}
				c.Close()
			}
		}()
		check(t, storeAt(t, "http://"+ln.Addr().String()), true)
	})
	for _, status := range []int{502, 503, 504} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "<html>proxy</html>", status)
			}))
			defer srv.Close()
			check(t, storeAt(t, srv.URL), true)
		})
	}
	t.Run("ServerError", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(500)
			w.Write([]byte(`{"error":"unknown_error","reason":"function_clause"}`))
		}))
		defer srv.Close()
		check(t, storeAt(t, srv.URL), false)
	})
	t.Run("LongpollServerStops", func(t *testing.T) {
		started, stop := make(chan struct{}, 1), make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case started <- struct{}{}:
			default:
			}
			select {
			case <-r.Context().Done():
			case <-stop:
				panic(http.ErrAbortHandler) // the connection drops, no answer
			}
		}))
		st := storeAt(t, srv.URL)
		done := make(chan error, 1)
		go func() {
			_, err := st.Changes(ctx, engine.ChangesRequest{Since: "1", Wait: true})
			done <- err
		}()
		<-started
		close(stop)
		srv.CloseClientConnections()
		srv.Close()
		select {
		case err := <-done:
			if !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("longpoll when the server stops: %v, want ErrUnavailable", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("longpoll did not return when the server stopped")
		}
	})
}

// hostileAnswers are bodies a broken or hostile server may answer with.
var hostileAnswers = []string{
	``, `null`, `[]`, `{}`, `"x"`, `1`, `{"results":null}`, `{"results":[null]}`, `{"results":[{"changes":null}]}`,
	`{"results":[{"id":"a","changes":[{"rev":"2-b"},{"rev":"nope"}]}],"last_seq":{}}`,
	`{"rows":[{"id":"h:a","value":{"rev":"1-a"},"doc":{"data":1}}]}`, `{"rows":[null,{"value":null}]}`,
	`[{"ok":{"_rev":"x"}}]`, `[{"ok":null},{"missing":"1-a"}]`, `[{"ok":{"_rev":"1-a","_revisions":{"start":5,"ids":[]}}}]`,
	`{"_id":"_local/cp","_rev":"0-1","v":`, `{"_rev":5}`, `{"uuid":["x"]}`, `[{"id":"a","error":"conflict"}]`, `[{}]`,
	`{"compact_running":"yes"}`, `{"a":{"missing":"x"}}`, `{"a":{"missing":[1]}}`, `{"results":[{"docs":[{"ok":[1]}]}]}`,
	strings.Repeat("[", 100000), `{"db_name":"db","update_seq":{"x":1}}`,
}

// hostileServer answers every request with body and status.
func hostileServer(t testing.TB, status int, body string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestStoreHostileServer: garbage answers give errors (or harmless
// results), never a panic or a hang.
func TestStoreHostileServer(t *testing.T) {
	for _, body := range hostileAnswers {
		for _, status := range []int{200, 201, 404, 409, 400} {
			st := storeAt(t, hostileServer(t, status, body).URL)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			errs := everyCall(ctx, st)
			cancel()
			for name, err := range errs {
				if err != nil && !strings.Contains(err.Error(), "couchdb") && !strings.Contains(err.Error(), "store:") {
					t.Errorf("%s with %d %.40q: an error that does not say where it comes from: %v", name, status, body, err)
				}
			}
		}
	}
}

// TestStoreMalformedAnswers: answers of the wrong shape are protocol
// errors wrapping engine.ErrMalformed, not data.
func TestStoreMalformedAnswers(t *testing.T) {
	ctx := t.Context()
	cases := []struct {
		body string
		call func(st *couchdb.Store) error
	}{
		{`[]`, func(st *couchdb.Store) error { _, err := st.Info(ctx); return err }},
		{`{"results":[null],"last_seq":"1"}`, func(st *couchdb.Store) error {
			_, err := st.Changes(ctx, engine.ChangesRequest{})
			return err
		}},
		{`{"results":[{"id":"a","seq":"1","changes":[]}],"last_seq":"1"}`, func(st *couchdb.Store) error {
			_, err := st.Changes(ctx, engine.ChangesRequest{})
			return err
		}},
		{`{"rows":[{"id":"h:a","key":"h:a","value":{"rev":"1-a"},"doc":{"data":1}}]}`, func(st *couchdb.Store) error {
			_, err := st.GetChunks(ctx, []engine.ChunkID{"h:a"})
			return err
		}},
		{`[1]`, func(st *couchdb.Store) error { _, err := st.Get(ctx, "a", store.GetOptions{}); return err }},
		{`[{}]`, func(st *couchdb.Store) error { _, err := st.Put(ctx, json.RawMessage(`{"_id":"a"}`)); return err }},
		{`[{"ok":{"_rev":"x"}}]`, func(st *couchdb.Store) error {
			_, err := st.GetRevs(ctx, "a", store.RevsOptions{All: true})
			return err
		}},
		{`[1,2]`, func(st *couchdb.Store) error { _, err := st.GetLocal(ctx, "cp"); return err }},
	}
	for _, c := range cases {
		st := storeAt(t, hostileServer(t, 200, c.body).URL)
		if err := c.call(st); !errors.Is(err, engine.ErrMalformed) {
			t.Errorf("answer %s: %v, want an error wrapping engine.ErrMalformed", c.body, err)
		}
	}
}

// FuzzStoreAnswers feeds every Store method arbitrary server answers.
func FuzzStoreAnswers(f *testing.F) {
	for _, b := range hostileAnswers {
		if len(b) < 1000 {
			f.Add(200, b)
		}
	}
	f.Add(409, `{"error":"conflict"}`)
	f.Fuzz(func(t *testing.T, status int, body string) {
		if status < 200 || status > 599 {
			status = 200
		}
		st := storeAt(t, hostileServer(t, status, body).URL)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		everyCall(ctx, st)
	})
}
