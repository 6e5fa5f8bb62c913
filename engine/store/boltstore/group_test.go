//go:build !js && !wasip1

package boltstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/livesync-go/livesync-go/engine/store"
)

func openBackend(t *testing.T) *backend {
	t.Helper()
	b, err := OpenBackend(filepath.Join(t.TempDir(), "g.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b.(*backend)
}

// queued waits until n calls wait behind the commit in progress.
func queued(c *committer, n int) {
	for {
		c.mu.Lock()
		l := len(c.queue)
		c.mu.Unlock()
		if l >= n {
			return
		}
		runtime.Gosched()
	}
}

// holdCommit starts a write that stays inside its transaction until the
// returned function is called, so that the writes started meanwhile
// queue for one group.
func holdCommit(t *testing.T, b *backend) (release func() error) {
	t.Helper()
	inside, hold := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- b.Update(func(tx store.Tx) error {
			close(inside)
			<-hold
			return tx.Put(store.BucketMeta, []byte("first"), []byte("1"))
		})
	}()
	<-inside
	return func() error { close(hold); return <-done }
}

func put(key string) func(store.Tx) error {
	return func(tx store.Tx) error { return tx.Put(store.BucketLocal, []byte(key), []byte(`{}`)) }
}

func getLocal(t *testing.T, b *backend, key string) []byte {
	t.Helper()
	var v []byte
	if err := b.View(func(tx store.Tx) error {
		if got := tx.Get(store.BucketLocal, []byte(key)); got != nil {
			v = append([]byte{}, got...)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

// runQueued starts fns as concurrent Updates, each after the previous one is
// queued behind the held commit, and returns their results in order.
func runQueued(t *testing.T, b *backend, fns ...func(store.Tx) error) []error {
	t.Helper()
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = b.Update(fn) })
		queued(b.w, i+1)
	}
	wg.Wait()
	return errs
}

func TestGroupCommitCoalesces(t *testing.T) {
	b := openBackend(t)
	before := b.w.commits.Load()
	release := holdCommit(t, b)
	const n = 50
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = b.Update(put(fmt.Sprintf("k%02d", i))) })
	}
	queued(b.w, n)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if getLocal(t, b, fmt.Sprintf("k%02d", i)) == nil {
			t.Fatalf("write %d acknowledged but not stored", i)
		}
	}
	// The held write and one group for the 50 queued behind it.
	if got := b.w.commits.Load() - before; got != 2 {
		t.Fatalf("%d transactions for 1+%d concurrent writes, want 2", got, n)
	}
}

func TestGroupCommitLoneWriter(t *testing.T) {
	b := openBackend(t)
	before := b.w.commits.Load()
	for i := range 3 {
		if err := b.Update(put(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.w.commits.Load() - before; got != 3 {
		t.Fatalf("%d transactions for 3 writes one after another, want 3", got)
	}
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	if b.w.running || len(b.w.queue) != 0 {
		t.Fatal("the committer is left running after its writes")
	}
}

func TestGroupCommitFailureIsolated(t *testing.T) {
	b := openBackend(t)
	errOwn := errors.New("own failure")
	release := holdCommit(t, b)
	var errs []error
	done := make(chan struct{})
	go func() {
		defer close(done)
		errs = runQueued(t, b,
			put("a"),
			func(tx store.Tx) error {
				// Writes, then fails: none of this may be committed.
				if err := tx.Put(store.BucketLocal, []byte("bad"), []byte(`{}`)); err != nil {
					return err
				}
				return errOwn
			},
			put("c"),
			func(tx store.Tx) error { return errOwn }, // fails last in the group
		)
	}()
	queued(b.w, 4)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	<-done
	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("the writes beside the failing ones got %v, %v", errs[0], errs[2])
	}
	if !errors.Is(errs[1], errOwn) || !errors.Is(errs[3], errOwn) {
		t.Fatalf("the failing writes got %v, %v; want their own error", errs[1], errs[3])
	}
	for _, k := range []string{"a", "c"} {
		if getLocal(t, b, k) == nil {
			t.Fatalf("%s not committed beside a failing write", k)
		}
	}
	if getLocal(t, b, "bad") != nil {
		t.Fatal("a failing write's Put was committed")
	}
}

func TestGroupCommitFailingFirst(t *testing.T) {
	b := openBackend(t)
	errOwn := errors.New("own failure")
	release := holdCommit(t, b)
	var errs []error
	done := make(chan struct{})
	go func() {
		defer close(done)
		errs = runQueued(t, b, func(store.Tx) error { return errOwn }, put("b"))
	}()
	queued(b.w, 2)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	<-done
	if !errors.Is(errs[0], errOwn) || errs[1] != nil || getLocal(t, b, "b") == nil {
		t.Fatalf("got %v, %v; want the first's own error and the second committed", errs[0], errs[1])
	}
}

// A function that failed after others of its group runs again alone, so
// its result is that of a transaction of its own: here it fails only when
// it sees the write of the one before it.
func TestGroupCommitFailedRunsAlone(t *testing.T) {
	b := openBackend(t)
	release := holdCommit(t, b)
	var errs []error
	done := make(chan struct{})
	go func() {
		defer close(done)
		errs = runQueued(t, b, put("x"), func(tx store.Tx) error {
			if tx.Get(store.BucketLocal, []byte("x")) != nil {
				return errors.New("saw x")
			}
			return tx.Put(store.BucketLocal, []byte("y"), []byte(`{}`))
		})
	}()
	queued(b.w, 2)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	<-done
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("got %v, %v; want both committed (y alone first, then x)", errs[0], errs[1])
	}
	if getLocal(t, b, "x") == nil || getLocal(t, b, "y") == nil {
		t.Fatal("a write is missing")
	}
}

func TestGroupCommitPanic(t *testing.T) {
	b := openBackend(t)
	release := holdCommit(t, b)
	var wg sync.WaitGroup
	var errA, errC error
	var recovered any
	wg.Go(func() { errA = b.Update(put("a")) })
	queued(b.w, 1)
	wg.Go(func() {
		defer func() { recovered = recover() }()
		_ = b.Update(func(tx store.Tx) error {
			_ = tx.Put(store.BucketLocal, []byte("p"), []byte(`{}`))
			panic("boom")
		})
	})
	queued(b.w, 2)
	wg.Go(func() { errC = b.Update(put("c")) })
	queued(b.w, 3)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if recovered != "boom" {
		t.Fatalf("the panicking write's caller recovered %v, want its panic", recovered)
	}
	if errA != nil || errC != nil || getLocal(t, b, "a") == nil || getLocal(t, b, "c") == nil {
		t.Fatalf("the others got %v, %v; want both committed", errA, errC)
	}
	if getLocal(t, b, "p") != nil {
		t.Fatal("the panicking write's Put was committed")
	}
	if err := b.Update(put("after")); err != nil {
		t.Fatal(err)
	}
}

// With the store on top, concurrent edits of one new document are
// settled as if they ran one by one: one creates it, the others conflict.
func TestGroupCommitStoreConflicts(t *testing.T) {
	b := openBackend(t)
	st, err := store.Open(b, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = st.Put(t.Context(), fmt.Appendf(nil, `{"_id":"same","v":%d}`, i))
			if _, err := st.Put(t.Context(), fmt.Appendf(nil, `{"_id":"d%02d"}`, i)); err != nil {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, store.ErrConflict):
			t.Fatal(err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d of %d creations of one document succeeded, want 1", ok, n)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.DocCount != n+1 {
		t.Fatalf("doc count %d, want %d", info.DocCount, n+1)
	}
}

// BenchmarkLoneWriter compares one writer at a time through the group
// committer with bbolt's own Update: the committer must add no wait.
func BenchmarkLoneWriter(b *testing.B) {
	for _, mode := range []string{"group", "bbolt"} {
		b.Run(mode, func(b *testing.B) {
			be, err := OpenBackend(filepath.Join(b.TempDir(), "l.db"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			bk := be.(*backend)
			for i := 0; b.Loop(); i++ {
				key := fmt.Appendf(nil, "k%d", i)
				if mode == "group" {
					err = bk.Update(func(tx store.Tx) error { return tx.Put(store.BucketLocal, key, key) })
				} else {
					err = bk.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketNames[store.BucketLocal]).Put(key, key) })
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkConcurrentWriters runs 20 writers per CPU at once, as many
// clients' checkpoints do, and reports the transactions per write.
func BenchmarkConcurrentWriters(b *testing.B) {
	for _, mode := range []string{"group", "bbolt"} {
		b.Run(mode, func(b *testing.B) {
			be, err := OpenBackend(filepath.Join(b.TempDir(), "c.db"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			bk := be.(*backend)
			before := bk.w.commits.Load()
			var n atomic.Int64
			b.SetParallelism(20)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					key := fmt.Appendf(nil, "k%d", n.Add(1))
					var err error
					if mode == "group" {
						err = bk.Update(func(tx store.Tx) error { return tx.Put(store.BucketLocal, key, key) })
					} else {
						err = bk.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketNames[store.BucketLocal]).Put(key, key) })
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			if mode == "group" {
				b.ReportMetric(float64(bk.w.commits.Load()-before)/float64(n.Load()), "tx/write")
			}
		})
	}
}
