package tests

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/tests/internal/faultnet"
)

// hookedObjects counts a journal's successful puts and gets and calls a
// hook after each (to break the network in the middle of a sync). id, if
// set, is the journal's ID: the checkpoint is kept per ID (endpoint,
// bucket, prefix), and the runs of one device reach the same bucket by
// different proxies.
type hookedObjects struct {
	journalsync.Objects
	id                 string
	mu                 sync.Mutex
	puts, gets         int
	afterPut, afterGet func(n int)
}

func (o *hookedObjects) Put(ctx context.Context, key string, body []byte) error {
	err := o.Objects.Put(ctx, key, body)
	if err == nil {
		o.mu.Lock()
		o.puts++
		n, hook := o.puts, o.afterPut
		o.mu.Unlock()
		if hook != nil {
			hook(n)
		}
	}
	return err
}

func (o *hookedObjects) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := o.Objects.Get(ctx, key)
	if err == nil {
		o.mu.Lock()
		o.gets++
		n, hook := o.gets, o.afterGet
		o.mu.Unlock()
		if hook != nil {
			hook(n)
		}
	}
	return b, err
}

func (o *hookedObjects) ID() string {
	if o.id != "" {
		return o.id
	}
	return o.Objects.ID()
}

func (o *hookedObjects) counts() (puts, gets int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.puts, o.gets
}

// TestToxiJournal: journal sync (E2EE, packs of 20 records) with the
// versitygw bucket behind toxiproxy (latency 20±10 ms up, slicer down).
//
// Send: after two packs are stored, every upload is cut off after 1 KiB
// of its request (in the middle of the pack's body), so the third pack's
// attempts all fail and Send returns an error; the bucket holds the two
// packs and nothing partial. Healed, and with the first two PUTs answered
// 503 and 500 by the 5xx proxy (retried by the adapter), Send resumes: it
// sends only the records the first run had not, and every record is in
// exactly one pack.
//
// Receive: a second device's Receive is reset (every answer's first bytes
// dropped and the connection reset) after its second pack; healed, with
// two GETs answered 503 and 502, a Receive downloads only the packs the
// first had not applied, and the device reads every file byte for byte.
func TestToxiJournal(t *testing.T) {
	t.Parallel()
	s, inputs := vectorSettings(t, "e2ee")
	b, e := freshBucket(t)
	p := toxiProxy(t, e.hostPort())
	toxiMust(t, p.Latency("latency", faultnet.Up, 20*time.Millisecond, 10*time.Millisecond))
	toxiMust(t, p.Slicer("slicer", faultnet.Down, 1024, 512, 50*time.Microsecond))
	tls := func(c *minio.Config) { c.InsecureSkipVerify = e.secure }
	pb := s3Bucket(t, e, b.Name(), b.Prefix(), viaProxy(p.Addr(), e.secure, e, tls))
	// The 5xx proxy speaks plain HTTP to toxiproxy; over TLS its bursts
	// go in front of the server by TCP only (the 5xx part is then
	// skipped for want of a plaintext hop).
	hb := pb
	var h *faultnet.HTTPProxy
	if !e.secure {
		h = toxiHTTP(t, p.URL())
		hb = s3Bucket(t, e, b.Name(), b.Prefix(), viaProxy(strings.TrimPrefix(h.URL(), "http://"), false, e, nil))
	}
	ctx := ctxT(t)
	dev1 := connectJournal(t, pb, "device-1", s)
	st1 := newMemoryStore(t)
	writeFiles(t, st1, dev1.codec, inputs)
	const packRecords = 20
	control := allObjects(t, b) // the sync parameters and the milestone

	sent := &hookedObjects{Objects: pb}
	sent.afterPut = func(n int) {
		if n == 2 {
			toxiMust(t, p.CutAfter("cut", faultnet.Up, 1024))
		}
	}
	j1 := newJournal(t, journalsync.Config{Local: st1, Remote: sent, Cipher: dev1.cipher, Epoch: dev1.epoch, MaxPackRecords: packRecords})
	res1, err := j1.Send(ctx)
	if err == nil {
		t.Fatalf("send through uploads cut off: %+v, want an error", res1)
	}
	wantStage(t, "send through uploads cut off", err, "transport")
	if keys := packKeys(t, b); len(keys) != 2 || len(allObjects(t, b)) != len(control)+2 {
		t.Fatalf("after the cut: packs %v, objects %v; want the 2 stored packs and nothing partial", keys, allObjects(t, b))
	}
	first := len(bucketRecords(t, b, dev1.cipher))
	cutErr := err
	toxiMust(t, p.Remove("cut"))
	if h != nil {
		h.Burst(2, func(r *http.Request) bool { return r.Method == http.MethodPut }, 503, 500)
	}
	res2, err := newJournal(t, journalsync.Config{Local: st1, Remote: &hookedObjects{Objects: hb, id: pb.ID()}, Cipher: dev1.cipher, Epoch: dev1.epoch, MaxPackRecords: packRecords}).Send(ctx)
	if err != nil {
		t.Fatalf("send after the network healed: %v", err)
	}
	records := bucketRecords(t, b, dev1.cipher) // fails on a record in two packs
	t.Logf("send: %d records in 2 packs, then cut (%v); resumed: %d records in %d packs; the bucket holds %d records in %d packs",
		first, cutErr, res2.RecordsSent, res2.PacksSent, len(records), len(packKeys(t, b)))
	if first+res2.RecordsSent != len(records) {
		t.Errorf("the resumed send sent %d records after the first run's %d; the bucket holds %d (re-sent: %d)",
			res2.RecordsSent, first, len(records), first+res2.RecordsSent-len(records))
	}
	if h != nil && h.Failed() != 2 {
		t.Errorf("%d PUTs answered 5xx, want 2", h.Failed())
	}
	packs := len(packKeys(t, b))

	// Device 2 receives through the same network.
	dev2 := connectJournal(t, pb, "device-2", s)
	st2 := newMemoryStore(t)
	got := &hookedObjects{Objects: pb}
	got.afterGet = func(n int) {
		if n == 2 {
			toxiMust(t, p.ResetPeer("reset", faultnet.Down, 0))
		}
	}
	if _, err := newJournal(t, journalsync.Config{Local: st2, Remote: got, Cipher: dev2.cipher, Epoch: dev2.epoch}).Receive(ctx); err == nil {
		t.Fatal("receive through resets succeeded")
	}
	_, firstGets := got.counts()
	toxiMust(t, p.Remove("reset"))
	if h != nil {
		h.Burst(2, func(r *http.Request) bool { return r.Method == http.MethodGet }, 503, 502)
	}
	again := &hookedObjects{Objects: hb, id: pb.ID()}
	res3, err := newJournal(t, journalsync.Config{Local: st2, Remote: again, Cipher: dev2.cipher, Epoch: dev2.epoch}).Receive(ctx)
	if err != nil {
		t.Fatalf("receive after the network healed: %v", err)
	}
	_, secondGets := again.counts()
	t.Logf("receive: %d packs downloaded, then reset; resumed: %d downloaded, %d applied (%d packs in all)", firstGets, secondGets, res3.PacksReceived, packs)
	if secondGets > packs-firstGets {
		t.Errorf("the resumed receive downloaded %d packs, want at most the %d the first had not", secondGets, packs-firstGets)
	}
	sameFiles(t, readLocalFiles(t, st2), inputs)
}
