package vault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/vault/vaulttest"
)

func TestPollBackoff(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		n        int
		want     time.Duration
	}{
		{10 * time.Second, 1, 20 * time.Second},
		{10 * time.Second, 2, 40 * time.Second},
		{10 * time.Second, 3, 80 * time.Second},
		{10 * time.Second, 5, 5 * time.Minute}, // 320 s capped
		{10 * time.Second, 50, 5 * time.Minute},
		{time.Second, 1, 2 * time.Second},
		{10 * time.Minute, 3, 10 * time.Minute}, // never below the interval
	} {
		if got := PollBackoff(tc.interval, tc.n); got != tc.want {
			t.Errorf("PollBackoff(%s, %d) = %s, want %s", tc.interval, tc.n, got, tc.want)
		}
	}
}

// A live sync with a journal polls every interval; transport failures
// double the pause (SyncRetrying), a success resets it; an
// authentication failure ends it. Exact virtual times.
func TestJournalPollBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := vaulttest.NewJournal("mem://bucket/vault", false)
		d := newDevice(t, Options{Settings: &livesync.Settings{}})
		l := d.attach(t, r, AttachOptions{Create: true})
		mo := r.Objects().(*enginetest.MemObjects)
		first := mo.Lists()
		mo.FailList(func(n int) error {
			switch n - first {
			case 2, 3, 4:
				return &engine.Error{Op: "list packs", Stage: engine.StageTransport, Err: errors.New("connection reset by peer")}
			case 7:
				return &engine.Error{Op: "list packs", Stage: engine.StageAuth, Err: errors.New("access denied")}
			}
			return nil
		})
		start := time.Now()
		var got []string
		d.v.Watch(context.Background(), func(e Event) {
			switch e.Kind {
			case SyncPolled:
				got = append(got, fmt.Sprintf("ok@%s", time.Since(start)))
			case SyncRetrying:
				got = append(got, fmt.Sprintf("fail@%s wait %s", time.Since(start), e.Retry.Delay))
			}
		})
		_, err := d.v.Pull(context.Background(), l, SyncOptions{Live: true, Interval: 10 * time.Second})
		var ee *engine.Error
		if !errors.As(err, &ee) || ee.Stage != engine.StageAuth {
			t.Fatalf("the live sync ended with %v", err)
		}
		want := []string{"ok@0s", "fail@10s wait 20s", "fail@30s wait 40s", "fail@1m10s wait 1m20s", "ok@2m30s", "ok@2m40s"}
		if !slices.Equal(got, want) {
			t.Errorf("events\n got %q\nwant %q", got, want)
		}
		if d := time.Since(start); d != 2*time.Minute+50*time.Second {
			t.Errorf("ended after %s", d)
		}
	})
}
