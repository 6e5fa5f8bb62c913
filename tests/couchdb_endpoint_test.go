package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
)

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// seed writes 4 metadata-like docs and 3 chunks with new_edits=false.
func seed(t *testing.T, db *couchdb.DB) {
	t.Helper()
	var docs []json.RawMessage
	for i := range 4 {
		docs = append(docs, raw(fmt.Sprintf(`{"_id":"note-%d","_rev":"2-b%d","_revisions":{"start":2,"ids":["b%d","a%d"]},"type":"plain","path":"n%d.md","children":[]}`, i, i, i, i, i)))
	}
	for i := range 3 {
		docs = append(docs, raw(fmt.Sprintf(`{"_id":"h:chunk%d","_rev":"1-c%d","type":"leaf","data":"piece %d"}`, i, i, i)))
	}
	res, err := db.BulkDocs(ctxT(t), docs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Error != "" {
			t.Fatalf("bulk docs %s: %s %s", r.ID, r.Error, r.Reason)
		}
	}
}

func TestCouchDBInfoAndChangesPaging(t *testing.T) { testCouchDBInfoAndChangesPaging(t, couchServer) }

func testCouchDBInfoAndChangesPaging(t *testing.T, srv couchFactory) {
	db := freshDB(t, srv, nil)
	ctx := ctxT(t)
	seed(t, db)
	info, err := db.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.DocCount != 7 || info.Name != db.Name() || info.UpdateSeq == "" {
		t.Fatalf("info = %+v, want 7 docs", info)
	}
	var ids []string
	since := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("changes never ends")
		}
		page, err := db.Changes(ctx, engine.ChangesRequest{Since: since, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Results) > 3 {
			t.Fatalf("page of %d rows, limit 3", len(page.Results))
		}
		if len(page.Results) == 0 {
			break
		}
		for _, c := range page.Results {
			ids = append(ids, c.ID)
			if len(c.Revs) == 0 || c.Seq == "" {
				t.Errorf("change %+v lacks revs or seq", c)
			}
		}
		since = page.LastSeq
	}
	slices.Sort(ids)
	want := []string{"h:chunk0", "h:chunk1", "h:chunk2", "note-0", "note-1", "note-2", "note-3"}
	if !slices.Equal(ids, want) {
		t.Fatalf("paged ids = %v, want %v", ids, want)
	}
}

func TestCouchDBChangesSelector(t *testing.T) { testCouchDBChangesSelector(t, couchServer) }

func testCouchDBChangesSelector(t *testing.T, srv couchFactory) {
	db := freshDB(t, srv, nil)
	ctx := ctxT(t)
	seed(t, db)
	page, err := db.Changes(ctx, engine.ChangesRequest{Selector: raw(`{"type":{"$ne":"leaf"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range page.Results {
		ids = append(ids, c.ID)
	}
	slices.Sort(ids)
	if want := []string{"note-0", "note-1", "note-2", "note-3"}; !slices.Equal(ids, want) {
		t.Fatalf("readChunksOnline selector gave %v, want %v", ids, want)
	}
	info, _ := db.Info(ctx)
	if page.LastSeq != info.UpdateSeq {
		t.Errorf("LastSeq %q did not advance past the filtered chunks to %q", page.LastSeq, info.UpdateSeq)
	}
}

func TestCouchDBChangesWait(t *testing.T) { testCouchDBChangesWait(t, couchServer) }

func testCouchDBChangesWait(t *testing.T, srv couchFactory) {
	db := freshDB(t, srv, nil)
	ctx := ctxT(t)
	seed(t, db)
	info, _ := db.Info(ctx)
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = db.BulkDocs(context.Background(), []json.RawMessage{raw(`{"_id":"late","_rev":"1-x","type":"plain"}`)})
	}()
	start := time.Now()
	page, err := db.Changes(ctx, engine.ChangesRequest{Since: info.UpdateSeq, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Results) != 1 || page.Results[0].ID != "late" {
		t.Fatalf("longpoll gave %+v, want the late document", page.Results)
	}
	if time.Since(start) < 200*time.Millisecond {
		t.Errorf("longpoll returned before the change was written")
	}
	// A cancelled wait returns ctx's error.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := db.Changes(cctx, engine.ChangesRequest{Since: page.LastSeq, Wait: true}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled wait: %v, want context.DeadlineExceeded", err)
	}
}

func TestCouchDBRevsDiffAndBulkGet(t *testing.T) { testCouchDBRevsDiffAndBulkGet(t, couchServer) }

func testCouchDBRevsDiffAndBulkGet(t *testing.T, srv couchFactory) {
	for _, noBulkGet := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoBulkGet=%v", noBulkGet), func(t *testing.T) {
			db := freshDB(t, srv, func(c *couchdb.Config) { c.NoBulkGet = noBulkGet })
			ctx := ctxT(t)
			seed(t, db)
			diff, err := db.RevsDiff(ctx, map[string][]string{
				"note-0": {"2-b0", "3-zz"}, "h:chunk1": {"1-c1"}, "absent": {"1-q"},
			})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string][]string{"note-0": {"3-zz"}, "absent": {"1-q"}}
			if fmt.Sprint(diff) != fmt.Sprint(want) {
				t.Fatalf("revs diff = %v, want %v", diff, want)
			}
			docs, err := db.BulkGet(ctx, []engine.DocRev{
				{ID: "h:chunk2", Rev: "1-c2"}, {ID: "absent", Rev: "1-q"}, {ID: "note-1", Rev: "9-nope"}, {ID: "note-1", Rev: "2-b1"},
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(docs) != 2 {
				t.Fatalf("bulk get returned %d docs, want 2 (missing revisions left out): %s", len(docs), docs)
			}
			var got []struct {
				ID        string `json:"_id"`
				Rev       string `json:"_rev"`
				Revisions struct {
					Start int      `json:"start"`
					IDs   []string `json:"ids"`
				} `json:"_revisions"`
			}
			for _, d := range docs {
				var one struct {
					ID        string `json:"_id"`
					Rev       string `json:"_rev"`
					Revisions struct {
						Start int      `json:"start"`
						IDs   []string `json:"ids"`
					} `json:"_revisions"`
				}
				if err := json.Unmarshal(d, &one); err != nil {
					t.Fatal(err)
				}
				got = append(got, one)
			}
			if got[0].ID != "h:chunk2" || got[1].ID != "note-1" {
				t.Fatalf("bulk get order: %s, %s", got[0].ID, got[1].ID)
			}
			if got[1].Rev != "2-b1" || got[1].Revisions.Start != 2 || !slices.Equal(got[1].Revisions.IDs, []string{"b1", "a1"}) {
				t.Fatalf("note-1 revisions = %+v", got[1])
			}
		})
	}
}

func TestCouchDBLocalDocs(t *testing.T) { testCouchDBLocalDocs(t, couchServer) }

func testCouchDBLocalDocs(t *testing.T, srv couchFactory) {
	db := freshDB(t, srv, nil)
	ctx := ctxT(t)
	if _, err := db.GetLocal(ctx, "checkpoint"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("absent _local: %v, want ErrNotFound", err)
	}
	for i := range 3 {
		if err := db.PutLocal(ctx, "checkpoint", raw(fmt.Sprintf(`{"last_seq":"%d"}`, i))); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	got, err := db.GetLocal(ctx, "checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		ID      string `json:"_id"`
		LastSeq string `json:"last_seq"`
	}
	_ = json.Unmarshal(got, &v)
	if v.LastSeq != "2" || v.ID != "_local/checkpoint" {
		t.Fatalf("_local = %s, want the last write", got)
	}
	// _local documents are not in the changes feed.
	page, err := db.Changes(ctx, engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Results) != 0 {
		t.Fatalf("changes lists _local docs: %+v", page.Results)
	}
}

func TestCouchDBMissingDatabase(t *testing.T) { testCouchDBMissingDatabase(t, couchServer) }

func testCouchDBMissingDatabase(t *testing.T, srv couchFactory) {
	db := openDB(t, srv, dbName(t), false, nil)
	_, err := db.Info(ctxT(t))
	if !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("info of a missing database: %v, want ErrNotFound", err)
	}
}

func TestCouchDBWrongPassword(t *testing.T) { testCouchDBWrongPassword(t, couchServer) }

func testCouchDBWrongPassword(t *testing.T, srv couchFactory) {
	name := freshDB(t, srv, nil).Name()
	db := openDB(t, srv, name, false, func(c *couchdb.Config) { c.Password += "-wrong" })
	_, err := db.Info(ctxT(t))
	var ee *engine.Error
	if !errors.As(err, &ee) || ee.Stage != engine.StageAuth {
		t.Fatalf("wrong password: %v, want an auth-stage error", err)
	}
	if strings.Contains(err.Error(), srv(t).password) {
		t.Fatal("error message contains the password")
	}
}

func TestCouchDBCookieAuth(t *testing.T) { testCouchDBCookieAuth(t, couchServer) }

func testCouchDBCookieAuth(t *testing.T, srv couchFactory) {
	db := freshDB(t, srv, func(c *couchdb.Config) { c.Auth = couchdb.AuthCookie })
	ctx := ctxT(t)
	seed(t, db)
	page, err := db.Changes(ctx, engine.ChangesRequest{Selector: raw(`{"type":"leaf"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Results) != 3 {
		t.Fatalf("cookie auth, raw request: %d chunks listed, want 3", len(page.Results))
	}
	if _, err := db.Info(ctx); err != nil {
		t.Fatal(err)
	}
	bad := openDB(t, srv, db.Name(), false, func(c *couchdb.Config) { c.Auth = couchdb.AuthCookie; c.Password += "-wrong" })
	_, err = bad.Changes(ctx, engine.ChangesRequest{})
	var ee *engine.Error
	if !errors.As(err, &ee) || ee.Stage != engine.StageAuth {
		t.Fatalf("cookie auth with a wrong password: %v, want an auth error", err)
	}
}

// setServerConfig sets a server configuration value (CouchDB 3 node
// config, or the express-pouchdb /_config) and returns the old value.
func setServerConfig(t *testing.T, srv couchFactory, section, key, value string) (old string, ok bool) {
	e := srv(t)
	for _, base := range []string{"/_node/_local/_config/", "/_config/"} {
		u := e.url + base + url.PathEscape(section) + "/" + url.PathEscape(key)
		body, _ := json.Marshal(value)
		req, _ := http.NewRequest(http.MethodPut, u, strings.NewReader(string(body)))
		req.SetBasicAuth(e.user, e.password)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var prev any // the old value: a string on CouchDB, as stored on express-pouchdb
		_ = json.NewDecoder(resp.Body).Decode(&prev)
		resp.Body.Close()
		switch p := prev.(type) {
		case string:
			old = p
		case nil:
		default:
			b, _ := json.Marshal(p)
			old = string(b)
		}
		if resp.StatusCode == http.StatusOK {
			return old, true
		}
	}
	return "", false
}

func TestCouchDBTooLarge(t *testing.T) { testCouchDBTooLarge(t, couchServer) }

func testCouchDBTooLarge(t *testing.T, srv couchFactory) {
	db := freshDB(t, srv, nil)
	old, ok := setServerConfig(t, srv, "couchdb", "max_document_size", "2000")
	if !ok {
		t.Skip("the server's configuration cannot be changed; 413 not tested")
	}
	oldReq, okReq := setServerConfig(t, srv, "chttpd", "max_http_request_size", "2000")
	t.Cleanup(func() {
		if old == "" {
			old = "50000000" // engine/FORMAT.md §5.1
		}
		setServerConfig(t, srv, "couchdb", "max_document_size", old)
		if okReq && oldReq != "" {
			setServerConfig(t, srv, "chttpd", "max_http_request_size", oldReq)
		}
	})
	big := fmt.Sprintf(`{"_id":"big","_rev":"1-a","type":"leaf","data":"%s"}`, strings.Repeat("x", 10000))
	_, err := db.BulkDocs(ctxT(t), []json.RawMessage{raw(big)})
	if !errors.Is(err, engine.ErrTooLarge) {
		t.Fatalf("oversized bulk docs: %v, want ErrTooLarge", err)
	}
	if !strings.Contains(err.Error(), "send fewer or smaller") {
		t.Errorf("message does not say what to do: %v", err)
	}
}

// countingRT counts the requests per method and path prefix "_local".
type countingRT struct {
	next http.RoundTripper
	mu   chan struct{}
	n    map[string]int
}

func (c *countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.Contains(r.URL.Path, "/_local/") {
		c.mu <- struct{}{}
		c.n[r.Method]++
		<-c.mu
	}
	return c.next.RoundTrip(r)
}

func (c *countingRT) count(method string) int {
	c.mu <- struct{}{}
	defer func() { <-c.mu }()
	return c.n[method]
}

// PutLocal writes with the _rev it last saw (one request per rewrite) and
// falls back to reading the stored _rev when another writer moved it.
func TestCouchDBPutLocalRemembersRev(t *testing.T) { testCouchDBPutLocalRemembersRev(t, couchServer) }

func testCouchDBPutLocalRemembersRev(t *testing.T, srv couchFactory) {
	rt := &countingRT{next: http.DefaultTransport, mu: make(chan struct{}, 1), n: map[string]int{}}
	db := freshDB(t, srv, func(c *couchdb.Config) { c.HTTPClient = &http.Client{Transport: rt} })
	other := openDB(t, srv, db.Name(), false, nil)
	ctx := ctxT(t)
	for i := range 3 {
		if err := db.PutLocal(ctx, "cp", raw(fmt.Sprintf(`{"last_seq":"%d"}`, i))); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	if g, p := rt.count(http.MethodGet), rt.count(http.MethodPut); g != 1 || p != 3 {
		t.Fatalf("3 writes made %d GETs and %d PUTs, want 1 and 3", g, p)
	}
	if err := other.PutLocal(ctx, "cp", raw(`{"last_seq":"other"}`)); err != nil {
		t.Fatal(err)
	}
	if err := db.PutLocal(ctx, "cp", raw(`{"last_seq":"mine"}`)); err != nil {
		t.Fatalf("put after another writer: %v", err)
	}
	got, err := other.GetLocal(ctx, "cp")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), `"mine"`) {
		t.Fatalf("_local = %s, want the last write", got)
	}
	if err := db.PutLocal(ctx, "cp", raw(`{"last_seq":"again"}`)); err != nil {
		t.Fatal(err)
	}
}
