package negotiate

import (
	"context"
	"encoding/json"
	"errors"
)

// Record names one of the documents a remote keeps for the handshake.
type Record string

// The handshake's records. A remote that has no version document (a
// journal bucket) answers engine.ErrNotFound for RecordVersion and ignores
// writes of it.
const (
	RecordSyncParameters Record = SyncParametersDocID
	RecordMilestone      Record = MilestoneDocID
	RecordVersion        Record = VersionDocID
)

// Name names r in messages and operation names: "sync parameters",
// "milestone" or "version" ("document" for any other id).
func (r Record) Name() string {
	switch r {
	case RecordSyncParameters:
		return "sync parameters"
	case RecordMilestone:
		return "milestone"
	case RecordVersion:
		return "version"
	}
	return "document"
}

// ErrConflict means a conditional write lost a race: the record changed
// (or was created) since the version the writer read. The handshake reads
// again and redoes its change.
var ErrConflict = errors.New("negotiate: the document changed since it was read")

// Port is the remote's side of the handshake: where it keeps the sync
// parameters, the milestone and the version document, each with a
// version token (CouchDB's _rev, an S3 ETag) for conditional writes.
// CouchDB databases, journal buckets and peers implement it; Handshake,
// UpdateMilestone, Lock and Unlock run over it.
type Port interface {
	// Exists reports whether the database (or bucket) exists.
	Exists(ctx context.Context) (bool, error)
	// Create creates the database; creating one that exists is not an
	// error.
	Create(ctx context.Context) error
	// Read returns a record's JSON and its version token, or an error
	// wrapping engine.ErrNotFound when the record is absent.
	Read(ctx context.Context, r Record) (raw json.RawMessage, version string, err error)
	// Write stores raw as record r if the record is still at version
	// ("" means it must not exist yet) and returns the new version. A lost
	// race returns an error wrapping ErrConflict.
	Write(ctx context.Context, r Record, raw json.RawMessage, version string) (newVersion string, err error)
	// Progress is the remote's position, reported in this device's
	// node_info (CouchDB's update_seq); "" when the remote has none.
	Progress(ctx context.Context) (string, error)
}
