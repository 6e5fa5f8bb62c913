//go:build !js && !wasip1

package d1kv_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/storetest"
	"github.com/livesync-go/livesync-go/wasm/workers/d1kv"
	"github.com/livesync-go/livesync-go/wasm/workers/internal/sqlitexec"
)

// openDB opens an SQLite file with the tables, standing in for a D1
// database bound to one isolate.
func openDB(t testing.TB, path string) *sqlitexec.DB {
	t.Helper()
	db, err := sqlitexec.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := d1kv.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db
}

func newBackend(t testing.TB, x d1kv.Exec, name string) *d1kv.Backend {
	t.Helper()
	b, err := d1kv.New(x, name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, opts store.Options) store.Store {
		opts.Name = "test"
		db := openDB(t, filepath.Join(t.TempDir(), "d1.sqlite"))
		st, err := store.Open(newBackend(t, db, "test"), opts)
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

func TestAtomic(t *testing.T) {
	storetest.RunAtomic(t, func(t *testing.T) store.Backend {
		return newBackend(t, openDB(t, filepath.Join(t.TempDir(), "d1.sqlite")), "atomic")
	})
}

// Two databases in one D1 database do not see each other's keys.
func TestDatabasesApart(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "d1.sqlite"))
	a, _ := store.Open(newBackend(t, db, "a"), store.Options{})
	b, _ := store.Open(newBackend(t, db, "b"), store.Options{})
	defer a.Close()
	defer b.Close()
	if _, err := a.Put(t.Context(), json.RawMessage(`{"_id":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(t.Context(), "x", store.GetOptions{}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("b sees a's document: %v", err)
	}
	if info, _ := b.Info(t.Context()); info.DocCount != 0 || info.UpdateSeq != "0" {
		t.Fatalf("b's info = %+v", info)
	}
}

func counter(tx store.Tx) uint64 {
	v := tx.Get(store.BucketMeta, []byte("n"))
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func increment(tx store.Tx) error {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], counter(tx)+1)
	return tx.Put(store.BucketMeta, []byte("n"), v[:])
}

// An Update whose state another isolate changed before it committed
// writes nothing and runs again on the new state.
func TestUpdateRetriesAfterOtherCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d1.sqlite")
	a := newBackend(t, openDB(t, path), "db")
	b := newBackend(t, openDB(t, path), "db")
	runs := 0
	err := a.Update(func(tx store.Tx) error {
		runs++
		n := counter(tx)
		if runs == 1 {
			if err := b.Update(increment); err != nil {
				return err
			}
		}
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], n+10)
		return tx.Put(store.BucketMeta, []byte("n"), v[:])
	})
	if err != nil {
		t.Fatal(err)
	}
	var got uint64
	a.View(func(tx store.Tx) error { got = counter(tx); return nil })
	if runs != 2 || got != 11 {
		t.Fatalf("fn ran %d times, counter %d; want 2 runs and 11 (b's 1, then a's +10)", runs, got)
	}
}

// countingExec counts the batches that failed.
type countingExec struct {
	d1kv.Exec
	failed atomic.Int64
}

func (c *countingExec) Batch(ctx context.Context, stmts []d1kv.Stmt) error {
	err := c.Exec.Batch(ctx, stmts)
	if err != nil {
		c.failed.Add(1)
	}
	return err
}

// Two backends on one SQLite file (two isolates on one D1 database)
// increment one counter concurrently: no increment is lost.
func TestTwoIsolatesCounter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d1.sqlite")
	const per = 100
	var xs [2]*countingExec
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i := range xs {
		xs[i] = &countingExec{Exec: openDB(t, path)}
		b := newBackend(t, xs[i], "db")
		wg.Go(func() {
			for range per {
				if err := b.Update(increment); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var got uint64
	newBackend(t, xs[0], "db").View(func(tx store.Tx) error { got = counter(tx); return nil })
	t.Logf("%d increments from two isolates; %d commits lost the race and ran again", 2*per, xs[0].failed.Load()+xs[1].failed.Load())
	if got != 2*per {
		t.Fatalf("counter = %d, want %d", got, 2*per)
	}
}

// Two stores on one database in two isolates write documents
// concurrently: every document is there once, under its own sequence.
func TestTwoIsolatesStores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d1.sqlite")
	const per = 40
	var sts [2]store.Store
	for i := range sts {
		st, err := store.Open(newBackend(t, openDB(t, path), "db"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		sts[i] = st
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*per)
	for i, st := range sts {
		wg.Go(func() {
			for j := range per {
				if _, err := st.Put(t.Context(), json.RawMessage(fmt.Sprintf(`{"_id":"i%d-%03d"}`, i, j))); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	info, err := sts[0].Info(t.Context())
	if err != nil || info.DocCount != 2*per || info.UpdateSeq != fmt.Sprint(2*per) {
		t.Fatalf("info = %+v, %v; want %d documents at seq %d", info, err, 2*per, 2*per)
	}
	page, err := sts[1].Changes(t.Context(), engine.ChangesRequest{})
	if err != nil || len(page.Results) != 2*per {
		t.Fatalf("%d changes, %v; want %d", len(page.Results), err, 2*per)
	}
}

// TestBulkWrite10k times 10,000 small documents written through
// store.Open over an SQLite file, in batches of 100 as a replication
// writes them, then read back through the changes feed.
func TestBulkWrite10k(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "d1.sqlite"))
	x := &countingQueries{Exec: db}
	st, err := store.Open(newBackend(t, x, "bulk"), store.Options{Name: "bulk"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n, batch = 10000, 100
	pad := strings.Repeat("x", 100)
	start := time.Now()
	for i := 0; i < n; i += batch {
		docs := make([]json.RawMessage, batch)
		for j := range docs {
			docs[j] = json.RawMessage(fmt.Sprintf(`{"_id":"doc%05d","_rev":"1-%032x","_revisions":{"start":1,"ids":["%032x"]},"pad":%q}`, i+j, i+j, i+j, pad))
		}
		if _, err := st.BulkDocs(t.Context(), docs); err != nil {
			t.Fatal(err)
		}
	}
	write := time.Since(start)
	q, s := x.queries.Load(), x.stmts.Load()
	start = time.Now()
	count, since := 0, ""
	for {
		page, err := st.Changes(t.Context(), engine.ChangesRequest{Since: since, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		count += len(page.Results)
		since = page.LastSeq
		if len(page.Results) < 1000 {
			break
		}
	}
	read := time.Since(start)
	rq := x.queries.Load() - q
	if count != n {
		t.Fatalf("%d changes, want %d", count, n)
	}
	t.Logf("10k docs in batches of %d: written in %v (%.0f docs/s; %.1f queries and %.1f batched statements per batch); changes read in %v (%.0f docs/s, %d queries)",
		batch, write.Round(time.Millisecond), n/write.Seconds(), float64(q)/(n/batch), float64(s)/(n/batch), read.Round(time.Millisecond), n/read.Seconds(), rq)
}

// countingQueries counts the queries and batched statements.
type countingQueries struct {
	d1kv.Exec
	queries, stmts atomic.Int64
}

func (c *countingQueries) Query(ctx context.Context, sql string, args ...any) ([]d1kv.Row, error) {
	c.queries.Add(1)
	return c.Exec.Query(ctx, sql, args...)
}

func (c *countingQueries) Batch(ctx context.Context, stmts []d1kv.Stmt) error {
	c.stmts.Add(int64(len(stmts)))
	return c.Exec.Batch(ctx, stmts)
}

// The requests of a replication cost a few D1 queries each, whatever
// their size up to 100 documents (the free plan allows 50 queries per
// Worker invocation).
func TestQueriesPerRequest(t *testing.T) {
	x := &countingQueries{Exec: openDB(t, filepath.Join(t.TempDir(), "d1.sqlite"))}
	st, err := store.Open(newBackend(t, x, "q"), store.Options{KeepBodies: store.KeepAllBodies, RevsLimit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := t.Context()
	const n = 100
	gen := func(g int) []json.RawMessage {
		docs := make([]json.RawMessage, n)
		for i := range docs {
			ids := `"` + fmt.Sprintf("%031x%d", i, g) + `"`
			if g == 2 {
				ids += `,"` + fmt.Sprintf("%031x1", i) + `"`
			}
			docs[i] = json.RawMessage(fmt.Sprintf(`{"_id":"doc%03d","_rev":"%d-%031x%d","_revisions":{"start":%d,"ids":[%s]},"g":%d}`, i, g, i, g, g, ids, g))
		}
		return docs
	}
	revs := map[string][]string{}
	var drs []engine.DocRev
	for i := range n {
		id := fmt.Sprintf("doc%03d", i)
		revs[id] = []string{fmt.Sprintf("2-%031x2", i)}
		drs = append(drs, engine.DocRev{ID: id, Rev: fmt.Sprintf("2-%031x2", i)})
	}
	steps := []struct {
		name string
		do   func() error
	}{
		{"BulkDocs of 100 new documents", func() error { _, err := st.BulkDocs(ctx, gen(1)); return err }},
		{"RevsDiff of 100", func() error { _, err := st.RevsDiff(ctx, revs); return err }},
		{"BulkDocs of their 100 second revisions", func() error { _, err := st.BulkDocs(ctx, gen(2)); return err }},
		{"BulkGet of 100", func() error { _, err := st.BulkGet(ctx, drs); return err }},
		{"Changes, 100 per page", func() error {
			_, err := st.Changes(ctx, engine.ChangesRequest{Limit: n})
			return err
		}},
	}
	for _, s := range steps {
		q0, b0 := x.queries.Load(), x.stmts.Load()
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		q, b := x.queries.Load()-q0, x.stmts.Load()-b0
		t.Logf("%s: %d queries, %d statements in its batch", s.name, q, b)
		if q > 4 {
			t.Errorf("%s took %d queries, want at most 4", s.name, q)
		}
	}
}

// A View reads the counters before anything else: a commit landing
// between its scan and its read of the last sequence cannot make it
// report a sequence past a change its scan did not see (a longpoll
// would then wait past that change for good).
func TestViewReadsCountersFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d1.sqlite")
	a := newBackend(t, openDB(t, path), "db")
	b := newBackend(t, openDB(t, path), "db")
	var scanned int
	var seq []byte
	err := a.View(func(tx store.Tx) error {
		err := tx.Ascend(store.BucketSeqs, nil, func(k, v []byte) bool { scanned++; return true })
		if err != nil {
			return err
		}
		err = b.Update(func(tx store.Tx) error {
			if err := tx.Put(store.BucketSeqs, []byte{0, 0, 0, 0, 0, 0, 0, 1}, []byte("doc")); err != nil {
				return err
			}
			return tx.Put(store.BucketMeta, []byte("seq"), []byte{0, 0, 0, 0, 0, 0, 0, 1})
		})
		seq = tx.Get(store.BucketMeta, []byte("seq"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned != 0 || seq != nil {
		t.Fatalf("the View scanned %d changes and then read last sequence %v, a commit it did not scan", scanned, seq)
	}
}

// A record over D1's row limit is refused before the batch, as too
// large (413), and nothing of the Update is written.
func TestRowLimit(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "d1.sqlite"))
	st, err := store.Open(newBackend(t, db, "big"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	huge := strings.Repeat("x", d1kv.MaxRowBytes)
	docs := []json.RawMessage{
		json.RawMessage(`{"_id":"small","_rev":"1-a","_revisions":{"start":1,"ids":["a"]}}`),
		json.RawMessage(`{"_id":"huge","_rev":"1-a","_revisions":{"start":1,"ids":["a"]},"data":"` + huge + `"}`),
	}
	if _, err := st.BulkDocs(t.Context(), docs); !errors.Is(err, engine.ErrTooLarge) {
		t.Fatalf("BulkDocs with a record over the row limit: %v, want engine.ErrTooLarge", err)
	}
	if info, _ := st.Info(t.Context()); info.DocCount != 0 {
		t.Fatalf("after the refused batch: %+v", info)
	}
}
