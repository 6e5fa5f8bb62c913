package couchdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// HandshakeOptions configure Handshake.
type HandshakeOptions struct {
	// NodeID is this device's node id (negotiate.NodeInfoDoc's nodeid).
	NodeID string
	// Device describes this device in the milestone's node_info. An empty
	// Progress is filled with the database's update sequence.
	Device negotiate.DeviceInfo
	// Settings are this device's tweak values (livesync.Settings.TweakValues).
	Settings negotiate.TweakValues
	// AllowJoin lets this node add itself to a locked remote's
	// accepted_nodes (upstream's markRemoteResolved): set it only after
	// the user has chosen to fetch the rebuilt remote.
	AllowJoin bool
	// CreateIfMissing creates the database when it does not exist;
	// otherwise a missing database is an error. With ReadOnly, a missing
	// database is then reported as a new one (HandshakeResult.Exists
	// false) instead of an error.
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
	Check negotiate.CheckOptions
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Errors of Handshake besides those of negotiate (which it wraps:
// negotiate.ErrNodeLocked, ErrNodeCleaned, ErrIncompatible,
// *negotiate.TweakMismatchError).
var (
	// ErrNoDatabase means the database does not exist and
	// HandshakeOptions.CreateIfMissing was not set.
	ErrNoDatabase = errors.New("couchdb: the database does not exist (create it on the server, or let the client create it)")
	// ErrSaltRace means another client wrote the sync parameters while
	// this one created a salt; run the handshake again to use theirs.
	ErrSaltRace = errors.New("couchdb: another client created the sync parameters at the same time; run the handshake again")
)

// Document ids without the "_local/" prefix.
var (
	syncParamsLocalID = strings.TrimPrefix(negotiate.SyncParametersDocID, localPrefix)
	milestoneLocalID  = strings.TrimPrefix(negotiate.MilestoneDocID, localPrefix)
)

// HandshakeResult is what HandshakeInfo learnt from the database.
type HandshakeResult struct {
	// Exists is false when the database does not exist (ReadOnly with
	// CreateIfMissing only; otherwise it is created or an error).
	Exists bool
	// Salt is the vault's PBKDF2 salt; nil when ReadOnly found none.
	Salt []byte
	// Milestone is the milestone as read before this handshake changed
	// it; nil when the database had none.
	Milestone *negotiate.Milestone
	// Verdict is the milestone verdict, valid when the error is nil or
	// wraps a refusing verdict.
	Verdict negotiate.Verdict
}

// Handshake is HandshakeInfo returning the salt and the verdict only.
func (d *DB) Handshake(ctx context.Context, o HandshakeOptions) (salt []byte, verdict negotiate.Verdict, err error) {
	r, err := d.HandshakeInfo(ctx, o)
	return r.Salt, r.Verdict, err
}

// HandshakeInfo is the LiveSync pre-sync handshake (FORMAT.md §5.2,
// commonlib LiveSyncReplicator.ts checkReplicationConnectivity): it
// returns the vault's PBKDF2 salt and the milestone verdict, or an error
// that says what to do.
//
//  1. Sync parameters (§1.7, commonlib SyncParamsHandler.ts): a new salt is
//     created only when reading _local/obsidian_livesync_sync_parameters
//     proves it absent (HTTP 404) or its salt is empty. Any other failure
//     (network, 401, a malformed answer) is returned and never leads to a
//     new salt (upstream issue #1147). A salt is written conditionally
//     (a concurrent writer gives ErrSaltRace) and read back.
//  2. The version document (§1.5): created when missing, bumped when
//     older, an error when newer or of another type.
//  3. The milestone (§5.4): registered and written back when needed, then
//     judged by negotiate.Check. A node that is not accepted by a locked
//     remote joins accepted_nodes only with AllowJoin. Verdicts that
//     refuse sync are returned as errors wrapping negotiate's. A write
//     that loses a race with another client is redone from a fresh read
//     (ErrMilestoneRace after milestoneTries rounds), as on a bucket.
//
// With ReadOnly set it reads the same documents and writes none of them.
func (d *DB) HandshakeInfo(ctx context.Context, o HandshakeOptions) (HandshakeResult, error) {
	var r HandshakeResult
	if o.NodeID == "" {
		return r, errors.New("couchdb: handshake: a node id is required")
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}

	// 0. The database.
	exists, err := d.Exists(ctx)
	if err != nil {
		return r, err
	}
	if !exists {
		switch {
		case !o.CreateIfMissing:
			return r, &engine.Error{Op: "handshake", Stage: engine.StageProtocol,
				Err: fmt.Errorf("%w: %w", ErrNoDatabase, engine.ErrNotFound)}
		case o.ReadOnly:
			m := negotiate.NewMilestone(o.NodeID, now())
			m.Register(o.NodeID, negotiate.CouchDBChunkRange, o.Device, o.Settings, now())
			r.Verdict = negotiate.Check(m, o.NodeID, negotiate.CouchDBChunkRange, o.Settings, o.Check)
			return r, verdictErr(r.Verdict, true)
		}
		if err := d.Create(ctx); err != nil {
			return r, err
		}
	}
	r.Exists = true

	// 1. Sync parameters and the salt.
	if r.Salt, err = d.syncSalt(ctx, o.ReadOnly); err != nil {
		return r, err
	}

	// 2. The version document.
	if err := d.checkVersion(ctx, o.ReadOnly); err != nil {
		return r, err
	}

	// 3. The milestone.
	r.Milestone, r.Verdict, err = d.milestone(ctx, o, now())
	return r, err
}

func (d *DB) readSyncParams(ctx context.Context) (*negotiate.SyncParameters, error) {
	raw, err := d.GetLocal(ctx, syncParamsLocalID)
	if err != nil {
		return nil, err
	}
	p, err := negotiate.ParseSyncParameters(raw)
	if err != nil {
		return nil, &engine.Error{Op: "read sync parameters", DocID: negotiate.SyncParametersDocID, Stage: engine.StageDecode, Err: err}
	}
	return &p, nil
}

func (d *DB) syncSalt(ctx context.Context, readOnly bool) ([]byte, error) {
	doc, rerr := d.readSyncParams(ctx)
	need, err := negotiate.NeedsNewSalt(doc, rerr)
	if err != nil {
		return nil, fmt.Errorf("couchdb: handshake: the sync parameters could not be read, so no salt is created; fix the cause and retry: %w", err)
	}
	if need && readOnly {
		return nil, nil
	}
	if need {
		salt, err := negotiate.NewSalt(nil)
		if err != nil {
			return nil, err
		}
		p := negotiate.NewSyncParameters(salt)
		if doc != nil {
			p = *doc // keep the members and _rev of the salt-less document
			p.PBKDF2Salt = negotiate.NewSyncParameters(salt).PBKDF2Salt
			if p.ProtocolVersion == 0 {
				p.ProtocolVersion = negotiate.ProtocolVersionAdvancedE2EE
			}
			if p.Type == "" {
				p.Type = negotiate.TypeSyncParameters
			}
		}
		b, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(b, &fields); err != nil {
			return nil, err
		}
		if err := d.putLocalRev(ctx, syncParamsLocalID, fields); err != nil {
			if httpStatus(err) == http.StatusConflict {
				return nil, fmt.Errorf("%w: %w", ErrSaltRace, err)
			}
			return nil, err
		}
		if doc, err = d.readSyncParams(ctx); err != nil {
			return nil, err
		}
	}
	salt, err := doc.Salt()
	if err != nil {
		return nil, &engine.Error{Op: "read sync parameters", DocID: negotiate.SyncParametersDocID, Stage: engine.StageDecode, Err: err}
	}
	return salt, nil
}

func (d *DB) checkVersion(ctx context.Context, readOnly bool) error {
	u := d.dbURL("/"+url.PathEscape(negotiate.VersionDocID), nil)
	var raw json.RawMessage
	var doc *negotiate.VersionDoc
	switch err := d.do(ctx, "read version", negotiate.VersionDocID, http.MethodGet, u, nil, &raw); {
	case err == nil:
		v, perr := negotiate.ParseVersionDoc(raw)
		if perr != nil {
			return &engine.Error{Op: "read version", DocID: negotiate.VersionDocID, Stage: engine.StageDecode, Err: perr}
		}
		doc = &v
	case !errors.Is(err, engine.ErrNotFound):
		return err
	}
	v, err := negotiate.CheckVersion(doc)
	switch v {
	case negotiate.VersionIncompatible:
		return fmt.Errorf("couchdb: handshake: the remote database was written by a newer or different client; update livesync-go (or use another database): %w", err)
	case negotiate.VersionCreate, negotiate.VersionMigrate:
		if readOnly {
			return nil
		}
		nd := negotiate.NewVersionDoc()
		if doc != nil {
			nd.Rev = doc.Rev
		}
		if err := d.do(ctx, "write version", negotiate.VersionDocID, http.MethodPut, u, nd, nil); err != nil && httpStatus(err) != http.StatusConflict {
			return err // a conflict means another client wrote it first
		}
	}
	return nil
}

// milestoneTries bounds the read-register-write rounds of a milestone
// update when other clients rewrite it at the same time. Every round that
// loses does so because another client won one, so n racing clients all
// finish within n rounds.
const milestoneTries = 16

// ErrMilestoneRace means other clients kept rewriting the milestone
// while this one tried to update it; run the handshake again.
var ErrMilestoneRace = errors.New("couchdb: other clients kept rewriting the milestone at the same time; run the handshake again")

// ReadMilestone reads the milestone; nil (and no error) when the database
// has none.
func (d *DB) ReadMilestone(ctx context.Context) (*negotiate.Milestone, error) {
	raw, err := d.GetLocal(ctx, milestoneLocalID)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	m, err := negotiate.ParseMilestone(raw)
	if err != nil {
		return nil, &engine.Error{Op: "read milestone", DocID: negotiate.MilestoneDocID, Stage: engine.StageDecode, Err: err}
	}
	return m, nil
}

// UpdateMilestone reads the milestone (a new one for node me, created
// now, when there is none), lets fn change it (found
// says whether it was read), and writes it back if fn
// says so, conditionally on the revision read: when another client wrote
// it in between, the round starts again from a fresh read
// (ErrMilestoneRace after milestoneTries rounds). fn may run more than
// once and must derive its changes from the milestone it is given. It
// returns the milestone as written (or as read, when fn wrote nothing).
func (d *DB) UpdateMilestone(ctx context.Context, me string, now time.Time, fn func(m *negotiate.Milestone, found bool) (write bool, err error)) (*negotiate.Milestone, error) {
	for range milestoneTries {
		m, err := d.ReadMilestone(ctx)
		if err != nil {
			return nil, err
		}
		found := m != nil
		if !found {
			m = negotiate.NewMilestone(me, now)
		}
		write, err := fn(m, found)
		if err != nil || !write {
			return m, err
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(b, &fields); err != nil {
			return nil, err
		}
		err = d.putLocalRev(ctx, milestoneLocalID, fields)
		if isConflict(err) {
			continue // another client wrote it since the read
		}
		if err != nil {
			return nil, err
		}
		return m, nil
	}
	return nil, &engine.Error{Op: "write milestone", DocID: negotiate.MilestoneDocID, Stage: engine.StageStorage, Err: ErrMilestoneRace}
}

// milestone is step 3 of HandshakeInfo: it returns the milestone as read
// (nil if absent) and this node's verdict.
func (d *DB) milestone(ctx context.Context, o HandshakeOptions, now time.Time) (*negotiate.Milestone, negotiate.Verdict, error) {
	info := o.Device
	if info.Progress == "" {
		if di, err := d.Info(ctx); err == nil {
			info.Progress = di.UpdateSeq
		}
	}
	my := negotiate.CouchDBChunkRange
	var read *negotiate.Milestone
	var v negotiate.Verdict
	judge := func(m *negotiate.Milestone, found bool) (bool, error) {
		read = nil
		if found {
			read = m.Clone()
		}
		var write bool
		write, v = negotiate.Admit(m, negotiate.Admission{Node: o.NodeID, Range: my, Device: info, Settings: o.Settings,
			Check: o.Check, AllowJoin: o.AllowJoin, ReadOnly: o.ReadOnly, Now: now})
		return write, nil
	}
	if _, err := d.UpdateMilestone(ctx, o.NodeID, now, judge); err != nil {
		return read, v, err
	}
	return read, v, verdictErr(v, o.ReadOnly)
}

// verdictErr wraps a refusing verdict with what the user can do.
func verdictErr(v negotiate.Verdict, readOnly bool) error {
	err := v.Err()
	if err == nil || readOnly && (v.Kind == negotiate.VerdictNodeLocked || v.Kind == negotiate.VerdictNodeCleaned) {
		return nil
	}
	switch {
	case errors.Is(err, negotiate.ErrNodeCleaned):
		return fmt.Errorf("couchdb: handshake: sync refused: %w; fetch everything from the remote again into an empty local database (which then joins the accepted devices), or unlock the remote", err)
	case errors.Is(err, negotiate.ErrNodeLocked):
		return fmt.Errorf("couchdb: handshake: sync refused: %w; fetch the rebuilt remote into an empty local database (which then joins the accepted devices), or unlock the remote", err)
	case errors.Is(err, negotiate.ErrTweakMismatch):
		return fmt.Errorf("couchdb: handshake: sync refused: %w; adopt the remote's preferred settings, or make this device's settings the preferred ones (other devices must then adopt them)", err)
	case errors.Is(err, negotiate.ErrIncompatible):
		return fmt.Errorf("couchdb: handshake: sync refused: %w; update every device to a version that supports the remote's chunk format", err)
	}
	return fmt.Errorf("couchdb: handshake: sync refused: %w", err)
}
