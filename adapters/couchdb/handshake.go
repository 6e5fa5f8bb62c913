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

// HandshakeOptions configure Handshake: negotiate.HandshakeOptions without
// the chunk range, which is always negotiate.CouchDBChunkRange.
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
	// ReadOnly writes nothing (see negotiate.HandshakeOptions.ReadOnly).
	ReadOnly bool
	// Check relaxes the milestone checks (upstream's ignoreVersionCheck,
	// disableCheckingConfigMismatch).
	Check negotiate.CheckOptions
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (o HandshakeOptions) negotiate() negotiate.HandshakeOptions {
	return negotiate.HandshakeOptions{NodeID: o.NodeID, Range: negotiate.CouchDBChunkRange, Device: o.Device,
		Settings: o.Settings, AllowJoin: o.AllowJoin, CreateIfMissing: o.CreateIfMissing, ReadOnly: o.ReadOnly,
		Check: o.Check, Now: o.Now}
}

// Errors of Handshake besides those of negotiate (which it wraps:
// negotiate.ErrNodeLocked, ErrNodeCleaned, ErrIncompatible,
// *negotiate.TweakMismatchError).
var (
	// ErrNoDatabase means the database does not exist and
	// HandshakeOptions.CreateIfMissing was not set.
	ErrNoDatabase = negotiate.ErrNoDatabase
	// ErrMilestoneRace means other clients kept rewriting the milestone
	// while this one tried to update it; run the handshake again.
	ErrMilestoneRace = negotiate.ErrMilestoneRace
	// ErrSaltRace is no longer returned: a salt written by another client
	// at the same time is read back and used. It is kept for callers that
	// test for it.
	ErrSaltRace = errors.New("couchdb: another client created the sync parameters at the same time; run the handshake again")
)

// HandshakeResult is what HandshakeInfo learnt from the database.
type HandshakeResult = negotiate.HandshakeResult

// Handshake is HandshakeInfo returning the salt and the verdict only.
func (d *DB) Handshake(ctx context.Context, o HandshakeOptions) (salt []byte, verdict negotiate.Verdict, err error) {
	r, err := d.HandshakeInfo(ctx, o)
	return r.Salt, r.Verdict, err
}

// HandshakeInfo is the LiveSync pre-sync handshake (negotiate.Handshake)
// on this database: it returns the vault's PBKDF2 salt and the milestone
// verdict, or an error that says what to do.
func (d *DB) HandshakeInfo(ctx context.Context, o HandshakeOptions) (HandshakeResult, error) {
	return negotiate.Handshake(ctx, d, o.negotiate())
}

// ReadMilestone reads the milestone; nil (and no error) when the database
// has none.
func (d *DB) ReadMilestone(ctx context.Context) (*negotiate.Milestone, error) {
	return negotiate.ReadMilestone(ctx, d)
}

// UpdateMilestone is negotiate.UpdateMilestone on this database.
func (d *DB) UpdateMilestone(ctx context.Context, me string, now time.Time, fn func(m *negotiate.Milestone, found bool) (write bool, err error)) (*negotiate.Milestone, error) {
	return negotiate.UpdateMilestone(ctx, d, me, now, fn)
}

// DB keeps the handshake's records as _local documents (the sync
// parameters, the milestone) and one replicated document (the version),
// with their _rev as version tokens.
var _ negotiate.Port = (*DB)(nil)

// Read reads one of the handshake's records and its _rev; absent records
// wrap engine.ErrNotFound.
func (d *DB) Read(ctx context.Context, r negotiate.Record) (json.RawMessage, string, error) {
	var raw json.RawMessage
	var err error
	if id, ok := strings.CutPrefix(string(r), localPrefix); ok {
		raw, err = d.GetLocal(ctx, id)
	} else {
		err = d.do(ctx, "read "+r.Name(), string(r), http.MethodGet, d.dbURL("/"+url.PathEscape(string(r)), nil), nil, &raw)
	}
	if err != nil {
		return nil, "", err
	}
	var head struct {
		Rev string `json:"_rev"`
	}
	_ = json.Unmarshal(raw, &head)
	return raw, head.Rev, nil
}

// Write stores raw as record r with _rev version ("" creates it) and
// returns the new _rev; a stale or missing _rev wraps
// negotiate.ErrConflict.
func (d *DB) Write(ctx context.Context, r negotiate.Record, raw json.RawMessage, version string) (string, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return "", &engine.Error{Op: "write " + r.Name(), DocID: string(r), Stage: engine.StageEncode,
			Err: fmt.Errorf("couchdb: a document must be a JSON object: %w", engine.ErrMalformed)}
	}
	delete(fields, "_rev")
	if version != "" {
		fields["_rev"], _ = json.Marshal(version)
	}
	var rev string
	var err error
	if id, ok := strings.CutPrefix(string(r), localPrefix); ok {
		rev, err = d.putLocalRev(ctx, id, fields)
	} else {
		fields["_id"], _ = json.Marshal(string(r))
		var res struct {
			Rev string `json:"rev"`
		}
		err = d.do(ctx, "write "+r.Name(), string(r), http.MethodPut, d.dbURL("/"+url.PathEscape(string(r)), nil), fields, &res)
		rev = res.Rev
	}
	if isConflict(err) {
		return "", fmt.Errorf("%w: %w", negotiate.ErrConflict, err)
	}
	return rev, err
}

// Progress is the database's update sequence.
func (d *DB) Progress(ctx context.Context) (string, error) {
	info, err := d.Info(ctx)
	return info.UpdateSeq, err
}
