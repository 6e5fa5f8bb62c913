package journalsync

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/e2ee"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/journal"
)

// testCipher returns a V2 cipher for a fixed master key (no PBKDF2, so
// it is fast under js/wasm too).
func testCipher(t testing.TB, seed byte) *e2ee.Cipher {
	t.Helper()
	k, err := e2ee.KeyFromMaster(bytes.Repeat([]byte{seed}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return e2ee.NewWithKey(k, e2ee.Options{})
}

// chainBucket holds n packs of one note each (metadata and its chunk),
// sealed with c, at keys t0, t0+1000, …; it returns the keys.
func chainBucket(t testing.TB, bucket *enginetest.MemObjects, n int, c journal.Cipher) []string {
	t.Helper()
	var keys []string
	for i := range n {
		recs := []journal.Record{
			{ID: fmt.Sprintf("h:chunk%02d", i), ChunkData: fmt.Sprintf("secret content %d", i)},
			{ID: fmt.Sprintf("n%02d.md", i), Doc: []byte(fmt.Sprintf(`{"_id":"n%02d.md","_rev":"1-aa%02d","_revisions":{"start":1,"ids":["aa%02d"]},"type":"plain","path":"n%02d.md","children":["h:chunk%02d"],"size":16,"ctime":1,"mtime":1,"eden":{}}`, i, i, i, i, i))},
		}
		obj, err := journal.Seal(recs, c)
		if err != nil {
			t.Fatal(err)
		}
		key := journal.PackKey(bucket.Prefix(), t0+int64(i)*1000)
		bucket.Set(key, obj)
		keys = append(keys, key)
	}
	return keys
}

func deflated(t testing.TB, payload string) []byte {
	t.Helper()
	z, err := journal.Deflate([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return z
}

func quarantinedKeys(q []Quarantine) []string {
	var out []string
	for _, e := range q {
		out = append(out, e.Key+" "+e.Stage)
	}
	return out
}

// TestQuarantine: packs that download but do not open are quarantined
// (key, stage, error text; never content), the chain goes on with the
// next pack, and later runs skip them without downloading them again.
func TestQuarantine(t *testing.T) {
	ctx := t.Context()
	bucket := newMemObjects("q/")
	keys := chainBucket(t, bucket, 5, nil)
	good0 := bucket.Body(keys[0])
	bucket.Set(keys[0], good0[:len(good0)/2])                                     // truncated DEFLATE, before any pack opened
	bucket.Set(keys[2], []byte{0xff, 0xff, 0xff, 0xff})                           // not DEFLATE
	bucket.Set(keys[3], deflated(t, "~h:ok\x1fsecret content x\nnot a record\n")) // a malformed record
	st := newStore(t)
	var logs bytes.Buffer
	var progress []Progress
	j := newJournal(t, Config{Local: st, Remote: bucket, Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Progress: func(p Progress) { progress = append(progress, p) }})
	res, err := j.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "secret") || strings.Count(logs.String(), "quarantined") != 3 {
		t.Fatalf("log:\n%s", logs.String())
	}
	if len(progress) != 5 || progress[4] != (Progress{Direction: Receiving, Key: keys[4], Packs: 5, Total: 5, Docs: 2, Chunks: 2}) {
		t.Fatalf("progress %+v", progress)
	}
	want := []string{keys[0] + " decode", keys[2] + " decode", keys[3] + " decode"}
	if got := quarantinedKeys(res.Quarantined); !slicesEqual(got, want) || res.PacksReceived != 2 {
		t.Fatalf("quarantined %v (%+v), want %v", got, res, want)
	}
	for _, q := range res.Quarantined {
		if q.Err == "" || strings.Contains(q.Err, "secret") || q.At.IsZero() {
			t.Errorf("quarantine entry %+v", q)
		}
	}
	listed, err := j.Quarantined(ctx)
	if err != nil || !slicesEqual(quarantinedKeys(listed), want) {
		t.Fatalf("Quarantined() = %v %v", quarantinedKeys(listed), err)
	}
	cp := readCheckpoint(t, j)
	if len(cp.quarantine) != 3 || cp.quarantine[j.name(keys[2])].Stage != "decode" || !slicesEqual(setOf(cp.receivedFiles), []string{j.name(keys[1]), j.name(keys[4])}) {
		t.Fatalf("checkpoint quarantine %v received %v", cp.quarantine, setOf(cp.receivedFiles))
	}
	if files := readFiles(t, st); len(files) != 2 || string(files["n01.md"]) != "secret content 1" || string(files["n04.md"]) != "secret content 4" {
		t.Fatalf("files %q", files)
	}
	// Later runs skip them.
	res, err = j.Receive(ctx)
	if err != nil || res.PacksReceived != 0 || len(res.Quarantined) != 0 {
		t.Fatalf("second receive: %+v %v", res, err)
	}
	for _, k := range keys {
		if n := bucket.Gets(k); n != 1 {
			t.Errorf("%s downloaded %d times", k, n)
		}
	}
}

// TestQuarantineDecrypt: with encryption, a pack whose ciphertext was
// altered is quarantined at the decrypt stage once another pack proves
// the key right, even when it comes first.
func TestQuarantineDecrypt(t *testing.T) {
	ctx := t.Context()
	c := testCipher(t, 1)
	bucket := newMemObjects("")
	keys := chainBucket(t, bucket, 3, c)
	obj := bucket.Body(keys[0])
	obj[len(obj)-1] ^= 1 // the GCM tag
	bucket.Set(keys[0], obj)
	obj = bucket.Body(keys[2])
	obj[50] ^= 1
	bucket.Set(keys[2], obj)
	j := newJournal(t, Config{Local: newStore(t), Remote: bucket, Cipher: c})
	res, err := j.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{keys[0] + " decrypt", keys[2] + " decrypt"}
	if got := quarantinedKeys(res.Quarantined); !slicesEqual(got, want) || res.PacksReceived != 1 {
		t.Fatalf("quarantined %v (%+v), want %v", got, res, want)
	}
}

// TestWrongPassphrase: when every pack fails to decrypt and no pack of
// the journal was ever opened, Receive reports a wrong passphrase
// (engine.ErrDecrypt) and quarantines nothing; the right key then
// receives everything. A key that opened the journal before but no
// longer opens the last pack it opened is reported the same way.
func TestWrongPassphrase(t *testing.T) {
	ctx := t.Context()
	right, wrong := testCipher(t, 1), testCipher(t, 2)
	bucket := newMemObjects("")
	keys := chainBucket(t, bucket, 3, right)
	st := newStore(t)
	for _, c := range []journal.Cipher{wrong, nil} {
		j := newJournal(t, Config{Local: st, Remote: bucket, Cipher: c})
		res, err := j.Receive(ctx)
		var ee *engine.Error
		if !errors.Is(err, engine.ErrDecrypt) || !errors.As(err, &ee) || ee.Stage != engine.StageDecrypt || len(res.Quarantined) != 0 {
			t.Fatalf("cipher %v: %+v %v", c != nil, res, err)
		}
		if q, _ := j.Quarantined(ctx); len(q) != 0 {
			t.Fatalf("quarantined %v", q)
		}
		if _, err := st.GetLocal(ctx, j.CheckpointID()); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("checkpoint written: %v", err)
		}
	}
	j := newJournal(t, Config{Local: st, Remote: bucket, Cipher: right})
	if res, err := j.Receive(ctx); err != nil || res.PacksReceived != 3 {
		t.Fatalf("right key: %+v %v", res, err)
	}

	// The passphrase is changed by mistake after new packs arrived: the
	// last pack opened no longer opens either, so this is no corruption.
	more := newMemObjects("")
	for _, k := range chainBucket(t, more, 5, right)[3:] {
		bucket.Set(k, more.Body(k))
	}
	canary := keys[2]
	before := bucket.Gets(canary)
	j = newJournal(t, Config{Local: st, Remote: bucket, Cipher: wrong})
	res, err := j.Receive(ctx)
	if !errors.Is(err, engine.ErrDecrypt) || len(res.Quarantined) != 0 || bucket.Gets(canary) != before+1 {
		t.Fatalf("changed key: %+v %v (canary downloaded %d times)", res, err, bucket.Gets(canary)-before)
	}
	if q, _ := j.Quarantined(ctx); len(q) != 0 {
		t.Fatalf("quarantined %v", q)
	}
	j = newJournal(t, Config{Local: st, Remote: bucket, Cipher: right})
	if res, err := j.Receive(ctx); err != nil || res.PacksReceived != 2 {
		t.Fatalf("right key again: %+v %v", res, err)
	}
}

// TestRetryQuarantined: quarantined packs are tried again with
// Config.RetryQuarantined on every run, or once after ClearQuarantine.
func TestRetryQuarantined(t *testing.T) {
	ctx := t.Context()
	bucket := newMemObjects("")
	keys := chainBucket(t, bucket, 3, nil)
	good := bucket.Body(keys[1])
	bucket.Set(keys[1], []byte("garbage"))
	st := newStore(t)
	j := newJournal(t, Config{Local: st, Remote: bucket})
	if res, err := j.Receive(ctx); err != nil || len(res.Quarantined) != 1 {
		t.Fatalf("%+v %v", res, err)
	}

	// RetryQuarantined: tried on every run while it fails.
	jr := newJournal(t, Config{Local: st, Remote: bucket, RetryQuarantined: true})
	for run := range 2 {
		res, err := jr.Receive(ctx)
		if err != nil || len(res.Quarantined) != 1 || bucket.Gets(keys[1]) != run+2 {
			t.Fatalf("retry run %d: %+v %v, %d downloads", run, res, err, bucket.Gets(keys[1]))
		}
	}
	// Fixed: applied and out of the quarantine.
	bucket.Set(keys[1], good)
	if res, err := jr.Receive(ctx); err != nil || res.PacksReceived != 1 || len(res.Quarantined) != 0 {
		t.Fatalf("after the fix: %+v %v", res, err)
	}
	if q, _ := jr.Quarantined(ctx); len(q) != 0 {
		t.Fatalf("still quarantined: %v", q)
	}
	if files := readFiles(t, st); len(files) != 3 {
		t.Fatalf("%d files", len(files))
	}

	// ClearQuarantine: one more try, then skipped again.
	bucket2 := newMemObjects("")
	keys = chainBucket(t, bucket2, 2, nil)
	bucket2.Set(keys[0], []byte("garbage"))
	j = newJournal(t, Config{Local: newStore(t), Remote: bucket2})
	if res, err := j.Receive(ctx); err != nil || len(res.Quarantined) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if err := j.ClearQuarantine(ctx, keys[0]); err != nil {
		t.Fatal(err)
	}
	if q, _ := j.Quarantined(ctx); len(q) != 0 {
		t.Fatalf("cleared but listed: %v", q)
	}
	if res, err := j.Receive(ctx); err != nil || len(res.Quarantined) != 1 || bucket2.Gets(keys[0]) != 2 {
		t.Fatalf("after clear: %+v %v", res, err)
	}
	if res, err := j.Receive(ctx); err != nil || len(res.Quarantined) != 0 || bucket2.Gets(keys[0]) != 2 {
		t.Fatalf("third run: %+v %v", res, err)
	}
	if err := j.ClearQuarantine(ctx); err != nil { // all
		t.Fatal(err)
	}
	bucket2.Set(keys[0], chainBucketPack(t, 0))
	if res, err := j.Receive(ctx); err != nil || res.PacksReceived != 1 {
		t.Fatalf("after clearing all: %+v %v", res, err)
	}
}

// chainBucketPack returns pack i of chainBucket (plain).
func chainBucketPack(t testing.TB, i int) []byte {
	b := newMemObjects("")
	keys := chainBucket(t, b, i+1, nil)
	return b.Body(keys[i])
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestEpochWipe: engine/FORMAT.md §6.5. A new epoch with the last sent pack
// still in the bucket keeps the bookkeeping; a new epoch with it gone
// (the bucket was wiped) clears the sets, the index and the quarantine
// but keeps lastLocalSeq; a failed probe is an error, not a wipe.
func TestEpochWipe(t *testing.T) {
	ctx := t.Context()
	bucket := newMemObjects("w/")
	chainBucket(t, bucket, 2, nil)
	st := newStore(t)
	putFile(t, st, "mine.md", "mine")
	cfg := Config{Local: st, Remote: bucket, Epoch: "2:salt-a", Now: stepClock(t0 + 60_000)}
	j := newJournal(t, cfg)
	if _, err := j.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	cp := readCheckpoint(t, j)
	if cp.epoch != "2:salt-a" || cp.sentFiles.len() != 1 || cp.receivedFiles.len() != 2 || cp.knownIDs.len() != 4 || len(cp.index.packs) != 3 {
		t.Fatalf("after sync: epoch %q sent %d received %d known %d index %d", cp.epoch, cp.sentFiles.len(), cp.receivedFiles.len(), cp.knownIDs.len(), len(cp.index.packs))
	}
	seq := cp.lastLocalSeq

	// A new epoch, the bucket intact: kept.
	cfg.Epoch = "2:salt-b"
	if _, err := newJournal(t, cfg).Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if cp = readCheckpoint(t, j); cp.epoch != "2:salt-b" || cp.sentFiles.len() != 1 || cp.knownIDs.len() != 4 {
		t.Fatalf("intact: epoch %q sent %d known %d", cp.epoch, cp.sentFiles.len(), cp.knownIDs.len())
	}

	// A new epoch and the probe fails: an error, nothing cleared.
	cfg.Epoch = "2:salt-c"
	bucket.FailList(func(int) error { return transportErr("list") })
	if _, err := newJournal(t, cfg).Receive(ctx); !IsTransportErr(err) {
		t.Fatalf("probe failure: %v", err)
	}
	if cp = readCheckpoint(t, j); cp.epoch != "2:salt-b" || cp.sentFiles.len() != 1 {
		t.Fatalf("after a failed probe: epoch %q sent %d", cp.epoch, cp.sentFiles.len())
	}
	bucket.FailList(nil)

	// Wiped (the last sent pack is gone) and a new epoch: cleared.
	for _, k := range bucket.PackKeys() {
		bucket.Remove(k)
	}
	if _, err := newJournal(t, cfg).Receive(ctx); err != nil {
		t.Fatal(err)
	}
	cp = readCheckpoint(t, j)
	if cp.epoch != "2:salt-c" || cp.lastLocalSeq != seq || cp.sentFiles.len()+cp.sentIDs.len()+cp.receivedFiles.len()+cp.knownIDs.len()+len(cp.index.packs)+len(cp.quarantine) != 0 || cp.opened {
		t.Fatalf("after the wipe: epoch %q seq %q (was %q) sent %d/%d received %d known %d index %d", cp.epoch, cp.lastLocalSeq, seq,
			cp.sentFiles.len(), cp.sentIDs.len(), cp.receivedFiles.len(), cp.knownIDs.len(), len(cp.index.packs))
	}
}

// TestEpochFirstSeen: a checkpoint without sent packs just records the
// epoch.
func TestEpochFirstSeen(t *testing.T) {
	ctx := t.Context()
	bucket := newMemObjects("")
	chainBucket(t, bucket, 1, nil)
	j := newJournal(t, Config{Local: newStore(t), Remote: bucket, Epoch: "2:x"})
	if _, err := j.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if cp := readCheckpoint(t, j); cp.epoch != "2:x" || cp.receivedFiles.len() != 1 {
		t.Fatalf("epoch %q received %d", cp.epoch, cp.receivedFiles.len())
	}
	j2 := newJournal(t, Config{Local: j.cfg.Local, Remote: bucket, Epoch: "2:y"})
	if _, err := j2.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if cp := readCheckpoint(t, j); cp.epoch != "2:y" || cp.receivedFiles.len() != 1 {
		t.Fatalf("epoch %q received %d", cp.epoch, cp.receivedFiles.len())
	}
}

// TestEpochWipeResend: with ResendAfterWipe a wiped bucket gets every
// local change again (lastLocalSeq forgotten too), and OnWipe is told.
// Without it only changes made after the wipe would be sent.
func TestEpochWipeResend(t *testing.T) {
	ctx := t.Context()
	bucket := newMemObjects("w/")
	st := newStore(t)
	putFile(t, st, "a.md", "first")
	putFile(t, st, "b.md", "second")
	wipes := 0
	cfg := Config{Local: st, Remote: bucket, Epoch: "2:salt-a", Now: stepClock(t0 + 60_000), ResendAfterWipe: true, OnWipe: func() { wipes++ }}
	if _, err := newJournal(t, cfg).Send(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(bucket.PackKeys()); n == 0 {
		t.Fatal("nothing sent")
	}
	for _, k := range bucket.PackKeys() {
		bucket.Remove(k)
	}
	cfg.Epoch = "2:salt-b"
	res, err := newJournal(t, cfg).Send(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if wipes != 1 || res.RecordsSent < 2 || len(bucket.PackKeys()) == 0 {
		t.Fatalf("after the wipe: wipes %d, result %+v, packs %d", wipes, res, len(bucket.PackKeys()))
	}
}

// TestPacksWipedSameEpoch: with ResendAfterWipe, packs deleted while the
// sync parameters stayed (the same epoch) are a wipe too: the next run
// sends everything again. Without it (upstream's rule) nothing is
// resent.
func TestPacksWipedSameEpoch(t *testing.T) {
	for _, resend := range []bool{true, false} {
		ctx := t.Context()
		bucket := newMemObjects("w/")
		st := newStore(t)
		putFile(t, st, "a.md", "first")
		putFile(t, st, "b.md", "second")
		wipes := 0
		cfg := Config{Local: st, Remote: bucket, Epoch: "2:salt-a", Now: stepClock(t0 + 60_000), ResendAfterWipe: resend, OnWipe: func() { wipes++ }}
		if _, err := newJournal(t, cfg).Send(ctx); err != nil {
			t.Fatal(err)
		}
		// Nothing changed: no wipe, nothing sent.
		res, err := newJournal(t, cfg).Send(ctx)
		if err != nil || wipes != 0 || res.RecordsSent != 0 {
			t.Fatalf("resend %v, unchanged bucket: wipes %d, %+v, %v", resend, wipes, res, err)
		}
		for _, k := range bucket.PackKeys() {
			bucket.Remove(k)
		}
		res, err = newJournal(t, cfg).Send(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case resend && (wipes != 1 || res.RecordsSent < 2 || len(bucket.PackKeys()) == 0):
			t.Errorf("packs wiped, same epoch: wipes %d, result %+v, packs %d", wipes, res, len(bucket.PackKeys()))
		case !resend && (wipes != 0 || res.RecordsSent != 0):
			t.Errorf("without ResendAfterWipe: wipes %d, result %+v", wipes, res)
		}
	}
}
