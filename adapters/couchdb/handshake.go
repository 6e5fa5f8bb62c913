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
	// otherwise a missing database is an error.
	CreateIfMissing bool
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

// Handshake is the LiveSync pre-sync handshake (FORMAT.md §5.2, commonlib
// LiveSyncReplicator.ts checkReplicationConnectivity): it returns the
// vault's PBKDF2 salt and the milestone verdict, or an error that says
// what to do.
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
//     refuse sync are returned as errors wrapping negotiate's.
//
// The verdict is valid when err is nil or wraps a refusing verdict.
func (d *DB) Handshake(ctx context.Context, o HandshakeOptions) (salt []byte, verdict negotiate.Verdict, err error) {
	if o.NodeID == "" {
		return nil, verdict, errors.New("couchdb: handshake: NodeID is required")
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}

	// 0. The database.
	exists, err := d.Exists(ctx)
	if err != nil {
		return nil, verdict, err
	}
	if !exists {
		if !o.CreateIfMissing {
			return nil, verdict, &engine.Error{Op: "handshake", Stage: engine.StageProtocol,
				Err: fmt.Errorf("%w: %w", ErrNoDatabase, engine.ErrNotFound)}
		}
		if err := d.Create(ctx); err != nil {
			return nil, verdict, err
		}
	}

	// 1. Sync parameters and the salt.
	if salt, err = d.syncSalt(ctx); err != nil {
		return nil, verdict, err
	}

	// 2. The version document.
	if err := d.checkVersion(ctx); err != nil {
		return nil, verdict, err
	}

	// 3. The milestone.
	verdict, err = d.milestone(ctx, o, now())
	return salt, verdict, err
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

func (d *DB) syncSalt(ctx context.Context) ([]byte, error) {
	doc, rerr := d.readSyncParams(ctx)
	need, err := negotiate.NeedsNewSalt(doc, rerr)
	if err != nil {
		return nil, fmt.Errorf("couchdb: handshake: the sync parameters could not be read, so no salt is created; fix the cause and retry: %w", err)
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

func (d *DB) checkVersion(ctx context.Context) error {
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

func (d *DB) milestone(ctx context.Context, o HandshakeOptions, now time.Time) (negotiate.Verdict, error) {
	var m *negotiate.Milestone
	switch raw, err := d.GetLocal(ctx, milestoneLocalID); {
	case err == nil:
		if m, err = negotiate.ParseMilestone(raw); err != nil {
			return negotiate.Verdict{}, &engine.Error{Op: "read milestone", DocID: negotiate.MilestoneDocID, Stage: engine.StageDecode, Err: err}
		}
	case errors.Is(err, engine.ErrNotFound):
		m = negotiate.NewMilestone(o.NodeID, now)
	default:
		return negotiate.Verdict{}, err
	}
	info := o.Device
	if info.Progress == "" {
		if di, err := d.Info(ctx); err == nil {
			info.Progress = di.UpdateSeq
		}
	}
	write := m.Register(o.NodeID, negotiate.CouchDBChunkRange, info, o.Settings, now)
	v := negotiate.Check(m, o.NodeID, negotiate.CouchDBChunkRange, o.Settings, o.Check)
	if (v.Kind == negotiate.VerdictNodeLocked || v.Kind == negotiate.VerdictNodeCleaned) && o.AllowJoin {
		m.Accept(o.NodeID, negotiate.CouchDBChunkRange)
		write = true
		v = negotiate.Check(m, o.NodeID, negotiate.CouchDBChunkRange, o.Settings, o.Check)
	}
	if write {
		b, err := json.Marshal(m)
		if err != nil {
			return v, err
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(b, &fields); err != nil {
			return v, err
		}
		if err := d.putLocalRev(ctx, milestoneLocalID, fields); err != nil {
			if httpStatus(err) == http.StatusConflict {
				return v, fmt.Errorf("couchdb: handshake: another client updated the milestone at the same time; run the handshake again: %w", err)
			}
			return v, err
		}
	}
	return v, verdictErr(v)
}

// verdictErr wraps a refusing verdict with what the user can do.
func verdictErr(v negotiate.Verdict) error {
	err := v.Err()
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, negotiate.ErrNodeCleaned):
		return fmt.Errorf("couchdb: handshake: sync refused: %w; fetch everything from the remote again (then connect with AllowJoin), or unlock the remote from a device that is accepted", err)
	case errors.Is(err, negotiate.ErrNodeLocked):
		return fmt.Errorf("couchdb: handshake: sync refused: %w; fetch the rebuilt remote into a fresh local database (then connect with AllowJoin), or unlock the remote from a device that is accepted", err)
	case errors.Is(err, negotiate.ErrTweakMismatch):
		return fmt.Errorf("couchdb: handshake: sync refused: %w; adopt the remote's preferred settings, or make this device's settings the preferred ones (other devices must then adopt them)", err)
	case errors.Is(err, negotiate.ErrIncompatible):
		return fmt.Errorf("couchdb: handshake: sync refused: %w; update every device to a version that supports the remote's chunk format", err)
	}
	return fmt.Errorf("couchdb: handshake: sync refused: %w", err)
}
