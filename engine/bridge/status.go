package bridge

import (
	"context"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/engine"
)

// UpstreamStatus is one upstream in a status snapshot (the relay's
// /status). Nothing in it is secret:
// locations carry no credentials and error texts no passwords.
type UpstreamStatus struct {
	Name         string `json:"name"`
	Kind         string `json:"kind"`
	Mode         string `json:"mode"`
	Location     string `json:"location"`
	ChunksOnline bool   `json:"chunks_online"`
	DirectFetch  bool   `json:"direct_fetch"`
	// State is connecting, catching-up, live, backoff, error or stopped.
	State string `json:"state"`
	// Boundary says how documents cross: forward (same salt),
	// re-encrypt (another salt) or encode (a journal's plaintext packs);
	// empty before the first handshake.
	Boundary string `json:"boundary"`
	// LastSeq is the upstream's last sequence pulled (a journal: the last
	// pack received); PushSeq the relay's last sequence pushed (a
	// journal: the last pack sent).
	LastSeq string `json:"last_seq"`
	PushSeq string `json:"push_seq"`
	// LagPush is the number of the relay database's documents the
	// upstream does not have yet: the relay's changes after the push
	// position, counted in the relay's feed at the time of the request
	// (a bucket: the changes pending after its last pass). LagPull is
	// the upstream's changes after the pull position, from its pending
	// count or its update_seq (an upper bound), refreshed after every
	// batch and identity check (a bucket: packs not received yet). 0 for
	// a direction the mode does not replicate; -1 while unknown.
	LagPush int `json:"lag_push"`
	LagPull int `json:"lag_pull"`
	// Lag is LagPush + LagPull (-1 while both are unknown): never 0
	// while either side is behind.
	Lag int `json:"lag"`
	// Resets counts the resets of the upstream the relay noticed (its
	// database recreated, restored or wiped);
	// each restarts replication from zero in both directions.
	Resets          uint64     `json:"resets"`
	LastReset       *time.Time `json:"last_reset"`
	LastResetReason string     `json:"last_reset_reason,omitempty"`
	DocsPulled      uint64     `json:"docs_pulled"`
	DocsPushed      uint64     `json:"docs_pushed"`
	Errors          uint64     `json:"errors"`
	LastError       string     `json:"last_error"`
	LastErrorAt     *time.Time `json:"last_error_at"`
	LastSuccess     *time.Time `json:"last_success"`
	// Hunt is the upstream's throttle key in the database's hunt.
	Hunt SourceStatus `json:"hunt"`
}

// SourceStatus is one throttle key of a database's hunt.
type SourceStatus struct {
	ThrottleKey string `json:"throttle_key"`
	CanFetch    bool   `json:"can_fetch"`
	Requests    uint64 `json:"requests"`
	Found       uint64 `json:"found"`
	Missing     uint64 `json:"missing"`
	Failed      uint64 `json:"failed"`
	Canceled    uint64 `json:"canceled"`
	Chunks      uint64 `json:"chunks"`
	InFlight    int    `json:"in_flight"`
	InWindow    int    `json:"in_window"`
	Queued      int    `json:"queued"`
	// MaxInFlight and MaxInWindow are the most requests the relay saw on
	// the wire at once and starting within one rate window, since it
	// started: the proof that the per-source limits held.
	MaxInFlight    int     `json:"max_in_flight"`
	MaxInWindow    int     `json:"max_in_window"`
	MaxWaitSeconds float64 `json:"max_wait_seconds"`
}

// HuntStatus is a database's hunt in /status.
type HuntStatus struct {
	Documents int    `json:"documents"`
	Hunting   int    `json:"hunting"`
	Waiting   int    `json:"waiting"`
	InFlight  int    `json:"in_flight"`
	Completed uint64 `json:"completed"`
	Removed   uint64 `json:"removed"`
	Hedges    uint64 `json:"hedges"`
	MemoHits  uint64 `json:"memo_hits"`
	// Limits are the per-source limits every throttle key obeys.
	Limits HuntLimits `json:"limits"`
}

type HuntLimits struct {
	MaxInFlight   int     `json:"max_in_flight"`
	MaxPerWindow  int     `json:"max_per_window"`
	WindowSeconds float64 `json:"window_seconds"`
}

// Snapshot returns the bridge's upstreams and hunt for /status and the
// metrics.
func (b *Bridge) Snapshot() ([]UpstreamStatus, HuntStatus) {
	hs := b.hunt.Stats()
	sources := map[string]SourceStatus{}
	for _, ks := range b.keys {
		st := hs.Sources[ks.key]
		ms := ks.meter.Stats()
		sources[ks.key] = SourceStatus{
			ThrottleKey: ks.key, CanFetch: ks.src.CanFetchDirect(),
			Requests: st.Requests, Found: st.Found, Missing: st.Missing, Failed: st.Failed, Canceled: st.Canceled, Chunks: st.Chunks,
			InFlight: st.InFlight, InWindow: st.InWindow, Queued: st.Queued,
			MaxInFlight: ms.MaxInFlight, MaxInWindow: ms.MaxInWindow, MaxWaitSeconds: st.MaxWait.Seconds(),
		}
	}
	ups := make([]UpstreamStatus, 0, len(b.ups))
	for _, u := range b.ups {
		ups = append(ups, u.status(sources[u.spec.ThrottleKey], u.pushLag(b.ctx)))
	}
	return ups, HuntStatus{
		Documents: hs.Docs, Hunting: hs.Hunting, Waiting: hs.Waiting, InFlight: hs.InFlight,
		Completed: hs.Completed, Removed: hs.Removed, Hedges: hs.Hedges, MemoHits: hs.MemoHits,
		Limits: HuntLimits{MaxInFlight: b.huntCfg.MaxInFlight, MaxPerWindow: b.huntCfg.MaxPerWindow, WindowSeconds: b.huntCfg.Window.Seconds()},
	}
}

func (u *upstream) status(src SourceStatus, pushLag int) UpstreamStatus {
	u.mu.Lock()
	defer u.mu.Unlock()
	pullLag := u.pullPending
	switch u.spec.Mode {
	case ModePull:
		pushLag = 0
	case ModePush:
		pullLag = 0
	case ModeSource:
		pushLag, pullLag = 0, 0
	}
	s := UpstreamStatus{
		Name: u.spec.Name, Kind: u.spec.Kind, Mode: u.spec.Mode, Location: u.spec.Location,
		ChunksOnline: u.spec.ChunksOnline, DirectFetch: u.spec.DirectFetch,
		State: u.state, Boundary: u.boundary, LastSeq: u.pullSeq, PushSeq: u.pushSeq,
		LagPush: pushLag, LagPull: pullLag, Lag: lag(pullLag, pushLag),
		Resets: u.resets, LastReset: timePtr(u.lastReset), LastResetReason: u.lastResetReason,
		DocsPulled: u.pulled, DocsPushed: u.pushed,
		Errors: u.errs, LastError: u.lastErr, LastErrorAt: timePtr(u.lastErrAt), LastSuccess: timePtr(u.lastOK),
		Hunt: src,
	}
	return s
}

// lagCache keeps the last push lag counted, for as long as neither the
// push position nor the relay database's update_seq moved.
type lagCache struct {
	pushSeq, relaySeq string
	n                 int
	ok                bool
}

// pushLag counts the relay database's documents after the push position
// (the changes feed lists each document once): what the upstream does
// not have yet. For a bucket the position is the journal's send position
// (journalsync.Journal.SentThrough), so documents pulled from elsewhere
// count until the next pass has sent or skipped them.
func (u *upstream) pushLag(ctx context.Context) int {
	u.mu.Lock()
	seq, pending, c := u.pushSeq, u.pushPending, u.lagCache
	u.mu.Unlock()
	if u.spec.Mode == ModePull || u.spec.Mode == ModeSource {
		return pending
	}
	if u.couch == nil {
		// A bucket: the relay's changes after the journal's send
		// position (its checkpoint's lastLocalSeq), not the pack key.
		j := u.journal.Load()
		if j == nil {
			return pending
		}
		if seq = j.SentThrough(); seq == "" && pending < 0 {
			return -1
		}
	}
	info, err := u.b.v.Info(ctx)
	if err != nil {
		return -1
	}
	if c.ok && c.pushSeq == seq && c.relaySeq == info.UpdateSeq {
		return c.n
	}
	page, err := u.b.v.Changes(ctx, engine.ChangesRequest{Since: seq})
	if err != nil {
		return -1
	}
	n := len(page.Results)
	u.mu.Lock()
	if u.pushSeq == seq {
		u.lagCache = lagCache{pushSeq: seq, relaySeq: info.UpdateSeq, n: n, ok: true}
	}
	u.mu.Unlock()
	return n
}

// refreshPullLag sets the pull lag from the upstream's update_seq (an
// upper bound) for a server whose changes feed answers no pending
// (express-pouchdb).
func (u *upstream) refreshPullLag(updateSeq string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.upSeq = updateSeq
	if u.pullExact || u.spec.Mode == ModePush || u.state != StateLive && u.state != StateCatchingUp {
		return // a server that answers pending: the batches' count is exact
	}
	if n := seqLag(u.pullSeq, updateSeq); n >= 0 {
		u.pullPending = n
	}
}

// Up reports whether the i-th upstream (in configuration order) works
// now: live or catching up (for the up metric).
func (b *Bridge) Up(i int) bool {
	u := b.ups[i]
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.state == StateLive || u.state == StateCatchingUp
}

// lag adds the known pending counts; -1 when neither is known.
func lag(pull, push int) int {
	if pull < 0 && push < 0 {
		return -1
	}
	return max(pull, 0) + max(push, 0)
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC().Truncate(time.Millisecond)
	return &u
}

// SourceName names the hunt source with throttle key key for /status and
// the metrics: its upstreams' names, joined by "+" when several share it.
func (b *Bridge) SourceName(key string) string {
	for _, ks := range b.keys {
		if ks.key == key {
			names := make([]string, len(ks.members))
			for i, u := range ks.members {
				names[i] = u.spec.Name
			}
			return strings.Join(names, "+")
		}
	}
	return key
}
