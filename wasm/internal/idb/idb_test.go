//go:build js && wasm

package idb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall/js"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/storetest"
	"github.com/livesync-go/livesync-go/wasm/internal/idb/fakeidb"
)

// TestMain gives Node an IndexedDB (fake-indexeddb; a browser has its own).
func TestMain(m *testing.M) {
	if err := fakeidb.Install("testdata"); err != nil {
		fmt.Fprintln(os.Stderr, "idb tests:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

var dbSeq atomic.Int64

// newName is a database name no other test uses.
func newName(t testing.TB) string {
	return fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), dbSeq.Add(1))
}

func openT(t testing.TB, name string) *Backend {
	t.Helper()
	b, err := open(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, opts store.Options) store.Store {
		opts.Name = "test"
		st, err := store.Open(openT(t, newName(t)), opts)
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

func TestAtomic(t *testing.T) {
	storetest.RunAtomic(t, func(t *testing.T) store.Backend { return openT(t, newName(t)) })
}

// dump is every record of a backend, bucket by bucket, in key order.
func dump(t testing.TB, b store.Backend) string {
	t.Helper()
	var sb strings.Builder
	err := b.View(func(tx store.Tx) error {
		for bk := range store.Bucket(store.NumBuckets) {
			tx.Ascend(bk, nil, func(k, v []byte) bool {
				fmt.Fprintf(&sb, "%d %x=%x\n", bk, k, v)
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

func put(t testing.TB, b store.Backend, kv ...string) error {
	t.Helper()
	return b.Update(func(tx store.Tx) error {
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				if err := tx.Delete(store.BucketDocs, []byte(kv[i])); err != nil {
					return err
				}
				continue
			}
			if err := tx.Put(store.BucketDocs, []byte(kv[i]), []byte(kv[i+1])); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestReopen: a store's documents, sequence and _local documents survive
// Close, across more records than Ascend's pages, with binary keys in
// byte order.
func TestReopen(t *testing.T) {
	defer func(a, b int) { firstPage, lastPage = a, b }(firstPage, lastPage)
	firstPage, lastPage = 4, 64
	const n = 1000
	ctx := context.Background()
	name := newName(t)
	b := openT(t, name)
	st, err := store.Open(b, store.Options{Name: "r"})
	if err != nil {
		t.Fatal(err)
	}
	var docs []json.RawMessage
	for i := range n + 100 {
		docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":"h:%05d","_rev":"1-a","type":"leaf","data":"%d"}`, i, i)))
	}
	if _, err := st.BulkDocs(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if err := st.PutLocal(ctx, "cp", []byte(`{"last_seq":"7"}`)); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(func(tx store.Tx) error {
		for _, k := range [][]byte{{}, {0}, {0, 0}, {0xff}, {0x80, 1}, {1}} {
			if err := tx.Put(store.BucketBodies, k, []byte{byte(len(k))}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	before := dump(t, b)
	st.Close()

	b = openT(t, name)
	defer b.Close()
	if after := dump(t, b); after != before {
		t.Fatalf("after reopen the records differ (%d bytes before, %d after)", len(before), len(after))
	}
	st, err = store.Open(b, store.Options{Name: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetLocal(ctx, "cp"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, []byte(`{"_id":"new"}`)); err != nil {
		t.Fatal(err)
	}
	info, _ := st.Info(ctx)
	if want := fmt.Sprint(n + 101); info.UpdateSeq != want || info.DocCount != int64(n+101) {
		t.Fatalf("Info after reopen = %+v, want seq %s", info, want)
	}
	var keys []string
	b.View(func(tx store.Tx) error {
		return tx.Ascend(store.BucketBodies, nil, func(k, _ []byte) bool {
			keys = append(keys, fmt.Sprintf("%x", k))
			return true
		})
	})
	if got := strings.Join(keys, " "); got != " 00 0000 01 8001 ff" {
		t.Fatalf("binary keys after reopen: %q", got)
	}
}

// rawGet reads key of the docs bucket straight from the database through
// a connection of its own (as a reload of the page would).
func rawGet(t *testing.T, name, key string) []byte {
	t.Helper()
	db, err := openDB(js.Global().Get("indexedDB"), name, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Call("close")
	res, err := request(db.Call("transaction", objectStore, "readonly").Call("objectStore", objectStore).Call("get", u8(append([]byte{byte(store.BucketDocs)}, key...))))
	if err != nil {
		t.Fatal(err)
	}
	if res.IsUndefined() {
		return nil
	}
	_, rest, _ := field(goBytes(res))
	v, _, _ := field(rest)
	return v
}

// TestUpdateIsOnDiskWhenItReturns: once Update returns, the database
// holds its writes (a page killed right then reloads them).
func TestUpdateIsOnDiskWhenItReturns(t *testing.T) {
	name := newName(t)
	b := openT(t, name)
	defer b.Close()
	for i := range 3 {
		v := fmt.Sprint("v", i)
		if err := put(t, b, "a", v, fmt.Sprint("k", i), "x"); err != nil {
			t.Fatal(err)
		}
		if got := rawGet(t, name, "a"); string(got) != v {
			t.Fatalf("after Update %d the database holds a=%q, want %q", i, got, v)
		}
	}
	if err := put(t, b, "a", ""); err != nil {
		t.Fatal(err)
	}
	if got := rawGet(t, name, "a"); got != nil {
		t.Fatalf("after a Delete the database holds a=%q", got)
	}
}

// TestAbortedCommitChangesNothing: an Update whose IndexedDB transaction
// aborts returns an error and leaves the memory copy and the database as
// they were.
func TestAbortedCommitChangesNothing(t *testing.T) {
	name := newName(t)
	b := openT(t, name)
	if err := put(t, b, "a", "1", "b", "2"); err != nil {
		t.Fatal(err)
	}
	before := dump(t, b)
	b.beforeCommit = func(tx js.Value) { tx.Call("abort") }
	if err := put(t, b, "a", "changed", "b", "", "c", "new"); err == nil {
		t.Fatal("Update succeeded though its transaction aborted")
	}
	if after := dump(t, b); after != before {
		t.Fatalf("memory after an aborted commit:\n%s\nwant\n%s", after, before)
	}
	b.beforeCommit = nil
	b.Close()
	b = openT(t, name)
	defer b.Close()
	if after := dump(t, b); after != before {
		t.Fatalf("database after an aborted commit:\n%s\nwant\n%s", after, before)
	}
	if err := put(t, b, "c", "3"); err != nil {
		t.Fatalf("an Update after the abort: %v", err)
	}
}

// TestFailedRequestAbortsAll: a request the host refuses aborts the
// whole transaction (the writes before it included).
func TestFailedRequestAbortsAll(t *testing.T) {
	name := newName(t)
	b := openT(t, name)
	defer b.Close()
	before := dump(t, b)
	b.beforeCommit = func(tx js.Value) {
		// An add of a key the transaction already put fails
		// (ConstraintError), which aborts the transaction.
		tx.Call("objectStore", objectStore).Call("add", u8([]byte("x")), u8([]byte{0, 'a'}))
	}
	err := put(t, b, "a", "1")
	if err == nil {
		t.Fatal("Update succeeded though a request of its transaction failed")
	}
	var he *hostError
	if !errors.As(err, &he) || he.Name != "ConstraintError" {
		t.Fatalf("err = %v, want the host's ConstraintError", err)
	}
	if after := dump(t, b); after != before {
		t.Fatalf("memory after a failed commit: %s", after)
	}
}

// TestOneHandle: a second Open of an open database fails with ErrBusy,
// also when a connection of another page (with no Web Locks to tell) has
// it open; Close lets the next Open in.
func TestOneHandle(t *testing.T) {
	ctx := context.Background()
	name := newName(t)
	b := openT(t, name)
	if _, err := Open(ctx, name); !errors.Is(err, ErrBusy) {
		t.Fatalf("second Open: %v, want ErrBusy", err)
	}
	if err := Delete(ctx, name); !errors.Is(err, ErrBusy) {
		t.Fatalf("Delete of an open database: %v, want ErrBusy", err)
	}
	if err := put(t, b, "a", "1"); err != nil {
		t.Fatalf("Update after the refused opens: %v", err)
	}
	b.Close()

	closeOther := otherPage(t, name)
	if _, err := Open(ctx, name); !errors.Is(err, ErrBusy) {
		t.Fatalf("Open while another page has the database open: %v, want ErrBusy", err)
	}
	closeOther()
	b = openT(t, name)
	defer b.Close()
	if got := dump(t, b); !strings.Contains(got, fmt.Sprintf("%x=%x", "a", "1")) {
		t.Fatalf("after the refused opens the database holds %s", got)
	}
}

// otherPage opens database name as another page's handle would: with
// its Web Lock where the host has Web Locks (a browser), else with a
// connection (Node with fake-indexeddb). It returns what closes it.
func otherPage(t *testing.T, name string) func() {
	t.Helper()
	if nav := js.Global().Get("navigator"); nav.Type() == js.TypeObject && nav.Get("locks").Type() == js.TypeObject {
		unlock, locked, err := webLock("livesync-go:idb:" + name)
		if err != nil || !locked {
			t.Fatalf("the other page's lock: %v, %v", locked, err)
		}
		return unlock
	}
	db, err := openDB(js.Global().Get("indexedDB"), name, 0)
	if err != nil {
		t.Fatal(err)
	}
	return func() { db.Call("close") }
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	name := newName(t)
	b := openT(t, name)
	if err := put(t, b, "a", "1"); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	b = openT(t, name)
	defer b.Close()
	if got := dump(t, b); got != "" {
		t.Fatalf("after Delete the database holds %s", got)
	}
}

// TestMalformedRecord: a value that is not a framed record fails the
// transaction that reads it (Get or Ascend) rather than reading a wrong
// replica.
func TestMalformedRecord(t *testing.T) {
	name := newName(t)
	db, err := openDB(js.Global().Get("indexedDB"), name, 0)
	if err != nil {
		t.Fatal(err)
	}
	tx := db.Call("transaction", objectStore, "readwrite")
	tx.Call("objectStore", objectStore).Call("put", u8([]byte{9, 0, 'a'}), u8([]byte{0, 'a'}))
	ch, stop := listen(tx, "oncomplete", "onabort")
	<-ch
	stop()
	db.Call("close")
	b := openT(t, name)
	defer b.Close()
	err = b.View(func(tx store.Tx) error {
		if v := tx.Get(store.BucketDocs, []byte("a")); v != nil {
			t.Errorf("Get of a malformed record = %q", v)
		}
		return nil
	})
	if !errors.Is(err, engine.ErrMalformed) {
		t.Fatalf("View reading a malformed record: %v, want ErrMalformed", err)
	}
	err = b.View(func(tx store.Tx) error {
		if tx.Get(store.BucketDocs, []byte("a")) == nil {
			return errors.New("a is missing") // the failed read's error wins
		}
		return nil
	})
	if !errors.Is(err, engine.ErrMalformed) {
		t.Fatalf("View failing after a malformed record: %v, want ErrMalformed", err)
	}
	err = b.View(func(tx store.Tx) error {
		return tx.Ascend(store.BucketDocs, nil, func(k, v []byte) bool { return true })
	})
	if !errors.Is(err, engine.ErrMalformed) {
		t.Fatalf("Ascend over a malformed record: %v, want ErrMalformed", err)
	}
	err = b.Update(func(tx store.Tx) error {
		tx.Get(store.BucketDocs, []byte("a"))
		return tx.Put(store.BucketDocs, []byte("b"), []byte("x"))
	})
	if !errors.Is(err, engine.ErrMalformed) {
		t.Fatalf("Update reading a malformed record: %v, want ErrMalformed", err)
	}
	if v := rawGet(t, name, "b"); v != nil {
		t.Fatalf("the failed Update wrote %q", v)
	}
}

// TestOpenReadsNothing: Open reads no record however large the replica,
// and a read of one document reads a few.
func TestOpenReadsNothing(t *testing.T) {
	ctx := context.Background()
	name := newName(t)
	st, err := store.Open(openT(t, name), store.Options{Name: "r"})
	if err != nil {
		t.Fatal(err)
	}
	var docs []json.RawMessage
	for i := range 500 {
		docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":"d%03d","_rev":"1-a","data":"%d"}`, i, i)))
	}
	if _, err := st.BulkDocs(ctx, docs); err != nil {
		t.Fatal(err)
	}
	st.Close()

	before := recordsRead.Load()
	b := openT(t, name)
	defer b.Close()
	if n := recordsRead.Load() - before; n != 0 {
		t.Fatalf("Open read %d records, want none", n)
	}
	st, err = store.Open(b, store.Options{Name: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, "d123", store.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := recordsRead.Load() - before; n == 0 || n > 4 {
		t.Fatalf("reading one document read %d records", n)
	}
	info, err := st.Info(ctx)
	if err != nil || info.DocCount != 500 {
		t.Fatalf("Info = %+v, %v", info, err)
	}
}

// TestOwnWritesAndCache: an Update's reads see its own writes (Get, and
// Ascend merged with what the database holds); a failed Update leaves
// the cache as it was; cached absence and values follow committed
// writes.
func TestOwnWritesAndCache(t *testing.T) {
	defer func(a, b int) { firstPage, lastPage = a, b }(firstPage, lastPage)
	firstPage, lastPage = 1, 2
	b := openT(t, newName(t))
	defer b.Close()
	if err := put(t, b, "a", "1", "c", "3", "e", "5", "g", "7"); err != nil {
		t.Fatal(err)
	}
	get := func(k string) string {
		var v []byte
		if err := b.View(func(tx store.Tx) error { v = tx.Get(store.BucketDocs, []byte(k)); return nil }); err != nil {
			t.Fatal(err)
		}
		if v == nil {
			return "<nil>"
		}
		return string(v)
	}
	if got := get("b"); got != "<nil>" { // absence cached
		t.Fatalf("b = %s", got)
	}
	ascend := func(tx store.Tx, from string) string {
		var sb strings.Builder
		tx.Ascend(store.BucketDocs, []byte(from), func(k, v []byte) bool {
			fmt.Fprintf(&sb, "%s=%s ", k, v)
			return true
		})
		return sb.String()
	}
	boom := errors.New("boom")
	err := b.Update(func(tx store.Tx) error {
		tx.Put(store.BucketDocs, []byte("b"), []byte("2"))
		tx.Delete(store.BucketDocs, []byte("c"))
		tx.Put(store.BucketDocs, []byte("e"), []byte("55"))
		tx.Put(store.BucketDocs, []byte("h"), []byte("8"))
		tx.Put(store.BucketMeta, []byte("x"), []byte("m"))
		if got, want := ascend(tx, ""), "a=1 b=2 e=55 g=7 h=8 "; got != want {
			t.Errorf("Ascend in the Update = %q, want %q", got, want)
		}
		if got, want := ascend(tx, "c"), "e=55 g=7 h=8 "; got != want {
			t.Errorf("Ascend from c in the Update = %q, want %q", got, want)
		}
		if v := tx.Get(store.BucketDocs, []byte("c")); v != nil {
			t.Errorf("deleted c = %q", v)
		}
		if v := tx.Get(store.BucketDocs, []byte("b")); string(v) != "2" {
			t.Errorf("b in the Update = %q", v)
		}
		return boom
	})
	if err != boom {
		t.Fatalf("Update = %v", err)
	}
	for k, want := range map[string]string{"b": "<nil>", "c": "3", "e": "5", "h": "<nil>"} {
		if got := get(k); got != want {
			t.Fatalf("after the failed Update %s = %s, want %s", k, got, want)
		}
	}
	if err := put(t, b, "b", "2", "c", ""); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"b": "2", "c": "<nil>", "e": "5"} {
		if got := get(k); got != want {
			t.Fatalf("after the Update %s = %s, want %s", k, got, want)
		}
	}
	b.View(func(tx store.Tx) error {
		if got, want := ascend(tx, "b"), "b=2 e=5 g=7 "; got != want {
			t.Errorf("Ascend = %q, want %q", got, want)
		}
		return nil
	})
}

func TestQuotaIsStorageFull(t *testing.T) {
	e := js.Global().Get("Object").New()
	e.Set("name", "QuotaExceededError")
	if err := domError(e); !errors.Is(err, store.ErrStorageFull) {
		t.Fatalf("QuotaExceededError = %v, want store.ErrStorageFull", err)
	}
}

func TestNoName(t *testing.T) {
	if _, err := Open(context.Background(), ""); err == nil {
		t.Fatal("Open with no name succeeded")
	}
}

// BenchmarkOpen10k measures Open of a replica of 10,000 documents of
// about 1 kB and their chunks (ids h:…), written in batches of 100 as a
// pull does (ms-to-write: the time those 100 BulkDocs took).
func BenchmarkOpen10k(b *testing.B) {
	ctx := context.Background()
	name := newName(b)
	be := openT(b, name)
	st, err := store.Open(be, store.Options{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	body := strings.Repeat("x", 900)
	start := time.Now()
	for i := 0; i < 10000; i += 100 {
		var docs []json.RawMessage
		for j := i; j < i+100; j++ {
			docs = append(docs,
				json.RawMessage(fmt.Sprintf(`{"_id":"notes/%05d.md","_rev":"1-a","type":"plain","children":["h:%05d"],"mtime":1,"ctime":1,"size":900}`, j, j)),
				json.RawMessage(fmt.Sprintf(`{"_id":"h:%05d","_rev":"1-a","type":"leaf","data":"%s"}`, j, body)))
		}
		if _, err := st.BulkDocs(ctx, docs); err != nil {
			b.Fatal(err)
		}
	}
	write := time.Since(start)
	want := dump(b, be)
	st.Close()
	b.ResetTimer()
	for range b.N {
		be := openT(b, name)
		b.StopTimer()
		if got := dump(b, be); !bytes.Equal([]byte(got), []byte(want)) {
			b.Fatal("the reopened replica differs")
		}
		be.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(write.Milliseconds()), "ms-to-write")
}

// TestPrefetch: Prefetch reads the keys in one go, after which the
// transaction's Gets (of present and absent keys) read nothing.
func TestPrefetch(t *testing.T) {
	name := newName(t)
	b := openT(t, name)
	if err := put(t, b, "a", "1", "b", "2", "c", "3"); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b = openT(t, name)
	defer b.Close()
	keys := [][]byte{[]byte("a"), []byte("c"), []byte("x"), []byte("a")}
	before := recordsRead.Load()
	if err := b.Prefetch(store.BucketDocs, keys); err != nil {
		t.Fatal(err)
	}
	if n := recordsRead.Load() - before; n != 2 {
		t.Fatalf("Prefetch read %d records, want 2", n)
	}
	var got []string
	b.View(func(tx store.Tx) error {
		for _, k := range keys {
			got = append(got, fmt.Sprintf("%q", tx.Get(store.BucketDocs, k)))
		}
		return nil
	})
	if n := recordsRead.Load() - before; n != 2 {
		t.Fatalf("the Gets after Prefetch read %d records more", n-2)
	}
	if s := strings.Join(got, " "); s != `"1" "3" "" "1"` {
		t.Fatalf("Gets = %s", s)
	}
}

// TestShortScanCached: the records of a scan's first page are cached
// (a listing's entries are often read next); later pages' are not.
func TestShortScanCached(t *testing.T) {
	defer func(a, b int) { firstPage, lastPage = a, b }(firstPage, lastPage)
	firstPage, lastPage = 2, 4
	name := newName(t)
	b := openT(t, name)
	if err := put(t, b, "a", "1", "b", "2", "c", "3", "d", "4"); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b = openT(t, name)
	defer b.Close()
	b.View(func(tx store.Tx) error {
		return tx.Ascend(store.BucketDocs, nil, func(k, v []byte) bool { return true })
	})
	for _, c := range []struct {
		key   string
		reads int64
	}{{"a", 0}, {"b", 0}, {"c", 1}} {
		before := recordsRead.Load()
		var v []byte
		b.View(func(tx store.Tx) error { v = tx.Get(store.BucketDocs, []byte(c.key)); return nil })
		if n := recordsRead.Load() - before; n != c.reads || v == nil {
			t.Errorf("Get(%s) after the scan = %q, read %d records, want %d", c.key, v, n, c.reads)
		}
	}
}
