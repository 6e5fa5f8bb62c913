//go:build js && wasm

package d1kv_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall/js"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/wasm/internal/jsawait"
	"github.com/livesync-go/livesync-go/wasm/workers/d1kv"
)

// The D1 binding as workerd serves it: miniflare (installed by `npm ci` in
// tests/workers) runs workerd with a local D1 database, and its
// getD1Database hands Node a proxy of the binding a Worker gets as env.DB.

var (
	mf     js.Value
	d1     *d1kv.D1
	mfFail error
)

func TestMain(m *testing.M) {
	mfFail = startMiniflare()
	code := m.Run()
	if mf.Truthy() {
		jsawait.Await(mf.Call("dispose"))
	}
	os.Exit(code)
}

func startMiniflare() (err error) {
	dir, err := filepath.Abs("../../../tests/workers/node_modules/miniflare")
	if err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("miniflare did not load: run `npm ci` in tests/workers (%v)", r)
		}
	}()
	mod := js.Global().Call("require", dir)
	opts := js.ValueOf(map[string]any{
		"modules":           true,
		"script":            "export default { fetch() { return new Response('') } }",
		"compatibilityDate": "2026-07-01",
		"d1Databases":       map[string]any{"DB": "d1kv-test"},
	})
	mf = mod.Get("Miniflare").New(opts)
	if _, rejected := jsawait.Await(mf.Get("ready")); rejected {
		return errors.New("miniflare did not start")
	}
	db, rejected := jsawait.Await(mf.Call("getD1Database", "DB"))
	if rejected {
		return errors.New("miniflare: no D1 database")
	}
	if d1, err = d1kv.NewD1(db); err != nil {
		return err
	}
	return d1kv.Migrate(context.Background(), d1)
}

func needD1(t *testing.T) *d1kv.D1 {
	t.Helper()
	if mfFail != nil {
		t.Fatal(mfFail)
	}
	return d1
}

var dbSeq int

// newStore opens a store over a database name not used before.
func newStore(t *testing.T, opts store.Options) store.Store {
	dbSeq++
	b, err := d1kv.New(needD1(t), fmt.Sprintf("t%d", dbSeq))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// BLOBs cross both ways intact (every byte value, empty, large), and
// integers come back as integers.
func TestD1Values(t *testing.T) {
	x := needD1(t)
	ctx := t.Context()
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	err := x.Batch(ctx, []d1kv.Stmt{
		{SQL: `INSERT INTO livesync_kv (db, b, k, v) VALUES ('values', 0, ?1, ?2)`, Args: []any{[]byte{}, all}},
		{SQL: `INSERT INTO livesync_kv (db, b, k, v) VALUES ('values', 0, ?1, ?2)`, Args: []any{[]byte{0}, big}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := x.Query(ctx, `SELECT k, v, length(v), typeof(k) FROM livesync_kv WHERE db = ?1 ORDER BY k`, "values")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows", len(rows))
	}
	for i, want := range [][]byte{all, big} {
		k, _ := rows[i][0].([]byte)
		v, _ := rows[i][1].([]byte)
		if len(k) != i || string(v) != string(want) || rows[i][2] != int64(len(want)) || rows[i][3] != "blob" {
			t.Errorf("row %d: key %v, %d bytes (%v, %v)", i, k, len(v), rows[i][2], rows[i][3])
		}
	}
}

// A batch with a failing statement leaves nothing behind, and its error
// reaches Go.
func TestD1BatchAtomic(t *testing.T) {
	x := needD1(t)
	ctx := t.Context()
	err := x.Batch(ctx, []d1kv.Stmt{
		{SQL: `INSERT INTO livesync_kv (db, b, k, v) VALUES ('atomic', 0, ?1, ?1)`, Args: []any{[]byte("a")}},
		{SQL: `INSERT INTO livesync_kv (db, b, k, v) VALUES ('atomic', 0, ?1, NULL)`, Args: []any{[]byte("b")}},
	})
	if err == nil {
		t.Fatal("a batch with a NOT NULL violation succeeded")
	}
	t.Logf("the batch failed: %v", err)
	rows, err := x.Query(ctx, `SELECT k FROM livesync_kv WHERE db = 'atomic'`)
	if err != nil || len(rows) != 0 {
		t.Fatalf("after the failed batch: %v, %v", rows, err)
	}
}

// The store over workerd's D1: a replication-sized batch, the changes
// feed in pages, reads, _local documents; and an Update whose state
// another backend (isolate) changed first runs again.
func TestD1Store(t *testing.T) {
	st := newStore(t, store.Options{Name: "test"})
	defer st.Close()
	ctx := t.Context()
	const n = 250
	docs := make([]json.RawMessage, n)
	for i := range docs {
		docs[i] = json.RawMessage(fmt.Sprintf(`{"_id":"doc%03d","_rev":"1-%032x","_revisions":{"start":1,"ids":["%032x"]},"i":%d}`, i, i, i, i))
	}
	start := time.Now()
	if _, err := st.BulkDocs(ctx, docs); err != nil {
		t.Fatal(err)
	}
	wrote := time.Since(start)
	start = time.Now()
	seen, since := 0, ""
	for {
		page, err := st.Changes(ctx, engine.ChangesRequest{Since: since, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		seen += len(page.Results)
		since = page.LastSeq
		if len(page.Results) < 100 {
			break
		}
	}
	t.Logf("through miniflare's proxy of D1: %d documents written in %v, their changes read in %v", n, wrote, time.Since(start))
	if seen != n {
		t.Fatalf("%d changes, want %d", seen, n)
	}
	d, err := st.Get(ctx, "doc123", store.GetOptions{})
	if err != nil || !strings.Contains(string(d), `"i":123`) {
		t.Fatalf("Get = %s, %v", d, err)
	}
	if err := st.PutLocal(ctx, "cp", json.RawMessage(`{"last_seq":"7"}`)); err != nil {
		t.Fatal(err)
	}
	if l, err := st.GetLocal(ctx, "cp"); err != nil || string(l) != `{"last_seq":"7"}` {
		t.Fatalf("GetLocal = %s, %v", l, err)
	}
	if info, err := st.Info(ctx); err != nil || info.DocCount != n || info.UpdateSeq != fmt.Sprint(n) {
		t.Fatalf("Info = %+v, %v", info, err)
	}

	a, _ := d1kv.New(needD1(t), "retry")
	b, _ := d1kv.New(needD1(t), "retry")
	runs := 0
	err = a.Update(func(tx store.Tx) error {
		runs++
		v := tx.Get(store.BucketMeta, []byte("n"))
		if runs == 1 {
			if err := b.Update(func(tx store.Tx) error { return tx.Put(store.BucketMeta, []byte("n"), []byte("b")) }); err != nil {
				return err
			}
		}
		return tx.Put(store.BucketMeta, []byte("n"), append(bytes.Clone(v), 'a'))
	})
	var got []byte
	a.View(func(tx store.Tx) error { got = bytes.Clone(tx.Get(store.BucketMeta, []byte("n"))); return nil })
	if err != nil || runs != 2 || string(got) != "ba" {
		t.Fatalf("Update: %v after %d runs, value %q; want 2 runs and \"ba\"", err, runs, got)
	}
}
