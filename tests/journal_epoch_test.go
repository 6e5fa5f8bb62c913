package tests

import (
	"bytes"
	"testing"

	"github.com/livesync-go/livesync-go/engine/journalsync"
	minioclient "github.com/minio/minio-go/v7"
)

// TestJournalBucketWiped (engine/FORMAT.md §6.5 on the real server): the bucket
// is emptied and a device handshakes again, which writes a new salt; the
// journal epoch changes. Device 1, whose last sent pack is gone, takes
// the bucket as wiped: it forgets what it knew of the bucket but, as
// upstream, keeps its place in its own changes feed, so a plain sync
// sends nothing; rebuilding the bucket from it (ResetCheckpoint, then
// Sync) sends the whole vault again under the new key. Device 2, which
// only received, keeps its bookkeeping: it receives the new packs,
// writes nothing it already has, and sends nothing back. A new device
// reads the rebuilt bucket whole.
func TestJournalBucketWiped(t *testing.T) {
	s, inputs := vectorSettings(t, "e2ee")
	b, _ := freshBucket(t)
	ctx := ctxT(t)
	d1 := connectJournal(t, b, "device-1", s)
	st1 := newMemoryStore(t)
	writeFiles(t, st1, d1.codec, inputs)
	if res, err := newJournal(t, journalsync.Config{Local: st1, Remote: b, Cipher: d1.cipher, Epoch: d1.epoch}).Sync(ctx); err != nil || res.RecordsSent != 301 {
		t.Fatalf("device 1: %+v, %v", res, err)
	}
	d2 := connectJournal(t, b, "device-2", s)
	st2 := newBoltStore(t)
	if res, err := newJournal(t, journalsync.Config{Local: st2, Remote: b, Cipher: d2.cipher, Epoch: d2.epoch}).Sync(ctx); err != nil || res.DocsWritten != len(inputs) {
		t.Fatalf("device 2: %+v, %v", res, err)
	}

	c := b.Client()
	objs := c.ListObjects(ctx, b.Name(), minioclient.ListObjectsOptions{Prefix: b.Prefix(), Recursive: true})
	for re := range c.RemoveObjects(ctx, b.Name(), objs, minioclient.RemoveObjectsOptions{}) {
		t.Fatalf("remove %s: %v", re.ObjectName, re.Err)
	}
	if n := len(allObjects(t, b)); n != 0 {
		t.Fatalf("%d objects left after the wipe", n)
	}

	n1 := connectJournal(t, b, "device-1", s)
	if bytes.Equal(n1.salt, d1.salt) || n1.epoch == d1.epoch {
		t.Fatal("the handshake on the wiped bucket kept the old salt")
	}
	j1 := newJournal(t, journalsync.Config{Local: st1, Remote: b, Cipher: n1.cipher, Epoch: n1.epoch})
	res, err := j1.Sync(ctx)
	if err != nil || res.PacksSent != 0 || res.PacksReceived != 0 {
		t.Fatalf("device 1's sync after the wipe: %+v, %v; want nothing moved", res, err)
	}
	if err := j1.ResetCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = j1.Sync(ctx)
	if err != nil || res.RecordsSent != 301 || res.PacksReceived != 0 {
		t.Fatalf("device 1 rebuilding the bucket: %+v, %v; want the whole vault sent again", res, err)
	}
	n2 := connectJournal(t, b, "device-2", s)
	if !bytes.Equal(n2.salt, n1.salt) {
		t.Fatal("device 2 got another salt")
	}
	res, err = newJournal(t, journalsync.Config{Local: st2, Remote: b, Cipher: n2.cipher, Epoch: n2.epoch}).Sync(ctx)
	if err != nil || res.PacksReceived != 2 || res.DocsWritten != 0 || res.PacksSent != 0 || len(res.Quarantined) != 0 {
		t.Fatalf("device 2 after the wipe: %+v, %v; want the new packs received, nothing written or sent", res, err)
	}
	sameFiles(t, readLocalFiles(t, st2), inputs)

	// A third device reads the rebuilt bucket whole.
	n3 := connectJournal(t, b, "device-3", s)
	st3 := newMemoryStore(t)
	if res, err := newJournal(t, journalsync.Config{Local: st3, Remote: b, Cipher: n3.cipher, Epoch: n3.epoch}).Receive(ctx); err != nil || res.DocsWritten != len(inputs) {
		t.Fatalf("device 3: %+v, %v", res, err)
	}
	sameFiles(t, readLocalFiles(t, st3), inputs)
}
