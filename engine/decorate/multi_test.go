package decorate

import (
	"errors"
	"fmt"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
)

// TestMulti: each source is asked only for what the ones before it
// answered missing; disconnected sources are skipped; a failing source
// passes its ids on.
func TestMulti(t *testing.T) {
	ids := []engine.ChunkID{"h:a", "h:b", "h:c"}
	t.Run("asks the next for what is missing", func(t *testing.T) {
		a := &fakeSource{key: "k", have: map[string]string{"h:a": "A"}}
		b := &fakeSource{key: "k", have: map[string]string{"h:b": "B"}}
		c := &fakeSource{key: "k", have: map[string]string{"h:c": "C"}}
		res, err := Multi("", a, b, c).FetchChunks(t.Context(), ids)
		if err != nil || len(res.Found) != 3 || len(res.Missing) != 0 {
			t.Fatalf("%+v %v", res, err)
		}
		if fmt.Sprint(b.asked) != "[[h:b h:c]]" || fmt.Sprint(c.asked) != "[[h:c]]" {
			t.Errorf("b asked %v, c asked %v", b.asked, c.asked)
		}
	})
	t.Run("stops when nothing is missing", func(t *testing.T) {
		a := &fakeSource{key: "k", have: map[string]string{"h:a": "A", "h:b": "B", "h:c": "C"}}
		b := &fakeSource{key: "k"}
		if _, err := Multi("k", a, b).FetchChunks(t.Context(), ids); err != nil || len(b.asked) != 0 {
			t.Fatalf("err %v, b asked %v", err, b.asked)
		}
	})
	t.Run("skips sources that cannot fetch", func(t *testing.T) {
		a := &fakeSource{key: "k", off: true}
		b := &fakeSource{key: "k", have: map[string]string{"h:a": "A"}}
		m := Multi("k", a, b)
		res, err := m.FetchChunks(t.Context(), ids)
		if err != nil || len(a.asked) != 0 || len(res.Found) != 1 || len(res.Missing) != 2 || !m.CanFetchDirect() {
			t.Fatalf("%+v %v, a asked %v", res, err, a.asked)
		}
	})
	t.Run("none connected is a transport failure", func(t *testing.T) {
		m := Multi("k", &fakeSource{off: true})
		_, err := m.FetchChunks(t.Context(), ids)
		var e *engine.Error
		if !errors.Is(err, ErrNoSource) || !errors.As(err, &e) || e.Stage != engine.StageTransport || m.CanFetchDirect() {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("a failure passes its ids on", func(t *testing.T) {
		a := &fakeSource{key: "k", fl: &flaky{n: 1, err: errAuth}}
		b := &fakeSource{key: "k", have: map[string]string{"h:c": "C"}}
		res, err := Multi("k", a, b).FetchChunks(t.Context(), ids)
		if err != nil || len(res.Found) != 1 || len(res.Missing) != 2 || fmt.Sprint(b.asked) != "[[h:a h:b h:c]]" {
			t.Fatalf("%+v %v, b asked %v", res, err, b.asked)
		}
	})
	t.Run("nothing found and a failure: the failure", func(t *testing.T) {
		a := &fakeSource{key: "k", fl: &flaky{n: 1, err: errAuth}}
		b := &fakeSource{key: "k"}
		if _, err := Multi("k", a, b).FetchChunks(t.Context(), ids); !errors.Is(err, errAuth) {
			t.Fatalf("err %v, want the first failure", err)
		}
	})
	if got := Multi("", &fakeSource{key: "first"}).ThrottleKey(); got != "first" {
		t.Errorf("key %q", got)
	}
}
