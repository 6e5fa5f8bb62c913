package vault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// countingStore counts the writing calls made to a Store, and fails
// PutBatch when failBatch is set.
type countingStore struct {
	store.Store
	puts, batches, chunkPuts int
	failBatch                bool
}

func (c *countingStore) Put(ctx context.Context, doc json.RawMessage) (string, error) {
	c.puts++
	return c.Store.Put(ctx, doc)
}

func (c *countingStore) PutBatch(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	c.batches++
	if c.failBatch {
		return nil, errors.New("disk gone")
	}
	return c.Store.PutBatch(ctx, docs)
}

func (c *countingStore) PutChunks(ctx context.Context, chunks []engine.Chunk) error {
	c.chunkPuts++
	return c.Store.PutChunks(ctx, chunks)
}

// TestPutFilesAsWrites checks that PutFiles leaves the replica, the
// results and the events as the same Writes one by one would, in two
// transactions when no path repeats (three more for a repeated one).
func TestPutFilesAsWrites(t *testing.T) {
	ctx := t.Context()
	now := time.UnixMilli(1_700_000_000_000)
	o := Options{Settings: &livesync.Settings{}, Now: func() time.Time { return now }}
	before := []FileWrite{
		{Path: "same.md", Data: []byte("kept")},
		{Path: "changed.md", Data: []byte("old"), WriteOptions: WriteOptions{MTime: now.Add(-time.Hour)}},
	}
	batch := []FileWrite{
		{Path: "a.md", Data: []byte("shared piece")},
		{Path: "b.md", Data: []byte("shared piece")},
		{Path: "same.md", Data: []byte("kept")},
		{Path: "changed.md", Data: []byte("new")},
		{Path: "bin/x.png", Data: []byte{0, 1, 2, 3}, WriteOptions: WriteOptions{MTime: now.Add(time.Minute)}},
	}
	seq := newStore(t)
	vs := openVault(t, seq, o)
	evs := watch(vs)
	var want []WriteResult
	for i, f := range append(slices.Clone(before), batch...) {
		res, err := vs.Write(ctx, f.Path, f.Data, f.WriteOptions)
		if err != nil {
			t.Fatal(err)
		}
		if i >= len(before) {
			want = append(want, res)
		}
	}

	cs := &countingStore{Store: newStore(t)}
	vb := openVault(t, cs, o)
	evb := watch(vb)
	for _, f := range before {
		if _, err := vb.Write(ctx, f.Path, f.Data, f.WriteOptions); err != nil {
			t.Fatal(err)
		}
	}
	cs.puts, cs.batches, cs.chunkPuts = 0, 0, 0
	got, err := vb.PutFiles(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if cs.puts != 0 || cs.batches != 1 || cs.chunkPuts != 1 {
		t.Errorf("PutFiles made %d Put, %d PutBatch, %d PutChunks calls; want 0, 1, 1", cs.puts, cs.batches, cs.chunkPuts)
	}
	for i, r := range got {
		if r.Err != nil || fmt.Sprint(r.WriteResult) != fmt.Sprint(want[i]) {
			t.Errorf("%s: PutFiles %+v (err %v), Write %+v", batch[i].Path, r.WriteResult, r.Err, want[i])
		}
	}
	if a, b := evs.files(), evb.files(); !slices.Equal(a, b) {
		t.Errorf("events: PutFiles %v, Writes %v", b, a)
	}
	sameReplica(t, vs, vb)

	// A path twice: the second is a new revision of the first.
	cs.puts, cs.batches, cs.chunkPuts = 0, 0, 0
	got, err = vb.PutFiles(ctx, []FileWrite{{Path: "c.md", Data: []byte("one")}, {Path: "d.md", Data: []byte("d")}, {Path: "c.md", Data: []byte("two")}})
	if err != nil {
		t.Fatal(err)
	}
	if got[2].Meta.Rev[:2] != "2-" || cs.batches != 2 {
		t.Errorf("repeated path: second revision %q, %d batches", got[2].Meta.Rev, cs.batches)
	}
	if data, err := vb.Read(ctx, "c.md"); err != nil || string(data) != "two" {
		t.Errorf("c.md: %q, %v", data, err)
	}
}

// sameReplica checks that two vaults hold the same files.
func sameReplica(t *testing.T, a, b *Vault) {
	t.Helper()
	fa, err := a.List(t.Context(), "", ListOptions{Deleted: true})
	if err != nil {
		t.Fatal(err)
	}
	fb, err := b.List(t.Context(), "", ListOptions{Deleted: true})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(fa) != fmt.Sprint(fb) {
		t.Errorf("replicas differ:\n%v\n%v", fa, fb)
	}
}

// TestPutFilesInterrupted checks that metadata is written only after the
// chunks it names: when the metadata transaction fails, the replica holds
// the chunks and no metadata, and writing the files again completes them.
func TestPutFilesInterrupted(t *testing.T) {
	ctx := t.Context()
	cs := &countingStore{Store: newStore(t), failBatch: true}
	v := openVault(t, cs, Options{Settings: &livesync.Settings{}})
	var files []FileWrite
	for i := range 20 {
		files = append(files, FileWrite{Path: fmt.Sprintf("n/%02d.md", i), Data: fmt.Appendf(nil, "note %d", i)})
	}
	if _, err := v.PutFiles(ctx, files); err == nil {
		t.Fatal("PutFiles succeeded with a failing metadata transaction")
	}
	list, err := v.List(ctx, "", ListOptions{Deleted: true})
	if err != nil || len(list) != 0 {
		t.Fatalf("after a failed metadata transaction: %d files (%v)", len(list), err)
	}
	cs.failBatch = false
	res, err := v.PutFiles(ctx, files)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || r.Unchanged || r.NewChunks != 0 {
			t.Errorf("%s: %+v (chunks were already stored)", files[i].Path, r)
		}
	}
	list, err = v.List(ctx, "", ListOptions{})
	if err != nil || len(list) != len(files) {
		t.Fatalf("after the retry: %d files (%v)", len(list), err)
	}
	for _, f := range list {
		if f.Held() {
			t.Errorf("%s lacks chunks", f.Meta.Path)
		}
	}
}
