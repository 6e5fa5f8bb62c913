package bridge

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// upstream is one configured upstream of a database: its runner's state
// and its chunk source. It is itself an engine.ChunkSource (of
// RawChunk envelopes), which cannot fetch until its handshake installed
// a session's source.
type upstream struct {
	b    *Bridge
	spec Upstream
	log  *slog.Logger

	couch   engine.Endpoint     // a CouchDB upstream's endpoint; nil for a bucket
	objects journalsync.Objects // a bucket's objects; nil for CouchDB
	port    negotiate.Port      // where the sync parameters and the milestone live

	chunks atomic.Pointer[upstreamSource] // nil until the handshake
	// journal is a bucket's open journal (nil before its handshake and
	// for CouchDB): its send position gives the push lag.
	journal atomic.Pointer[journalsync.Journal]

	sessMu     sync.Mutex
	sessCancel context.CancelFunc // ends the current session
	sessGen    uint64             // the bridge's gen when it started

	// settingsBase is the upstream's vault settings after its last
	// reconciliation (nil: not yet); guarded by the bridge's settingsMu.
	settingsBase *negotiate.VaultSettings

	mu          sync.Mutex
	state       string
	boundary    string
	lastErr     string
	lastErrAt   time.Time
	lastOK      time.Time
	errs        uint64
	pullSeq     string
	pushSeq     string
	pullPending int
	pushPending int
	pulled      uint64 // documents written to the database
	pushed      uint64 // documents written to the upstream
	lastPulled  int    // the current run's last progress counts
	lastPushed  int

	// Resets of the upstream seen, the last one's time and reason; upSeq
	// is its update_seq at the last identity check.
	resets          uint64
	lastReset       time.Time
	lastResetReason string
	upSeq           string
	pullExact       bool // the upstream's feed answers pending
	lagCache        lagCache
	epoch           string // a bucket's journal epoch when its session opened
}

// upstreamSource is the chunk source of one connected upstream.
type upstreamSource struct {
	fetch  func(ctx context.Context, ids []engine.ChunkID) ([]RawChunk, []engine.ChunkID, error)
	direct bool
}

var _ engine.ChunkSource = (*upstream)(nil)

func newUpstream(b *Bridge, spec Upstream) *upstream {
	u := &upstream{b: b, spec: spec, state: StateConnecting, pullPending: -1, pushPending: -1,
		log: b.log.With("upstream", spec.Name)}
	if r := spec.Remote; r != nil {
		u.couch, u.objects, u.port = r.Endpoint(), r.Objects(), r.Negotiate()
	}
	return u
}

// CanFetchDirect reports whether the upstream fetches by id now (always
// for a connected CouchDB upstream; DirectFetch for a bucket).
func (u *upstream) CanFetchDirect() bool {
	s := u.chunks.Load()
	return s != nil && s.direct
}

// ThrottleKey is the upstream's throttle key.
func (u *upstream) ThrottleKey() string { return u.spec.ThrottleKey }

// FetchChunks fetches ids as RawChunk envelopes and notes the outcome in
// the upstream's status.
func (u *upstream) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	s := u.chunks.Load()
	if s == nil {
		return engine.FetchResult{}, &engine.Error{Op: "fetch chunks", Stage: engine.StageTransport, Err: errNotConnected}
	}
	found, missing, err := s.fetch(ctx, ids)
	switch {
	case err != nil && ctx.Err() == nil:
		u.fetchFailed(err)
	case err == nil:
		u.fetchOK()
	}
	if err != nil {
		return engine.FetchResult{}, err
	}
	res := engine.FetchResult{Missing: missing, Found: make([]engine.Chunk, len(found))}
	for i, c := range found {
		res.Found[i] = c.envelope()
	}
	return res, nil
}

// errNotConnected is a hunt request to an upstream that has not finished
// its handshake: a transport failure (retried in the next pass).
var errNotConnected = errors.New("the upstream is not connected yet")

// run connects and replicates until ctx ends: one session after the
// other, with a delay after a failure. A change of the database's salt
// ends the session at once (Bridge.ParamsChanged) and the next one
// handshakes again.
func (u *upstream) run(ctx context.Context) {
	defer u.setState(StateStopped)
	delay := MinRetry
	for ctx.Err() == nil {
		sctx, cancel := context.WithCancel(ctx)
		u.sessMu.Lock()
		u.sessCancel, u.sessGen = cancel, u.b.gen.Load()
		gen := u.sessGen
		u.sessMu.Unlock()
		var err error
		if u.couch != nil {
			err = u.couchSession(sctx, gen, &delay)
		} else {
			err = u.bucketSession(sctx, gen, &delay)
		}
		ended := sctx.Err() != nil
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case ended || errors.Is(err, errSaltChanged):
			u.log.Info("the database's vault salt changed: connecting again")
			continue
		case errors.Is(err, errUpstreamReset):
			u.log.Warn("the upstream was reset: connecting again", "err", err)
			u.setState(StateConnecting)
			continue
		}
		u.failed(err)
		if !backoff(ctx, &delay) {
			return
		}
	}
}

// errSaltChanged ends a session whose handshake saw the database's salt
// change.
var errSaltChanged = errors.New("the relay database's vault salt changed")

// backoff waits after a failure: d, doubled for the next time up to
// MaxRetry, whether the failure is transient or permanent (that sets the
// state, not the delay). It returns false when ctx ended.
func backoff(ctx context.Context, d *time.Duration) bool {
	wait := *d
	*d = min(2**d, MaxRetry)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// permanent reports failures that retrying will not fix by itself: the
// ones marked engine.Permanent, authentication, decryption and protocol
// failures, and the bridge's refusals (another salt without the
// passphrase, an encrypted vault declared plain, disagreeing settings).
func permanent(err error) bool {
	if engine.IsPermanent(err) {
		return true
	}
	var ee *engine.Error
	if errors.As(err, &ee) {
		switch ee.Stage {
		case engine.StageTransport:
			return false
		case engine.StageAuth, engine.StageDecrypt, engine.StageProtocol:
			return true
		}
	}
	return errors.Is(err, errSaltDiffers) || errors.Is(err, engine.ErrDecrypt) || errors.Is(err, ErrPlainVault) ||
		errors.Is(err, errSettingsDiffer)
}

func (u *upstream) explain(err error) string {
	if u.spec.Explain != nil {
		return u.spec.Explain(err)
	}
	return err.Error()
}

func (u *upstream) setState(s string) {
	u.mu.Lock()
	u.state = s
	u.mu.Unlock()
}

func (u *upstream) setBoundary(b string) {
	u.mu.Lock()
	u.boundary = b
	u.mu.Unlock()
}

// failed records a failure of the runner.
func (u *upstream) failed(err error) {
	msg := u.explain(err)
	st := StateBackoff
	if permanent(err) {
		st = StateError
	}
	u.mu.Lock()
	u.state, u.lastErr, u.lastErrAt = st, msg, time.Now()
	u.errs++
	u.mu.Unlock()
	u.log.Warn("upstream failed; retrying", "state", st, "err", msg)
}

// succeeded records a successful step.
func (u *upstream) succeeded(state string) {
	u.mu.Lock()
	u.state, u.lastOK = state, time.Now()
	u.mu.Unlock()
}

// fetchFailed records a failed hunt request (it sets the state of a
// source-only upstream, whose requests are all it does).
func (u *upstream) fetchFailed(err error) {
	msg := "fetching chunks: " + u.explain(err)
	u.mu.Lock()
	u.lastErr, u.lastErrAt = msg, time.Now()
	u.errs++
	if u.spec.Mode == ModeSource {
		u.state = StateBackoff
		if permanent(err) {
			u.state = StateError
		}
	}
	u.mu.Unlock()
}

func (u *upstream) fetchOK() {
	u.mu.Lock()
	u.lastOK = time.Now()
	if u.spec.Mode == ModeSource {
		u.state = StateLive
	}
	u.mu.Unlock()
}

// endSession ends the upstream's current session; its runner connects
// again at once.
func (u *upstream) endSession() {
	u.sessMu.Lock()
	if u.sessCancel != nil {
		u.sessCancel()
	}
	u.sessMu.Unlock()
}

// countDelta turns a run's running total into an increment (a smaller
// total starts a new run).
func countDelta(last *int, total int) int {
	d := total - *last
	if d < 0 {
		d = total
	}
	*last = total
	return d
}
