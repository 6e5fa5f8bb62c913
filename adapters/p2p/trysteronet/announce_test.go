//go:build !js

package trysteronet

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestAnnounceSchedule: announcements go out at once, then after 233,
// 533 and 1333 ms, then every 5333 ms (trystero strategy.mjs), each as
// {"peerId"} on the root topic.
func TestAnnounceSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var at []time.Duration
		publish := func(topic, content string) error {
			if topic != "root" || content != `{"peerId":"self"}` {
				t.Errorf("published %q on %q", content, topic)
			}
			at = append(at, time.Since(start))
			return nil
		}
		done := make(chan struct{})
		finished := make(chan struct{})
		go func() { announce("self", "root", publish, done); close(finished) }()
		time.Sleep(13 * time.Second)
		synctest.Wait()
		close(done)
		<-finished
		want := []time.Duration{0, 233, 766, 2099, 7432, 12765}
		for i := range want {
			want[i] *= time.Millisecond
		}
		if !slices.Equal(at, want) {
			t.Fatalf("announced at %v, want %v", at, want)
		}
	})
}
