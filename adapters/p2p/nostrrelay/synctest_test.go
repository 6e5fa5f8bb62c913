//go:build !js

package nostrrelay

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// TestBucket: a full minute's burst, then one token per 60/perMinute s.
func TestBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBucket(6, time.Now())
		for i := range 6 {
			if !b.take(time.Now()) {
				t.Fatalf("take %d of the burst refused", i)
			}
		}
		if b.take(time.Now()) {
			t.Fatal("take beyond the burst allowed")
		}
		time.Sleep(9999 * time.Millisecond)
		if b.take(time.Now()) {
			t.Fatal("token before 10 s")
		}
		time.Sleep(time.Millisecond)
		if !b.take(time.Now()) || b.take(time.Now()) {
			t.Fatal("want exactly one token after 10 s")
		}
		time.Sleep(time.Hour) // refills to the burst, no more
		for i := range 6 {
			if !b.take(time.Now()) {
				t.Fatalf("take %d after an hour refused", i)
			}
		}
		if b.take(time.Now()) {
			t.Fatal("the bucket holds more than a minute's worth")
		}
	})
}

// TestPurgeLoop: the relay's own timer removes expired events, and Close
// ends its goroutine (synctest fails on a goroutine left in the bubble).
func TestPurgeLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Config{})
		now := time.Now()
		for _, ttl := range []time.Duration{90 * time.Second, 150 * time.Second} {
			ev := event(t, nostr.GeneratePrivateKey(), KindAnnouncement, "r", now, now.Add(ttl), "x")
			if ok, reason := r.publish(&ev, 100); !ok {
				t.Fatal(reason)
			}
		}
		time.Sleep(purgeInterval)
		synctest.Wait()
		if n := r.Stats().Events; n != 2 {
			t.Fatalf("%d events after one minute, want 2", n)
		}
		time.Sleep(purgeInterval)
		synctest.Wait()
		if n := r.Stats().Events; n != 1 {
			t.Fatalf("%d events after two minutes, want 1", n)
		}
		time.Sleep(purgeInterval)
		synctest.Wait()
		if n := r.Stats().Events; n != 0 {
			t.Fatalf("%d events after three minutes, want 0", n)
		}
		r.Close()
	})
}

// TestBucketHugeRate: a rate beyond int64 arithmetic is capped, not
// wrapped into a refusal.
func TestBucketHugeRate(t *testing.T) {
	b := newBucket(1<<40, time.Now())
	for i := range 1000 {
		if !b.take(time.Now()) {
			t.Fatalf("take %d refused", i)
		}
	}
}
