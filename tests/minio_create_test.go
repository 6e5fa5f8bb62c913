package tests

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// TestS3PutCreateOnly: Put never replaces an object. The server enforces
// If-None-Match: * (412): a second Put of a key is a storage error
// wrapping journalsync.ErrExists and the first body stays; of eight
// clients creating one key at once exactly one succeeds. PutObject still
// replaces, and PutPack moves to the next millisecond when its key is
// taken.
func TestS3PutCreateOnly(t *testing.T) {
	b, e := freshBucket(t)
	ctx := ctxT(t)
	key := journal.PackKey(b.Prefix(), 1800000000000)
	if err := b.Put(ctx, key, []byte("first device's pack")); err != nil {
		t.Fatal(err)
	}
	err := b.Put(ctx, key, []byte("second device's pack"))
	wantStage(t, "put of an existing key", err, engine.StageStorage)
	if !errors.Is(err, journalsync.ErrExists) {
		t.Fatalf("put of an existing key: %v does not wrap journalsync.ErrExists", err)
	}
	if got, err := b.Get(ctx, key); err != nil || string(got) != "first device's pack" {
		t.Fatalf("after the refused put: %q, %v; want the first body", got, err)
	}

	// Eight clients race for one key.
	race := journal.PackKey(b.Prefix(), 1800000000500)
	const n = 8
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		x := s3Bucket(t, e, b.Name(), b.Prefix(), nil)
		wg.Go(func() {
			<-start
			errs[i] = x.Put(ctx, race, fmt.Appendf(nil, "client %d", i))
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner < 0:
			winner = i
		case err == nil:
			t.Fatalf("clients %d and %d both created %s", winner, i, race)
		case !errors.Is(err, journalsync.ErrExists):
			t.Fatalf("client %d: %v", i, err)
		}
	}
	if got, err := b.Get(ctx, race); winner < 0 || err != nil || string(got) != fmt.Sprintf("client %d", winner) {
		t.Fatalf("raced key holds %q (%v); winner %d", got, err, winner)
	}

	// PutObject replaces; Put still refuses.
	name := key[len(b.Prefix()):]
	if err := b.PutObject(ctx, name, []byte("repaired")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, key); err != nil || string(got) != "repaired" {
		t.Fatalf("after PutObject: %q, %v", got, err)
	}

	// PutPack with a frozen clock: the second pack takes the next key.
	const ms = int64(1800000001000)
	frozen := s3Bucket(t, e, b.Name(), b.Prefix(), func(c *minio.Config) { c.Now = func() time.Time { return time.UnixMilli(ms) } })
	recs := []journal.Record{{ID: "h:one", ChunkData: "one"}}
	for i := range int64(2) {
		k, err := frozen.PutPack(ctx, recs, nil)
		if err != nil || k != journal.PackKey(b.Prefix(), ms+i) {
			t.Fatalf("PutPack %d: %s, %v; want %s", i, k, err, journal.PackKey(b.Prefix(), ms+i))
		}
	}
}

// TestS3PutLostAnswer: the server stores a Put whose answer is lost (a
// 503 after forwarding); the retry meets 412, reads the object back, finds
// its own body and succeeds. The same retry against another client's
// object (the first attempt never reached the server) is ErrExists, and
// that object stays.
func TestS3PutLostAnswer(t *testing.T) {
	b, e := freshBucket(t)
	ctx := ctxT(t)
	p := startS3FaultProxy(t, e, false)
	pb := s3Bucket(t, e, b.Name(), b.Prefix(), viaProxy(p.hostPort(), false, e, nil))

	mine := journal.PackKey(b.Prefix(), 1800000000000)
	p.lose.Store(1)
	before := p.requests.Load()
	if err := pb.Put(ctx, mine, []byte("my pack")); err != nil {
		t.Fatalf("put whose first answer was lost: %v", err)
	}
	if got := p.requests.Load() - before; got != 3 {
		t.Errorf("%d requests, want 3 (the lost PUT, the PUT answered 412, the GET)", got)
	}
	if got, err := b.Get(ctx, mine); err != nil || string(got) != "my pack" {
		t.Fatalf("stored %q, %v", got, err)
	}

	theirs := journal.PackKey(b.Prefix(), 1800000000001)
	if err := b.Put(ctx, theirs, []byte("another device's pack")); err != nil {
		t.Fatal(err)
	}
	p.fail.Store(1)
	err := pb.Put(ctx, theirs, []byte("my pack"))
	if !errors.Is(err, journalsync.ErrExists) {
		t.Fatalf("retried put of another client's key: %v; want ErrExists", err)
	}
	if got, err := b.Get(ctx, theirs); err != nil || !bytes.Equal(got, []byte("another device's pack")) {
		t.Fatalf("the other client's object: %q, %v", got, err)
	}
}

// TestS3HandshakeParams: HandshakeParams returns what Handshake returns
// plus the sync parameters as stored and their journal epoch, so no
// further request is needed for journalsync.Config.
func TestS3HandshakeParams(t *testing.T) {
	b, _ := freshBucket(t)
	ctx := ctxT(t)
	r, err := b.HandshakeParams(ctx, minio.HandshakeOptions{NodeID: "node-a", Settings: tweaks(t, false)})
	if err != nil || r.Verdict.Kind != negotiate.VerdictOK {
		t.Fatalf("HandshakeParams: %v (verdict %v)", err, r.Verdict.Kind)
	}
	p, err := b.GetSyncParameters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	salt, err := p.Salt()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Params, p) || !bytes.Equal(r.Salt, salt) || r.Epoch != negotiate.JournalEpoch(p) || r.Epoch != "2:"+p.PBKDF2Salt {
		t.Fatalf("HandshakeParams gave %+v / epoch %q; the bucket holds %+v", r.Params, r.Epoch, p)
	}
	again, verdict, err := b.Handshake(ctx, minio.HandshakeOptions{NodeID: "node-b", Settings: tweaks(t, false)})
	if err != nil || !bytes.Equal(again, r.Salt) || verdict.Kind != negotiate.VerdictOK {
		t.Fatalf("Handshake: %v, %v; want the same salt", verdict.Kind, err)
	}
	if _, err := b.HandshakeParams(ctx, minio.HandshakeOptions{}); err == nil {
		t.Fatal("HandshakeParams without a NodeID succeeded")
	}
}
