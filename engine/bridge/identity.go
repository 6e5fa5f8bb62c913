package bridge

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// IdentityCheckInterval is how often a live CouchDB upstream's marker and
// update_seq are reread (one GET of a _local document and one of the
// database's info).
var IdentityCheckInterval = 5 * time.Second

// errUpstreamReset ends a session whose upstream was reset; the next
// session starts at once and replicates everything again.
var errUpstreamReset = errors.New("the upstream was reset")

// errUpstreamRekeyed: the upstream holds another salt than the one the
// relay bridged it with.
var errUpstreamRekeyed = errors.New("the upstream's vault salt changed")

// upstreamMemory is what the relay remembers of an upstream, in its own
// database (_local/<memoryID>).
type upstreamMemory struct {
	// Marker is the random id last written to the upstream.
	Marker string `json:"marker"`
	// UpdateSeq is the upstream's highest update_seq seen.
	UpdateSeq string `json:"update_seq"`
	// Salt is the fingerprint (saltFingerprint) of the upstream's salt
	// when last connected, "" when it had none.
	Salt string `json:"salt_fingerprint"`
}

// markerID is the _local id of this relay database's marker on an
// upstream: one per relay and database, so that two relays (or two
// databases of one relay) bridging the same upstream keep their own.
func (u *upstream) markerID() string {
	return "livesync-relay-identity-" + shortHash(u.b.uuid+"/"+u.b.db)
}

// memoryID is the _local id, in the relay's database, of what it
// remembers of the upstream.
func (u *upstream) memoryID() string {
	return "livesync-relay-upstream-" + shortHash(u.spec.Location)
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

// saltFingerprint names a salt in messages and /status without
// repeating it: the first 8 hex digits of its SHA-256, "none" for none.
func saltFingerprint(salt []byte) string {
	if salt == nil {
		return "none"
	}
	h := sha256.Sum256(salt)
	return hex.EncodeToString(h[:4])
}

// loadMemory reads what the relay remembers of the upstream (zero when
// nothing yet).
func (u *upstream) loadMemory(ctx context.Context) (upstreamMemory, error) {
	var m upstreamMemory
	raw, err := store.LiveLocal(ctx, u.b.v, u.memoryID())
	if raw == nil || err != nil {
		return m, err
	}
	_ = json.Unmarshal(raw, &m) // unreadable: as if nothing were remembered
	return m, nil
}

// saveMemory writes what the relay remembers of the upstream.
func (u *upstream) saveMemory(ctx context.Context, m upstreamMemory) error {
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return u.b.v.PutLocal(ctx, u.memoryID(), raw)
}

// couchIdentity is what a CouchDB upstream shows of itself.
type couchIdentity struct {
	marker    string // "" when absent
	updateSeq string
	salt      []byte // nil when absent
}

// readCouchIdentity reads the upstream's update_seq, the relay's marker
// and the salt. engine.ErrNotFound: the database does not exist.
func (u *upstream) readCouchIdentity(ctx context.Context, withSalt bool) (couchIdentity, error) {
	var id couchIdentity
	info, err := u.couch.Info(ctx)
	if err != nil {
		return id, err
	}
	id.updateSeq = info.UpdateSeq
	raw, err := u.couch.GetLocal(ctx, u.markerID())
	switch {
	case err == nil:
		var m struct {
			Marker string `json:"marker"`
		}
		_ = json.Unmarshal(raw, &m)
		id.marker = m.Marker
	case !errors.Is(err, engine.ErrNotFound):
		return id, err
	}
	if withSalt {
		if _, id.salt, err = upstreamSalt(ctx, u.couch); err != nil {
			return id, err
		}
	}
	return id, nil
}

// resetReason says why id shows a reset of the upstream remembered as
// mem, "" when it does not.
func resetReason(mem upstreamMemory, id couchIdentity) string {
	if mem.Marker == "" {
		return "" // first contact
	}
	if id.marker != mem.Marker {
		return "the relay's marker is gone (the database was recreated)"
	}
	if seqBefore(id.updateSeq, mem.UpdateSeq) {
		return fmt.Sprintf("its update_seq went back from %s to %s (the database was restored or rebuilt)", seqHead(mem.UpdateSeq), seqHead(id.updateSeq))
	}
	return ""
}

// rekeyed returns the refusal for an upstream whose salt is not the one
// remembered, nil when it is (or nothing is remembered, or it has none:
// the handshake gives it the vault's).
func (u *upstream) rekeyed(mem upstreamMemory, salt []byte) error {
	if mem.Salt == "" || mem.Salt == "none" || salt == nil || saltFingerprint(salt) == mem.Salt {
		return nil
	}
	_, relaySalt, _ := u.b.relaySalt(context.Background())
	return &engine.Error{Op: "check vault salt", DocID: u.spec.Location, Stage: engine.StageProtocol,
		Err: fmt.Errorf("%w: upstream %q now holds salt %s, it held %s when the relay last bridged it, and the relay database %q holds %s; "+
			"a client set the vault up again there. The relay writes nothing to it: to bridge it again, delete its database "+
			"(the relay recreates nothing, so create it empty; the relay then gives it the vault's salt and every document), "+
			"or set up the relay database again with the new salt",
			errUpstreamRekeyed, u.spec.Name, saltFingerprint(salt), mem.Salt, u.b.db, saltFingerprint(relaySalt))}
}

// seqHead is the numeric head of a sequence: the whole of an integer
// sequence (PouchDB, the relay), the part before "-" of a CouchDB 2+ one.
func seqHead(seq string) string {
	h, _, _ := strings.Cut(seq, "-")
	return h
}

// seqNumber parses seqHead; false when it is not a number.
func seqNumber(seq string) (uint64, bool) {
	n, err := strconv.ParseUint(seqHead(seq), 10, 64)
	return n, err == nil
}

// seqBefore reports whether a is a lower sequence than b, when both are
// plain integers (PouchDB, the relay: strictly increasing). CouchDB 2+
// sequences ("N-opaque") are left out: on a cluster N is a sum over shard
// copies and may come out lower from another node, which would be
// taken for a reset again and again; the marker tells those resets.
func seqBefore(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}

// seqLag is b-a in sequence numbers (an upper bound of the documents
// changed between them), -1 when either is not numeric.
func seqLag(a, b string) int {
	if a == "" {
		a = "0"
	}
	x, ok1 := seqNumber(a)
	y, ok2 := seqNumber(b)
	if !ok1 || !ok2 {
		return -1
	}
	if y <= x {
		return 0
	}
	return int(min(y-x, 1<<31-1))
}

// couchIdentityStep runs before the handshake of a CouchDB upstream: it
// reads the upstream's identity and refuses a re-keyed one before
// anything is written. The returned reason is not "" when the upstream
// was reset. A missing database is left to the handshake, which says so
// (and counts as a reset if it exists again by then).
func (u *upstream) couchIdentityStep(ctx context.Context) (upstreamMemory, couchIdentity, string, error) {
	mem, err := u.loadMemory(ctx)
	if err != nil {
		return mem, couchIdentity{}, "", err
	}
	id, err := u.readCouchIdentity(ctx, true)
	if errors.Is(err, engine.ErrNotFound) {
		// The handshake says the database is missing. If it is created
		// before the handshake reads it, it is a new database: a reset
		// when the relay had bridged one there.
		if mem.Marker != "" {
			return mem, id, "the database was deleted (and created again)", nil
		}
		return mem, id, "", nil
	}
	if err != nil {
		return mem, id, "", err
	}
	if err := u.rekeyed(mem, id.salt); err != nil {
		return mem, id, "", err
	}
	return mem, id, resetReason(mem, id), nil
}

// settleCouchIdentity runs after the handshake: it writes a new marker
// when the upstream has none of this relay's or was reset, remembers the
// marker, update_seq and salt, and returns the replication id of the
// upstream (its location and marker).
func (u *upstream) settleCouchIdentity(ctx context.Context, mem upstreamMemory, id couchIdentity, reason string) (string, error) {
	marker := id.marker
	if marker == "" || reason != "" {
		marker = rand.Text()
		raw, _ := json.Marshal(map[string]string{"marker": marker, "relay": u.b.uuid, "database": u.b.db})
		if err := u.couch.PutLocal(ctx, u.markerID(), raw); err != nil {
			return "", fmt.Errorf("writing the relay's marker on the upstream: %w", err)
		}
	}
	_, salt, err := upstreamSalt(ctx, u.couch)
	if err != nil {
		return "", err
	}
	seq := id.updateSeq
	if reason != "" || !seqBefore(seq, mem.UpdateSeq) {
		mem.UpdateSeq = seq
	}
	mem.Marker, mem.Salt = marker, saltFingerprint(salt)
	if err := u.saveMemory(ctx, mem); err != nil {
		return "", err
	}
	if reason != "" {
		u.noteReset(reason)
	}
	u.mu.Lock()
	u.upSeq = seq
	if u.spec.Mode != ModePush {
		u.pullPending = seqLag(u.pullSeq, seq) // an upper bound until the first batch
	}
	u.mu.Unlock()
	return u.spec.Location + "#" + marker, nil
}

// noteReset records a reset in the status: both directions start again.
func (u *upstream) noteReset(reason string) {
	u.log.Warn("the upstream was reset: replicating everything again in both directions", "reason", reason)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.resets++
	u.lastReset, u.lastResetReason = time.Now(), reason
	u.pullSeq, u.pushSeq = "", ""
	u.pullPending, u.pushPending = -1, -1
}

// identityGate guards a CouchDB upstream's session: every
// IdentityCheckInterval, and before the first request after a failed one
// (the replicator reconnecting: the upstream may have come back empty
// within its backoff delay), it rereads the marker, update_seq and salt,
// and ends the session with errUpstreamReset (or the re-key refusal)
// before anything more is read from or written to the upstream.
type identityGate struct {
	u       *upstream
	end     context.CancelCauseFunc
	suspect atomic.Bool
	ended   atomic.Bool // the session is over: nothing more goes out

	mu  sync.Mutex // one check at a time; guards mem
	mem upstreamMemory
}

// before runs the check when a request failed since the last one.
func (g *identityGate) before(ctx context.Context) error {
	if g.ended.Load() {
		return errUpstreamReset
	}
	if !g.suspect.Load() {
		return nil
	}
	return g.check(ctx)
}

// after notes a failed request: the next one checks first.
func (g *identityGate) after(err error) {
	if err != nil && (replicate.IsTransport(err) || errors.Is(err, engine.ErrNotFound)) {
		g.suspect.Store(true)
	}
}

// check rereads the identity. A transport failure is returned and the
// gate stays suspect; a reset or re-key ends the session.
func (g *identityGate) check(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	u := g.u
	id, err := u.readCouchIdentity(ctx, true)
	if errors.Is(err, engine.ErrNotFound) {
		err = fmt.Errorf("%w: its database %q is gone", errUpstreamReset, u.spec.Database)
		g.stop(err)
		return err
	}
	if err != nil {
		g.suspect.Store(true)
		return err
	}
	if reason := resetReason(g.mem, id); reason != "" {
		err = fmt.Errorf("%w: %s", errUpstreamReset, reason)
		g.stop(err)
		return err
	}
	if err := u.rekeyed(g.mem, id.salt); err != nil {
		g.stop(err)
		return err
	}
	g.suspect.Store(false)
	u.refreshPullLag(id.updateSeq)
	if id.updateSeq != g.mem.UpdateSeq && !seqBefore(id.updateSeq, g.mem.UpdateSeq) {
		g.mem.UpdateSeq = id.updateSeq
		if err := u.saveMemory(ctx, g.mem); err != nil && ctx.Err() == nil {
			u.log.Warn("remembering the upstream's update_seq failed", "err", err)
		}
	}
	return nil
}

// stop ends the session with err; later requests are refused.
func (g *identityGate) stop(err error) {
	g.ended.Store(true)
	g.end(err)
}

// watch runs check every IdentityCheckInterval until ctx ends.
func (g *identityGate) watch(ctx context.Context) {
	t := time.NewTicker(IdentityCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_ = g.check(ctx)
		if ctx.Err() != nil {
			return
		}
	}
}

// checkBucketEpoch rereads a bucket's sync parameters before every pass:
// a new journal epoch (its salt object rewritten, as after a wipe) ends
// the session with errUpstreamReset, and the next one opens the journal
// with the new epoch, which tells a wipe (the last pack the relay sent
// is gone: everything is sent again, ResendAfterWipe) from a re-key that
// kept the packs. A bucket emptied of everything gets a new salt here,
// as any first client would give it.
func (u *upstream) checkBucketEpoch(ctx context.Context) error {
	params, err := negotiate.EnsureSyncParameters(ctx, u.port, false)
	if err != nil {
		return err
	}
	u.mu.Lock()
	old := u.epoch
	u.mu.Unlock()
	if e := negotiate.JournalEpoch(params); e != old {
		return fmt.Errorf("%w: the bucket's journal epoch changed", errUpstreamReset)
	}
	return nil
}
