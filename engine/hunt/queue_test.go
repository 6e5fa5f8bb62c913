package hunt

import (
	"testing"
	"time"
)

// Seed: "| 1 | 20s | … | 2 | 40s | … | 3 | 80s | … | 4+ | 120s (capped)".
func TestBackoffTable(t *testing.T) {
	cfg := Config{}.withDefaults()
	want := []time.Duration{20 * time.Second, 40 * time.Second, 80 * time.Second, 120 * time.Second, 120 * time.Second, 120 * time.Second}
	for i, w := range want {
		if got := cfg.backoff(i + 1); got != w {
			t.Errorf("attempt %d: %v, want %v", i+1, got, w)
		}
	}
	if got := cfg.backoff(1000); got != 120*time.Second {
		t.Errorf("attempt 1000: %v", got)
	}
	e := newEntry("doc", 0)
	e.enqueue(ids("h:1"), "", 500*time.Millisecond, at(0), true)
	now := at(0)
	for i, w := range want[:4] {
		e.startPass(now)
		e.endPass(now, cfg)
		if e.attempts != i+1 || e.next.Sub(now) != w {
			t.Errorf("pass %d: attempts %d, next in %v, want %v", i+1, e.attempts, e.next.Sub(now), w)
		}
		now = e.next
	}
}

// Seed: "t=210s: State B arrives (same identifier) → attempt_count=0 ✨
// t=210s: Immediate retry (new event delay)".
func TestFreshStart(t *testing.T) {
	cfg := Config{}.withDefaults()
	e := newEntry("doc", 0)
	e.enqueue(ids("h:1"), "", 3*time.Minute, at(0), true)
	e.startPass(at(180 * time.Second))
	e.endPass(at(180*time.Second), cfg) // next 200 s
	e.startPass(at(200 * time.Second))
	e.endPass(at(200*time.Second), cfg) // next 240 s
	if e.attempts != 2 {
		t.Fatalf("attempts %d", e.attempts)
	}
	e.enqueue(ids("h:1", "h:2"), "couch:5984", 0, at(210*time.Second), false)
	if e.attempts != 0 || !e.next.Equal(at(210*time.Second)) || e.origin != "couch:5984" || len(e.needed) != 2 {
		t.Errorf("after the new revision: attempts %d, next %v, origin %q, needed %v", e.attempts, e.next.Sub(t0), e.origin, e.order)
	}
	// During a pass the new revision resets the count and bounds the
	// next pass by its delay.
	e.startPass(at(210 * time.Second))
	e.enqueue(ids("h:2"), "", 500*time.Millisecond, at(215*time.Second), false)
	e.endPass(at(220*time.Second), cfg)
	if e.attempts != 1 || !e.next.Equal(at(220*time.Second)) {
		t.Errorf("enqueue during a pass: attempts %d, next %v (want 1, 220 s)", e.attempts, e.next.Sub(t0))
	}
}

// Seed: "If identifier already queued → reset attempt_count, update
// next_attempt if sooner".
func TestNotDelayedIfAlreadySooner(t *testing.T) {
	e := newEntry("doc", 0)
	e.enqueue(ids("h:1"), "", 500*time.Millisecond, at(0), true)
	e.enqueue(ids("h:1"), "", 3*time.Minute, at(100*time.Millisecond), false)
	if !e.next.Equal(at(500 * time.Millisecond)) {
		t.Errorf("a later delay moved the attempt to %v", e.next.Sub(t0))
	}
	e.enqueue(ids("h:1"), "", 100*time.Millisecond, at(200*time.Millisecond), false)
	if !e.next.Equal(at(300 * time.Millisecond)) {
		t.Errorf("a sooner delay did not move the attempt: %v", e.next.Sub(t0))
	}
}

// Seed: "Find ready identifiers (where !in_progress && next_attempt <= now)".
func TestReadyNeedsBothConditions(t *testing.T) {
	e := newEntry("doc", 0)
	e.enqueue(ids("h:1"), "", time.Second, at(0), true)
	if e.ready(at(999 * time.Millisecond)) {
		t.Error("ready before next_attempt")
	}
	if !e.ready(at(time.Second)) {
		t.Error("not ready at next_attempt")
	}
	e.startPass(at(time.Second))
	if e.ready(at(time.Hour)) {
		t.Error("ready while in progress")
	}
	e.endPass(at(2*time.Second), Config{}.withDefaults())
	if e.ready(at(21*time.Second)) || !e.ready(at(22*time.Second)) {
		t.Error("after a pass: ready only at next_attempt (22 s)")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	for _, c := range []Config{{MaxInFlight: -1}, {Window: -time.Second}, {BatchSize: 101},
		{BackoffBase: time.Minute, BackoffCap: time.Second}, {MemoTTL: -1}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if _, err := New(Config{BatchSize: 500}, Deps{}); err == nil {
		t.Error("New accepted an invalid config")
	}
}

func TestMemo(t *testing.T) {
	m := newMemo(2, 30*time.Minute)
	m.add("a", "seq-1", ids("h:1"), at(0))
	if !m.lacks("a", "seq-1", "h:1", at(time.Minute)) || m.lacks("a", "seq-1", "h:2", at(time.Minute)) {
		t.Error("memo lookup")
	}
	if m.lacks("a", "seq-2", "h:1", at(time.Minute)) {
		t.Error("memo survived a fingerprint change")
	}
	if m.lacks("a", "seq-1", "h:1", at(2*time.Minute)) {
		t.Error("fingerprint change did not clear the memo")
	}
	m.add("a", "seq-1", ids("h:1"), at(0))
	if m.lacks("a", "seq-1", "h:1", at(30*time.Minute)) {
		t.Error("memo not expired after 30 min")
	}
	m.add("a", "x", ids("h:1"), at(time.Minute))
	m.add("b", "x", ids("h:1"), at(2*time.Minute))
	m.add("c", "x", ids("h:1"), at(3*time.Minute)) // evicts a, the oldest
	if m.len() != 2 || m.lacks("a", "x", "h:1", at(4*time.Minute)) || !m.lacks("b", "x", "h:1", at(4*time.Minute)) {
		t.Errorf("cap: len %d", m.len())
	}
}
