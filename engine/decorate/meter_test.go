package decorate

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
)

// TestMeteredCounts: requests, ids, errors (not cancellations), and the
// most in flight at once.
func TestMeteredCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		block := make(chan struct{})
		src := &fakeSource{key: "k", have: map[string]string{"h:a": "A"}, block: block}
		m := &Meter{}
		s := Metered(src, m)
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() { _, _ = s.FetchChunks(t.Context(), []engine.ChunkID{"h:a", "h:b"}) })
		}
		synctest.Wait()
		if st := m.Stats(); st.InFlight != 3 || st.MaxInFlight != 3 || st.Requests != 3 || st.IDs != 6 {
			t.Fatalf("while in flight: %+v", st)
		}
		close(block)
		wg.Wait()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, _ = s.FetchChunks(ctx, []engine.ChunkID{"h:a"}) // cancelled: not an error
		src.fl = &flaky{n: 1, err: errTransport}
		src.block = nil
		_, _ = s.FetchChunks(t.Context(), []engine.ChunkID{"h:a"})
		if st := m.Stats(); st.InFlight != 0 || st.MaxInFlight != 3 || st.Requests != 5 || st.IDs != 8 || st.Errors != 1 {
			t.Fatalf("after: %+v", st)
		}
		if s.ThrottleKey() != "k" || !s.CanFetchDirect() {
			t.Error("the decorated source's key or capability is lost")
		}
	})
}

// TestMeteredWindow: MaxInWindow counts starts within one window, at
// exact virtual times.
func TestMeteredWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &Meter{Window: time.Minute}
		s := Metered(&fakeSource{key: "k"}, m)
		fetch := func() { _, _ = s.FetchChunks(t.Context(), []engine.ChunkID{"h:a"}) }
		fetch()
		time.Sleep(30 * time.Second)
		fetch()
		fetch()
		if got := m.Stats().MaxInWindow; got != 3 {
			t.Fatalf("MaxInWindow = %d, want 3", got)
		}
		time.Sleep(31 * time.Second) // the first start left the window
		fetch()
		if got := m.Stats().MaxInWindow; got != 3 {
			t.Fatalf("MaxInWindow = %d, want still 3", got)
		}
		fetch()
		if got := m.Stats().MaxInWindow; got != 4 {
			t.Fatalf("MaxInWindow = %d, want 4 (starts at 30s, 30s, 61s, 61s)", got)
		}
	})
}

// TestMeteredLimit: with Limit, no more than Limit requests are in flight;
// a waiting one gives up with its context.
func TestMeteredLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		block := make(chan struct{})
		src := &fakeSource{key: "k", block: block}
		m := &Meter{Limit: 2}
		s := Metered(src, m)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { _, _ = s.FetchChunks(t.Context(), []engine.ChunkID{"h:a"}) })
		}
		synctest.Wait()
		if st := m.Stats(); st.InFlight != 2 || len(src.asked) != 2 {
			t.Fatalf("in flight %d, asked %d; want 2, 2", st.InFlight, len(src.asked))
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := s.FetchChunks(ctx, []engine.ChunkID{"h:a"}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("waiting request: %v, want its deadline", err)
		}
		close(block)
		wg.Wait()
		if st := m.Stats(); st.MaxInFlight != 2 || st.Requests != 4 {
			t.Fatalf("after: %+v", st)
		}
	})
}

// TestMeteredPorts: the Objects and Endpoint decorators count every
// method.
func TestMeteredPorts(t *testing.T) {
	m := &Meter{}
	o := MeteredObjects(enginetest.NewMemObjects("", "fake"), m)
	_ = o.Put(t.Context(), "p", []byte("x"))
	_, _ = o.Get(t.Context(), "p")
	_, _ = o.List(t.Context(), "")
	if st := m.Stats(); st.Requests != 3 || st.IDs != 2 {
		t.Fatalf("objects: %+v", st)
	}
	m2 := &Meter{}
	exerciseEndpoint(t, MeteredEndpoint(&fakeEndpoint{fl: &flaky{}}, m2))
	if st := m2.Stats(); st.Requests != 7 || st.IDs != 5 {
		t.Fatalf("endpoint: %+v", st)
	}
}
