package tests

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// TestJournalSameMillisecond: packs were lost when two devices wrote the
// same key; on the real server two devices whose clocks stand at the same millisecond send 9 notes
// each at the same time. Put is create-only (If-None-Match: *), so a
// device whose key was taken moves to a later one: the bucket holds all
// four packs, each device's sentFiles names only its own, each device
// receives the other's two, and a third device receives all 18 notes.
func TestJournalSameMillisecond(t *testing.T) {
	b, _ := freshBucket(t)
	ctx := ctxT(t)
	s := livesync.Settings{Encrypt: true, PathObfuscation: true, Passphrase: "same-millisecond"}
	const ms = int64(1800000000000)
	frozen := func() time.Time { return time.UnixMilli(ms) }

	want := map[string][]byte{}
	stores := make([]store.Store, 2)
	devices := make([]*journalsync.Journal, 2)
	for d := range 2 {
		c := connectJournal(t, b, fmt.Sprintf("device-%d", d), s)
		files := map[string][]byte{}
		for i := range 9 {
			path := fmt.Sprintf("device-%d/note-%d.md", d, i)
			files[path] = fmt.Appendf(nil, "note %d written on device %d\n", i, d)
			want[path] = files[path]
		}
		stores[d] = newMemoryStore(t)
		writeFiles(t, stores[d], c.codec, files) // 18 records: 9 notes of one chunk each
		devices[d] = newJournal(t, journalsync.Config{Local: stores[d], Remote: b, Cipher: c.cipher, Epoch: c.epoch, Now: frozen, MaxPackRecords: 9})
	}

	results := make([]journalsync.Result, 2)
	errs := make([]error, 2)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for d, j := range devices {
		wg.Go(func() {
			<-start
			results[d], errs[d] = j.Send(ctx)
		})
	}
	close(start)
	wg.Wait()
	for d := range 2 {
		if errs[d] != nil || results[d].PacksSent != 2 || results[d].RecordsSent != 18 {
			t.Fatalf("device %d send: %+v, %v; want 18 records in 2 packs", d, results[d], errs[d])
		}
	}
	keys := packKeys(t, b)
	var wantKeys []string
	for i := range int64(4) {
		wantKeys = append(wantKeys, journal.PackKey(b.Prefix(), ms+i))
	}
	if !slices.Equal(keys, wantKeys) {
		t.Fatalf("bucket holds %v, want the four packs %v", keys, wantKeys)
	}

	for d, j := range devices {
		res, err := j.Receive(ctx)
		if err != nil || res.PacksReceived != 2 || res.DocsWritten != 9 || len(res.Quarantined) != 0 {
			t.Fatalf("device %d receive: %+v, %v; want the other device's 2 packs and 9 notes", d, res, err)
		}
		sameFiles(t, readLocalFiles(t, stores[d]), want)
	}

	c := connectJournal(t, b, "device-3", s)
	third := newBoltStore(t)
	res, err := newJournal(t, journalsync.Config{Local: third, Remote: b, Cipher: c.cipher, Epoch: c.epoch}).Sync(ctx)
	if err != nil || res.PacksReceived != 4 || res.DocsWritten != 18 || res.PacksSent != 0 {
		t.Fatalf("device 3 sync: %+v, %v; want 4 packs, 18 notes", res, err)
	}
	sameFiles(t, readLocalFiles(t, third), want)
}
