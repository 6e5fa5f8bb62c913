package negotiate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/livesync-go/livesync-go/engine"
)

// HandshakeOptions configure Handshake.
type HandshakeOptions struct {
	// NodeID is this device's node id (NodeInfoDoc's nodeid). Required.
	NodeID string
	// Range is the chunk-format range this client announces in the
	// milestone (CouchDBChunkRange, JournalChunkRange). Required.
	Range ChunkRange
	// Device describes this device in the milestone's node_info. An empty
	// Progress is filled with Port.Progress.
	Device DeviceInfo
	// Settings are this device's tweak values (livesync.Settings.TweakValues).
	Settings TweakValues
	// AllowJoin lets this node add itself to a locked remote's
	// accepted_nodes (upstream's markRemoteResolved): set it only after
	// the user has chosen to fetch the rebuilt remote.
	AllowJoin bool
	// CreateIfMissing creates the database when it does not exist;
	// otherwise a missing database is an error wrapping ErrNoDatabase.
	// With ReadOnly, a missing database is then reported as a new one
	// (HandshakeResult.Exists false) instead of an error.
	CreateIfMissing bool
	// ReadOnly writes nothing: no database, salt, version document or
	// milestone entry. A remote without a salt gives a nil Salt. The
	// verdict is the one this node would get if it registered now, and
	// the lock verdicts (VerdictNodeLocked, VerdictNodeCleaned) are not
	// errors: the lock guards against merging stale local data into the
	// remote, not against reading it. Use it for commands that only read,
	// and to prove the passphrase before a writing handshake.
	ReadOnly bool
	// Check relaxes the milestone checks (upstream's ignoreVersionCheck,
	// disableCheckingConfigMismatch).
	Check CheckOptions
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// HandshakeResult is what Handshake learnt from the remote.
type HandshakeResult struct {
	// Exists is false when the database does not exist (ReadOnly with
	// CreateIfMissing only; otherwise it is created or an error).
	Exists bool
	// Salt is the vault's PBKDF2 salt; nil when ReadOnly found none.
	Salt []byte
	// Params is the sync-parameters document as stored (another client's
	// when it created the salt first); zero when Salt is nil.
	Params SyncParameters
	// Milestone is the milestone as read before this handshake changed
	// it; nil when the remote had none.
	Milestone *Milestone
	// Verdict is the milestone verdict, valid when the error is nil or
	// wraps a refusing verdict.
	Verdict Verdict
}

// Errors of Handshake and UpdateMilestone besides the verdicts'.
var (
	// ErrNoDatabase means the database (or bucket) does not exist. A
	// Port's Read wraps it (besides engine.ErrNotFound) when the whole
	// remote is missing, which is no proof that a record is absent. It
	// wraps engine.ErrNoDatabase, so callers that know only the engine
	// recognise it too.
	ErrNoDatabase error = noDatabase{}
	// ErrMilestoneRace means other clients kept rewriting the milestone
	// while this one tried to update it; run the handshake again.
	ErrMilestoneRace = errors.New("negotiate: other clients kept rewriting the milestone at the same time; run the handshake again")
)

// noDatabase is ErrNoDatabase: this package's message (what to do) over
// engine.ErrNoDatabase.
type noDatabase struct{}

func (noDatabase) Error() string {
	return "negotiate: the database does not exist (create it on the server, or let the client create it)"
}

func (noDatabase) Unwrap() error { return engine.ErrNoDatabase }

// MilestoneTries bounds the read-change-write rounds of UpdateMilestone
// when other clients rewrite the milestone at the same time. Every round
// that loses does so because another client won one, so n racing clients
// all finish within n rounds.
const MilestoneTries = 16

// Handshake is the LiveSync pre-sync handshake over a remote's Port
// (commonlib LiveSyncReplicator.ts checkReplicationConnectivity,
// LiveSyncJournalReplicator.ts): it returns the vault's PBKDF2 salt and
// the milestone verdict, or an error that says what to do.
//
//  0. The database: created when missing with CreateIfMissing, else
//     ErrNoDatabase.
//  1. Sync parameters (EnsureSyncParameters): a new salt only when
//     reading proves the document absent or salt-less; never after a
//     failed read.
//  2. The version document: created when missing, bumped when older, an
//     error when newer or of another type. A remote without one (a
//     journal bucket) answers not-found and ignores the write.
//  3. The milestone: registered and written back when needed through
//     UpdateMilestone (a lost race is redone from a fresh read), then
//     judged by Admit. A node that a locked remote does not accept joins
//     accepted_nodes only with AllowJoin. Refusing verdicts are returned
//     as errors wrapping ErrNodeLocked, ErrNodeCleaned, ErrIncompatible or
//     *TweakMismatchError.
//
// With ReadOnly set it reads the same documents and writes none of them.
func Handshake(ctx context.Context, p Port, o HandshakeOptions) (HandshakeResult, error) {
	var r HandshakeResult
	if o.NodeID == "" {
		return r, errors.New("negotiate: handshake: a node id is required")
	}
	if o.Range == (ChunkRange{}) {
		return r, errors.New("negotiate: handshake: a chunk range is required")
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	exists, err := p.Exists(ctx)
	if err != nil {
		return r, err
	}
	if !exists {
		switch {
		case !o.CreateIfMissing:
			return r, &engine.Error{Op: "handshake", Stage: engine.StageProtocol,
				Err: fmt.Errorf("%w: %w", ErrNoDatabase, engine.ErrNotFound)}
		case o.ReadOnly:
			m := NewMilestone(o.NodeID, now())
			m.Register(o.NodeID, o.Range, o.Device, o.Settings, now())
			r.Verdict = Check(m, o.NodeID, o.Range, o.Settings, o.Check)
			return r, verdictErr(r.Verdict, true)
		}
		if err := p.Create(ctx); err != nil {
			return r, err
		}
	}
	r.Exists = true

	params, err := EnsureSyncParameters(ctx, p, o.ReadOnly)
	if err != nil {
		return r, err
	}
	if params.PBKDF2Salt != "" {
		salt, err := params.Salt()
		if err != nil {
			return r, &engine.Error{Op: "read sync parameters", DocID: SyncParametersDocID, Stage: engine.StageDecode,
				Err: fmt.Errorf("negotiate: handshake: the remote's salt is unusable (another client wrote it wrongly; do not overwrite it without rebuilding every device): %w", err)}
		}
		r.Salt, r.Params = salt, params
	}

	if err := ensureVersion(ctx, p, o.ReadOnly); err != nil {
		return r, err
	}

	r.Milestone, r.Verdict, err = admitNode(ctx, p, o, now())
	return r, err
}

// readSyncParameters reads and parses the sync parameters with their
// version token.
func readSyncParameters(ctx context.Context, p Port) (*SyncParameters, string, error) {
	raw, ver, err := p.Read(ctx, RecordSyncParameters)
	if err != nil {
		return nil, "", err
	}
	doc, err := ParseSyncParameters(raw)
	if err != nil {
		return nil, "", &engine.Error{Op: "read sync parameters", DocID: SyncParametersDocID, Stage: engine.StageDecode, Err: err}
	}
	return &doc, ver, nil
}

// EnsureSyncParameters returns the remote's sync parameters, creating the
// salt when the remote has none. Only when reading proves the document
// absent (an error wrapping engine.ErrNotFound but not ErrNoDatabase) or
// salt-less does it write one (NewSalt, keeping the members of a
// salt-less document), conditionally on the version read, so that of two
// clients creating it at once one wins; then it reads the document back
// and returns what is stored, which may be the other client's salt. Any
// other read failure (auth, network, a missing database, a malformed
// body) is returned and nothing is written. With readOnly it writes
// nothing and returns zero parameters when there is no salt.
func EnsureSyncParameters(ctx context.Context, p Port, readOnly bool) (SyncParameters, error) {
	doc, ver, rerr := readSyncParameters(ctx, p)
	if errors.Is(rerr, ErrNoDatabase) { // not proof that the document is absent
		return SyncParameters{}, rerr
	}
	need, err := NeedsNewSalt(doc, rerr)
	if err != nil {
		return SyncParameters{}, fmt.Errorf("negotiate: handshake: the sync parameters could not be read, so no salt is created; fix the cause and retry: %w", err)
	}
	switch {
	case !need:
		return *doc, nil
	case readOnly:
		return SyncParameters{}, nil
	}
	salt, err := NewSalt(nil)
	if err != nil {
		return SyncParameters{}, err
	}
	np := NewSyncParameters(salt)
	if doc != nil {
		fresh := np
		np = *doc // keep the members of the salt-less document
		np.PBKDF2Salt = fresh.PBKDF2Salt
		if np.ProtocolVersion == 0 {
			np.ProtocolVersion = ProtocolVersionAdvancedE2EE
		}
		if np.Type == "" {
			np.Type = TypeSyncParameters
		}
	}
	raw, err := json.Marshal(np)
	if err != nil {
		return SyncParameters{}, err
	}
	// A lost race is fine: the read below returns the winner's salt.
	if _, err := p.Write(ctx, RecordSyncParameters, raw, ver); err != nil && !errors.Is(err, ErrConflict) {
		return SyncParameters{}, err
	}
	doc, _, err = readSyncParameters(ctx, p)
	if err != nil {
		return SyncParameters{}, err
	}
	if doc.PBKDF2Salt == "" {
		return SyncParameters{}, &engine.Error{Op: "write sync parameters", DocID: SyncParametersDocID, Stage: engine.StageStorage,
			Err: fmt.Errorf("negotiate: the sync parameters hold no salt after writing one: %w", ErrNoSalt)}
	}
	return *doc, nil
}

// ensureVersion is step 2 of Handshake.
func ensureVersion(ctx context.Context, p Port, readOnly bool) error {
	raw, ver, err := p.Read(ctx, RecordVersion)
	var doc *VersionDoc
	switch {
	case err == nil:
		v, perr := ParseVersionDoc(raw)
		if perr != nil {
			return &engine.Error{Op: "read version", DocID: VersionDocID, Stage: engine.StageDecode, Err: perr}
		}
		doc = &v
	case !errors.Is(err, engine.ErrNotFound) || errors.Is(err, ErrNoDatabase):
		return err
	}
	v, err := CheckVersion(doc)
	switch v {
	case VersionIncompatible:
		return fmt.Errorf("negotiate: handshake: the remote database was written by a newer or different client; update livesync-go (or use another database): %w", err)
	case VersionCreate, VersionMigrate:
		if readOnly {
			return nil
		}
		raw, err := json.Marshal(NewVersionDoc())
		if err != nil {
			return err
		}
		// A conflict means another client wrote it first.
		if _, err := p.Write(ctx, RecordVersion, raw, ver); err != nil && !errors.Is(err, ErrConflict) {
			return err
		}
	}
	return nil
}

// admitNode is step 3 of Handshake: it returns the milestone as read
// (nil if absent) and this node's verdict.
func admitNode(ctx context.Context, p Port, o HandshakeOptions, now time.Time) (*Milestone, Verdict, error) {
	info := o.Device
	if info.Progress == "" {
		if progress, err := p.Progress(ctx); err == nil {
			info.Progress = progress
		}
	}
	var read *Milestone
	var v Verdict
	judge := func(m *Milestone, found bool) (bool, error) {
		read = nil
		if found {
			read = m.Clone()
		}
		var write bool
		write, v = Admit(m, Admission{Node: o.NodeID, Range: o.Range, Device: info, Settings: o.Settings,
			Check: o.Check, AllowJoin: o.AllowJoin, ReadOnly: o.ReadOnly, Now: now})
		return write, nil
	}
	if _, err := UpdateMilestone(ctx, p, o.NodeID, now, judge); err != nil {
		return read, v, err
	}
	return read, v, verdictErr(v, o.ReadOnly)
}

// verdictErr wraps a refusing verdict with what the user can do; the lock
// verdicts of a read-only handshake are not errors.
func verdictErr(v Verdict, readOnly bool) error {
	err := v.Err()
	if err == nil || readOnly && (v.Kind == VerdictNodeLocked || v.Kind == VerdictNodeCleaned) {
		return nil
	}
	switch {
	case errors.Is(err, ErrNodeCleaned):
		return fmt.Errorf("negotiate: handshake: sync refused: %w; fetch everything from the remote again into an empty local database (which then joins the accepted devices), or unlock the remote", err)
	case errors.Is(err, ErrNodeLocked):
		return fmt.Errorf("negotiate: handshake: sync refused: %w; fetch the rebuilt remote into an empty local database (which then joins the accepted devices), or unlock the remote", err)
	case errors.Is(err, ErrTweakMismatch):
		return fmt.Errorf("negotiate: handshake: sync refused: %w; adopt the remote's preferred settings, or make this device's settings the preferred ones (other devices must then adopt them)", err)
	case errors.Is(err, ErrIncompatible):
		return fmt.Errorf("negotiate: handshake: sync refused: %w; update every device to a version that supports the remote's chunk format", err)
	}
	return fmt.Errorf("negotiate: handshake: sync refused: %w", err)
}
