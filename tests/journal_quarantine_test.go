package tests

import (
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/e2ee"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// TestJournalQuarantine, on the real server: one bad journal must not
// halt the chain, as it does upstream
// (github.com/vrtmrz/obsidian-livesync/issues/698 and /1096). Between the
// good packs of a journal sit an object of random bytes and a truncated copy
// of a real pack. Receive quarantines both (key and stage reported in
// the result and to Progress), applies every good pack, and rebuilds
// every file; the next Receive skips them without downloading them.
// ClearQuarantine retries one once; a repaired pack is then applied. For
// E2EE a wrong passphrase is an ErrDecrypt error that quarantines
// nothing and writes nothing.
func TestJournalQuarantine(t *testing.T) {
	for _, c := range []struct {
		kind  string
		stage engine.Stage // of both broken objects
	}{{"plain", engine.StageDecode}, {"e2ee", engine.StageDecrypt}} {
		t.Run(c.kind, func(t *testing.T) {
			s, inputs := vectorSettings(t, c.kind)
			b, _ := freshBucket(t)
			ctx := ctxT(t)
			good, corrupt, truncated, whole := quarantinePlant(t, b, s, inputs)
			bad := []string{corrupt, truncated}

			d2 := connectJournal(t, b, "device-2", s)
			st2 := newBoltStore(t)
			counted := &countingObjects{Objects: b}
			var reported []journalsync.Progress
			j := newJournal(t, journalsync.Config{Local: st2, Remote: counted, Cipher: d2.cipher, Epoch: d2.epoch,
				Progress: func(p journalsync.Progress) { reported = append(reported, p) }})
			res, err := j.Receive(ctx)
			if err != nil {
				t.Fatalf("receive with two broken packs: %v", err)
			}
			if res.PacksReceived != len(good) || res.DocsWritten != len(inputs) {
				t.Errorf("receive: %+v; want all %d good packs applied", res, len(good))
			}
			checkQuarantine := func(what string, got []journalsync.Quarantine, want []string) {
				t.Helper()
				quarantineCheck(t, c.stage, what, got, want)
			}
			checkQuarantine("receive result", res.Quarantined, bad)
			q, err := j.Quarantined(ctx)
			if err != nil {
				t.Fatal(err)
			}
			checkQuarantine("Quarantined", q, bad)
			var progressKeys []string
			for _, p := range reported {
				progressKeys = append(progressKeys, p.Key)
			}
			wantKeys := slices.SortedFunc(slices.Values(append(slices.Clone(good), bad...)), journal.ComparePackKeys)
			if !slices.Equal(progressKeys, wantKeys) || reported[len(reported)-1].Packs != len(wantKeys) || reported[0].Total != len(wantKeys) {
				t.Errorf("progress reported %v (last %+v), want every pack once in key order: %v", progressKeys, reported[len(reported)-1], wantKeys)
			}
			sameFiles(t, readLocalFiles(t, st2), inputs)

			// The next receive skips them: nothing is downloaded.
			counted.reset()
			if res, err := j.Receive(ctx); err != nil || res.PacksReceived != 0 || len(res.Quarantined) != 0 || counted.gets.Load() != 0 {
				t.Fatalf("second receive: %+v, %v, %d downloads; want the quarantined packs skipped", res, err, counted.gets.Load())
			}

			// Released once: tried again, and quarantined again. Two
			// downloads: the released pack, and the last pack the key
			// opened (it still opens, so the key is right and the pack is
			// broken).
			if err := j.ClearQuarantine(ctx, corrupt); err != nil {
				t.Fatal(err)
			}
			counted.reset()
			res, err = j.Receive(ctx)
			if err != nil || counted.gets.Load() != 2 || res.PacksReceived != 0 {
				t.Fatalf("receive after ClearQuarantine: %+v, %v, %d downloads; want the released pack tried once and the key checked", res, err, counted.gets.Load())
			}
			checkQuarantine("after a retry", res.Quarantined, []string{corrupt})

			// Repaired on the server, released: applied (nothing new in it).
			if err := b.PutObject(ctx, truncated[len(b.Prefix()):], whole); err != nil { // Put never replaces
				t.Fatal(err)
			}
			if err := j.ClearQuarantine(ctx, truncated); err != nil {
				t.Fatal(err)
			}
			if res, err := j.Receive(ctx); err != nil || res.PacksReceived != 1 || res.DocsWritten != 0 || len(res.Quarantined) != 0 {
				t.Fatalf("receive of the repaired pack: %+v, %v", res, err)
			}
			q, _ = j.Quarantined(ctx)
			checkQuarantine("after the repair", q, []string{corrupt})

			if !s.Encrypt {
				return
			}
			quarantineWrongPassphrase(t, b, s, d2)
		})
	}
}

// quarantinePlant has device 1 send the vault's files to b in packs a
// second apart, then puts an object of random bytes after the first
// pack and a truncated copy of the third after the third. It returns
// the good packs' keys, the two planted keys and the third pack whole.
func quarantinePlant(t *testing.T, b *minio.Bucket, s livesync.Settings, inputs map[string][]byte) (good []string, corrupt, truncated string, whole []byte) {
	ctx := ctxT(t)
	d1 := connectJournal(t, b, "device-1", s)
	st1 := newMemoryStore(t)
	writeFiles(t, st1, d1.codec, inputs)
	// Packs a second apart, so that other keys fit between them.
	var tick atomic.Int64
	clock := func() time.Time { return time.UnixMilli(1700000000000 + 1000*tick.Add(1)) }
	if res, err := newJournal(t, journalsync.Config{Local: st1, Remote: b, Cipher: d1.cipher, Epoch: d1.epoch,
		MaxPackRecords: 60, Now: clock}).Send(ctx); err != nil || res.PacksSent < 4 {
		t.Fatalf("send: %+v, %v; want at least 4 packs", res, err)
	}
	good = packKeys(t, b)
	at := func(i int) int64 {
		ms, ok := journal.ParsePackKey(b.Prefix(), good[i])
		if !ok {
			t.Fatalf("%s is not a pack key", good[i])
		}
		return ms
	}
	random := make([]byte, 4096)
	_, _ = rand.Read(random)
	whole, err := b.Get(ctx, good[2])
	if err != nil {
		t.Fatal(err)
	}
	corrupt, truncated = journal.PackKey(b.Prefix(), at(0)+500), journal.PackKey(b.Prefix(), at(2)+500)
	for k, body := range map[string][]byte{corrupt: random, truncated: whole[:len(whole)/2]} {
		if err := b.Put(ctx, k, body); err != nil {
			t.Fatal(err)
		}
	}
	return good, corrupt, truncated, whole
}

// quarantineCheck checks got quarantines exactly want, in order, each
// at stage with its error and time.
func quarantineCheck(t *testing.T, stage engine.Stage, what string, got []journalsync.Quarantine, want []string) {
	t.Helper()
	var keys []string
	for _, q := range got {
		keys = append(keys, q.Key)
		if q.Stage != string(stage) || q.Err == "" || q.At.IsZero() {
			t.Errorf("%s: %s quarantined at stage %q (%q, %v); want %q with the error", what, q.Key, q.Stage, q.Err, q.At, stage)
		}
	}
	if !slices.Equal(keys, want) {
		t.Errorf("%s: quarantined %v, want %v", what, keys, want)
	}
}

// quarantineWrongPassphrase: a wrong passphrase is not corruption. The
// receive fails with an ErrDecrypt error that does not show the
// passphrase, quarantines nothing and writes nothing.
func quarantineWrongPassphrase(t *testing.T, b *minio.Bucket, s livesync.Settings, d2 journalClient) {
	ctx := ctxT(t)
	wrong := "not-" + s.Passphrase
	st3 := newMemoryStore(t)
	j3 := newJournal(t, journalsync.Config{Local: st3, Remote: b, Cipher: e2ee.New(wrong, d2.salt, e2ee.Options{}), Epoch: d2.epoch})
	res, err := j3.Receive(ctx)
	var ee *engine.Error
	if !errors.Is(err, engine.ErrDecrypt) || !errors.As(err, &ee) || ee.Stage != engine.StageDecrypt {
		t.Fatalf("receive with a wrong passphrase: %+v, %v; want an ErrDecrypt *engine.Error", res, err)
	}
	if strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), s.Passphrase) {
		t.Errorf("the error shows the passphrase: %v", err)
	}
	if q, err := j3.Quarantined(ctx); err != nil || len(q) != 0 || len(res.Quarantined) != 0 || res.PacksReceived != 0 {
		t.Errorf("wrong passphrase quarantined %v (%v), result %+v; want nothing", q, err, res)
	}
	if metas := localFileMetas(t, st3); len(metas) != 0 {
		t.Errorf("wrong passphrase wrote %d files", len(metas))
	}
}
