//go:build !js

package p2p

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
)

// waitingEndpoint's Changes waits for its ctx and records how long.
type waitingEndpoint struct {
	engine.Endpoint
	waited time.Duration
}

func (w *waitingEndpoint) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	start := time.Now()
	<-ctx.Done()
	w.waited = time.Since(start)
	return engine.ChangesPage{}, ctx.Err()
}

// A longpoll waits what the client waits, never beyond three quarters of
// the stream's deadline, and then answers an empty page at the same
// sequence; a stream ended by the server's stop is an error, not a page.
func TestLongpollBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &waitingEndpoint{}
		sv := newServer(nil, ServeConfig{Timeout: 20 * time.Second})
		defer sv.stop()
		for _, tc := range []struct {
			waitMS int64
			want   time.Duration
		}{{0, 15 * time.Second}, {2000, 2 * time.Second}, {3_600_000, 15 * time.Second}} {
			resp, err := sv.changes(t.Context(), ep, request{Op: opChanges, Since: "7", Wait: true, WaitMS: tc.waitMS})
			if err != nil || len(resp.Results) != 0 || resp.LastSeq != "7" {
				t.Fatalf("wait %d ms: %+v, %v; want an empty page at 7", tc.waitMS, resp, err)
			}
			if ep.waited != tc.want {
				t.Fatalf("wait %d ms: waited %v, want %v", tc.waitMS, ep.waited, tc.want)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := sv.changes(ctx, ep, request{Op: opChanges, Since: "7", Wait: true, WaitMS: 5000}); err == nil {
			t.Fatal("a longpoll whose stream ended answered a page")
		}
	})
}
