package enginetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journal"
)

// Objects is the method set of journalsync.Objects, repeated here so that
// journalsync's own tests can import this package (journalsync's
// conformance test checks that the two stay the same).
type Objects interface {
	List(ctx context.Context, after string) ([]string, error)
	Get(ctx context.Context, key string) ([]byte, error)
	Put(ctx context.Context, key string, body []byte) error
	Prefix() string
	ID() string
}

// ObjectsSuite runs the conformance tests of journalsync.Objects against
// the buckets newObjects returns. Each call must return an empty bucket
// (or an empty prefix of one) that no other test writes to; a remove
// function that deletes one of its objects behind the port's back (as
// another device pruning the journal would), failing the test if it
// cannot; and a cleanup function (nil if none) that the suite calls when
// the test ends. The suite writes at most a few thousand small objects.
func ObjectsSuite(t *testing.T, newObjects func(t *testing.T) (o Objects, remove func(key string), cleanup func())) {
	tests := []struct {
		name string
		fn   func(t *testing.T, o Objects)
		rm   func(t *testing.T, o Objects, remove func(key string)) // instead of fn
	}{
		{"PrefixAndID", testObjectsPrefixAndID, nil},
		{"EmptyListing", testObjectsEmpty, nil},
		{"ListOrderSkipsUnderscore", testObjectsListOrder, nil},
		{"ListAfter", testObjectsListAfter, nil},
		{"ListBeyondOnePage", testObjectsListPages, nil},
		{"GetRoundTrip", testObjectsGetRoundTrip, nil},
		{"GetNotFound", testObjectsGetNotFound, nil},
		{"GetRemovedAfterListing", nil, testObjectsGetRemoved},
		{"PutCreateOnly", testObjectsPutCreateOnly, nil},
		{"PutSameBodyAgain", testObjectsPutSameBody, nil},
		{"PutConcurrentSameKey", testObjectsPutRace, nil},
		{"Concurrent", testObjectsConcurrent, nil},
		{"CancelledContext", testObjectsCancelled, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, remove, cleanup := newObjects(t)
			if cleanup != nil {
				t.Cleanup(cleanup)
			}
			if tc.rm != nil {
				tc.rm(t, o, remove)
				return
			}
			tc.fn(t, o)
		})
	}
}

// packKey is the key of a pack written at 1,700,000,000,000 ms + i: the
// same number of digits for every i the suite uses, so byte order and
// pack order agree.
func packKey(o Objects, i int) string {
	return journal.PackKey(o.Prefix(), 1_700_000_000_000+int64(i))
}

func mustPut(t *testing.T, o Objects, key string, body []byte) {
	t.Helper()
	if err := o.Put(t.Context(), key, body); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func mustList(t *testing.T, o Objects, after string) []string {
	t.Helper()
	keys, err := o.List(t.Context(), after)
	if err != nil {
		t.Fatalf("list after %q: %v", after, err)
	}
	return keys
}

func testObjectsPrefixAndID(t *testing.T, o Objects) {
	if o.ID() == "" || o.ID() != o.ID() {
		t.Fatalf("ID %q: want a stable, non-empty id", o.ID())
	}
	if o.Prefix() != o.Prefix() {
		t.Fatal("Prefix changes between calls")
	}
	mustPut(t, o, packKey(o, 0), []byte("pack"))
	for _, k := range mustList(t, o, "") {
		if !bytes.HasPrefix([]byte(k), []byte(o.Prefix())) {
			t.Fatalf("listed key %q lacks the prefix %q", k, o.Prefix())
		}
	}
}

func testObjectsEmpty(t *testing.T, o Objects) {
	if keys := mustList(t, o, ""); len(keys) != 0 {
		t.Fatalf("an empty bucket lists %v", keys)
	}
}

// Keys are listed in journal.ComparePackKeys order (numeric runs by
// value, so "…999-…" before "…1000-…"); names starting "_" are left out.
func testObjectsListOrder(t *testing.T, o Objects) {
	p := o.Prefix()
	want := []string{
		journal.PackKey(p, 999), journal.PackKey(p, 1000), journal.PackKey(p, 1700000000000),
		journal.PackKey(p, 1700000000001), journal.PackKey(p, 17000000000000),
	}
	for _, i := range []int{3, 0, 4, 2, 1} {
		mustPut(t, o, want[i], []byte(fmt.Sprint("pack ", i)))
	}
	mustPut(t, o, p+journal.SyncParametersKey, []byte(`{}`))
	mustPut(t, o, p+journal.MilestoneKey, []byte(`{}`))
	mustPut(t, o, p+"_another-control-object", []byte("x"))
	if got := mustList(t, o, ""); !slices.Equal(got, want) {
		t.Fatalf("listing\n got %q\nwant %q", got, want)
	}
}

// List(after) returns the keys that sort after `after` in byte order (S3's
// StartAfter), which for packs of one digit count is pack order.
func testObjectsListAfter(t *testing.T, o Objects) {
	var keys []string
	for i := range 5 {
		keys = append(keys, packKey(o, i))
		mustPut(t, o, keys[i], []byte{byte(i)})
	}
	for i := range keys {
		if got := mustList(t, o, keys[i]); !slices.Equal(got, keys[i+1:]) {
			t.Fatalf("after %s: got %q, want %q", keys[i], got, keys[i+1:])
		}
	}
	if got := mustList(t, o, o.Prefix()); !slices.Equal(got, keys) {
		t.Fatalf("after the prefix: got %q, want every key", got)
	}
}

// A listing longer than one S3 page (1,000 keys) is complete.
func testObjectsListPages(t *testing.T, o Objects) {
	const n = 1003
	want := make([]string, n)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, 16)
	)
	for i := range n {
		want[i] = packKey(o, i)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := o.Put(t.Context(), want[i], []byte{byte(i)}); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d puts failed, first: %v", len(errs), errs[0])
	}
	if got := mustList(t, o, ""); !slices.Equal(got, want) {
		t.Fatalf("listed %d keys, want %d in order", len(got), n)
	}
	if got := mustList(t, o, want[499]); !slices.Equal(got, want[500:]) {
		t.Fatalf("after key 499: listed %d keys, want %d", len(got), n-500)
	}
}

// Get returns exactly the body Put stored, and Put keeps no reference to
// the caller's slice.
func testObjectsGetRoundTrip(t *testing.T, o Objects) {
	body := make([]byte, 256*3)
	for i := range body {
		body[i] = byte(i)
	}
	key := packKey(o, 1)
	sent := bytes.Clone(body)
	mustPut(t, o, key, sent)
	sent[0] ^= 0xff // the caller reuses its buffer
	got, err := o.Get(t.Context(), key)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("get: %d bytes, %v; want the %d bytes put", len(got), err, len(body))
	}
	got[1] ^= 0xff // and so may the reader
	if again, err := o.Get(t.Context(), key); err != nil || !bytes.Equal(again, body) {
		t.Fatalf("second get: %v; the stored object changed", err)
	}
	ctl := o.Prefix() + journal.SyncParametersKey
	mustPut(t, o, ctl, []byte(`{"salt":""}`))
	if got, err := o.Get(t.Context(), ctl); err != nil || string(got) != `{"salt":""}` {
		t.Fatalf("get of a control object: %q, %v", got, err)
	}
}

// An absent object wraps engine.ErrNotFound, and not
// engine.ErrNoDatabase: that means the bucket itself is missing, which a
// journal treats as a failure rather than as a pack deleted after its
// listing.
func testObjectsGetNotFound(t *testing.T, o Objects) {
	mustPut(t, o, packKey(o, 1), []byte("there"))
	_, err := o.Get(t.Context(), packKey(o, 2))
	if !errors.Is(err, engine.ErrNotFound) || errors.Is(err, engine.ErrNoDatabase) {
		t.Fatalf("get of an absent key: %v, want engine.ErrNotFound (and not engine.ErrNoDatabase)", err)
	}
}

// An object removed after a listing named it (another device pruned the
// journal) reads as an absent object, not as a missing bucket, and later
// listings leave it out.
func testObjectsGetRemoved(t *testing.T, o Objects, remove func(key string)) {
	mustPut(t, o, packKey(o, 1), []byte("removed"))
	mustPut(t, o, packKey(o, 2), []byte("kept"))
	keys := mustList(t, o, "")
	if len(keys) != 2 {
		t.Fatalf("listing %q, want two keys", keys)
	}
	remove(keys[0])
	_, err := o.Get(t.Context(), keys[0])
	if !errors.Is(err, engine.ErrNotFound) || errors.Is(err, engine.ErrNoDatabase) {
		t.Fatalf("get of a key removed after its listing: %v, want engine.ErrNotFound (and not engine.ErrNoDatabase)", err)
	}
	if got, err := o.Get(t.Context(), keys[1]); err != nil || string(got) != "kept" {
		t.Fatalf("get of the other key: %q, %v", got, err)
	}
	if got := mustList(t, o, ""); !slices.Equal(got, keys[1:]) {
		t.Fatalf("listing after the removal %q, want %q", got, keys[1:])
	}
}

// Put never replaces an object: a second Put with another body wraps
// engine.ErrExists (journalsync.ErrExists) and the stored body stays.
func testObjectsPutCreateOnly(t *testing.T, o Objects) {
	key := packKey(o, 7)
	mustPut(t, o, key, []byte("first device"))
	err := o.Put(t.Context(), key, []byte("second device"))
	if !errors.Is(err, engine.ErrExists) {
		t.Fatalf("put over an existing key: %v, want ErrExists", err)
	}
	if got, err := o.Get(t.Context(), key); err != nil || string(got) != "first device" {
		t.Fatalf("after the refused put: %q, %v", got, err)
	}
	ctl := o.Prefix() + journal.MilestoneKey
	mustPut(t, o, ctl, []byte("a"))
	if err := o.Put(t.Context(), ctl, []byte("b")); !errors.Is(err, engine.ErrExists) {
		t.Fatalf("put over a control object: %v, want ErrExists", err)
	}
}

// Putting exactly the stored body again (a retried call whose answer was
// lost) may succeed or report ErrExists; nothing else, and the object
// stays.
func testObjectsPutSameBody(t *testing.T, o Objects) {
	key := packKey(o, 8)
	mustPut(t, o, key, []byte("same"))
	if err := o.Put(t.Context(), key, []byte("same")); err != nil && !errors.Is(err, engine.ErrExists) {
		t.Fatalf("put of the same body: %v, want nil or ErrExists", err)
	}
	if got, err := o.Get(t.Context(), key); err != nil || string(got) != "same" {
		t.Fatalf("after: %q, %v", got, err)
	}
	if got := mustList(t, o, ""); !slices.Equal(got, []string{key}) {
		t.Fatalf("listing %q, want one key", got)
	}
}

// Of devices creating one key at once with different bodies, exactly one
// succeeds; the others get ErrExists and the stored body is the winner's.
func testObjectsPutRace(t *testing.T, o Objects) {
	const n = 8
	key := packKey(o, 9)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = o.Put(t.Context(), key, []byte(fmt.Sprint("device ", i)))
		}()
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("devices %d and %d both created %s", winner, i, key)
		case err == nil:
			winner = i
		case !errors.Is(err, engine.ErrExists):
			t.Fatalf("device %d: %v, want nil or ErrExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no device created the key")
	}
	if got, err := o.Get(t.Context(), key); err != nil || string(got) != fmt.Sprint("device ", winner) {
		t.Fatalf("stored %q, %v; want device %d's body", got, err, winner)
	}
}

// Puts, Gets and Lists from many goroutines at once all succeed.
func testObjectsConcurrent(t *testing.T, o Objects) {
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, 3*n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := packKey(o, i)
			if err := o.Put(t.Context(), key, []byte(key)); err != nil {
				errs <- err
				return
			}
			if got, err := o.Get(t.Context(), key); err != nil || string(got) != key {
				errs <- fmt.Errorf("get %s: %q, %v", key, got, err)
			}
			if _, err := o.List(t.Context(), ""); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := mustList(t, o, ""); len(got) != n {
		t.Fatalf("listed %d keys, want %d", len(got), n)
	}
}

// A cancelled context fails every call with ctx's error.
func testObjectsCancelled(t *testing.T, o Objects) {
	mustPut(t, o, packKey(o, 1), []byte("x"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := o.List(ctx, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("list: %v, want context.Canceled", err)
	}
	if _, err := o.Get(ctx, packKey(o, 1)); !errors.Is(err, context.Canceled) {
		t.Errorf("get: %v, want context.Canceled", err)
	}
	if err := o.Put(ctx, packKey(o, 2), []byte("y")); !errors.Is(err, context.Canceled) {
		t.Errorf("put: %v, want context.Canceled", err)
	}
	if got := mustList(t, o, ""); len(got) != 1 {
		t.Errorf("after a cancelled put: %q, want one key", got)
	}
}
