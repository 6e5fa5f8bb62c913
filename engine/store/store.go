package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/livesync-go/livesync-go/engine"
)

// Sentinel errors of the store. Absent documents are engine.ErrNotFound.
var (
	// ErrConflict means a new edit (Put) named a revision that is not a
	// leaf of the document, or omitted _rev for a document that exists and
	// is not deleted. It is permanent for the same input: re-read, merge,
	// retry.
	ErrConflict = errors.New("store: document update conflict")
	// ErrInvalid means a document is not acceptable: not a JSON object, no
	// _id, a reserved "_" id, a malformed _rev or _revisions.
	ErrInvalid = errors.New("store: invalid document")
	// ErrClosed means the store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrStorageFull means the storage under the store has no room left
	// (a full disk or an exhausted quota). The write that got it stored
	// nothing; it may succeed once space is freed. A Backend wraps its
	// storage error with it (boltstore does for ENOSPC and EDQUOT).
	ErrStorageFull = errors.New("store: no space left on the storage")
	// ErrUnavailable means the storage under the store cannot be reached
	// now (a database server that is down, restarting or unreachable).
	// Nothing is known to be stored by the call that got it; it may
	// succeed when retried later. A Backend or a Store over a server
	// wraps its transport errors with it.
	ErrUnavailable = errors.New("store: the storage cannot be reached")
)

// Size limits of the store. Every key a Store writes to its Backend is at
// most MaxKeySize bytes: a document's id (BucketDocs), a _local id
// (BucketLocal), or uvarint(len(id)) ‖ id ‖ rev (BucketBodies, at most
// 3 + MaxIDLength + MaxRevLength bytes). Writes over a limit are refused
// with an error wrapping ErrInvalid, before anything is written.
const (
	// MaxKeySize is the longest key a Backend must accept: bbolt's
	// MaxKeySize, 32 KiB.
	MaxKeySize = 32768
	// MaxIDLength is the longest document id, in bytes (UTF-8). CouchDB
	// has no default limit; 16 KiB is far above any vault path LiveSync
	// makes an id of, and leaves room in MaxKeySize for a revision.
	MaxIDLength = 16384
	// MaxLocalIDLength is the longest _local id (without "_local/") that
	// PutLocal takes: MaxIDLength plus room for a decorator's prefix (the
	// hold-back keeps a document's held bodies under a prefix and its id).
	MaxLocalIDLength = MaxIDLength + 1024
	// MaxRevLength is the longest revision id "N-hash", in bytes. CouchDB
	// and PouchDB make 32 hex digits; other clients up to 40 or so.
	MaxRevLength = 1024
	// MaxRevisions caps the _revisions of a replicated revision: only the
	// newest MaxRevisions ids are read, the older ones are ignored before
	// any work is done, as if the sender's revs limit were MaxRevisions
	// (an ancestor further back is not linked, which at worst leaves a
	// revision the sender had superseded as a conflict). The revs limit
	// then stems what is stored.
	MaxRevisions = 10000
)

// DefaultRevsLimit is the number of revisions kept per branch when
// Options.RevsLimit is zero, the revs limit of the plugin's local
// database.
const DefaultRevsLimit = 100

// KeepAllBodies, as Options.KeepBodies, keeps the body of every revision
// until Compact, as CouchDB does until a database is compacted.
const KeepAllBodies = -1

// Options configures a store. The zero value means the defaults.
type Options struct {
	// Name is reported by Info.
	Name string
	// RevsLimit caps the revisions kept per branch of a document's tree
	// (CouchDB's _revs_limit) until SetRevsLimit changes it; older
	// ancestors are stemmed. 0 means DefaultRevsLimit.
	RevsLimit int
	// KeepBodies is how many bodies of earlier (non-leaf) revisions each
	// document keeps besides its leaves', newest first (by generation);
	// a write that pushes a body out of that window drops it, and Compact
	// drops them all. 0, the default, keeps none: only leaves have a body
	// (a lean local replica). KeepAllBodies keeps every one until Compact,
	// as CouchDB does (the relay's setting).
	KeepBodies int
}

// Validate reports whether the options are usable.
func (o Options) Validate() error {
	if o.RevsLimit < 0 {
		return fmt.Errorf("store: RevsLimit %d is negative; use 0 for the default (%d)", o.RevsLimit, DefaultRevsLimit)
	}
	if o.KeepBodies < KeepAllBodies {
		return fmt.Errorf("store: KeepBodies %d is invalid; use 0 (leaves only), N > 0 or KeepAllBodies (-1)", o.KeepBodies)
	}
	return nil
}

func (o Options) revsLimit() int {
	if o.RevsLimit == 0 {
		return DefaultRevsLimit
	}
	return o.RevsLimit
}

// GetOptions selects what Get returns.
type GetOptions struct {
	// Rev names a revision to read; "" means the winning revision. A
	// revision whose body is not kept (see Options.KeepBodies, Compact)
	// is ErrNotFound.
	Rev string
	// Revs adds _revisions {start, ids} (newest first).
	Revs bool
	// RevsInfo adds _revs_info: the revision read and its ancestors still
	// in the tree, newest first, each {rev, status} with status
	// "available" (its body is kept), "deleted" (kept, a deletion) or
	// "missing" (not kept), CouchDB's revs_info.
	RevsInfo bool
	// Conflicts adds _conflicts: the non-deleted leaves other than the
	// winner, in winning order (only when reading the winner).
	Conflicts bool
}

// AllDocsOptions selects a range of document ids, in byte order.
type AllDocsOptions struct {
	StartKey string // first id, inclusive; "" from the start
	EndKey   string // last id, inclusive; "" to the end
	Limit    int    // 0 means no limit
}

// DocInfo is one row of AllDocs: a document whose winning revision is not
// deleted.
type DocInfo struct {
	ID  string
	Rev string // the winning revision
}

// Store is the local replica: CouchDB-style documents with revision trees,
// a changes feed, _local documents and chunk lookup. It is both sides of
// the engine's ports: an engine.Endpoint for replication and the
// engine.LocalChunks of chunk retrieval.
//
// The contract, checked by storetest.Run for every implementation:
//
//   - Documents are JSON objects with _id and _rev. A document's revisions
//     form a tree; its leaves are its current versions. The winning
//     revision is CouchDB's: non-deleted leaves beat deleted ones, then the
//     higher generation, then the greater revision id compared as a
//     string. Conflicts are the other non-deleted leaves. Each branch keeps
//     at most RevsLimit revisions (stemmed when a document is written and
//     by Compact). Leaves always keep their body; earlier revisions keep
//     theirs as Options.KeepBodies says, and Get, BulkGet and revs_info
//     serve them until Compact drops them.
//   - BulkDocs is new_edits=false (replication); Put is new_edits=true
//     (local edits) and generates "N-<32 hex>" revisions.
//   - Changes lists each document once, at the sequence of its latest
//     write, in increasing sequence order; seqs are opaque strings that
//     are only handed back as Since. Revs are all leaves (style=all_docs),
//     winner first. _local documents are never in the feed. With Limit 0
//     a page holds every remaining change; Pending is 0 on the last page
//     and -1 (unknown) otherwise.
//   - Selectors (Mango, evaluated on the winning revision as CouchDB's
//     _selector filter does): an object whose keys are top-level field
//     names (including _id, _rev, _deleted) or "$and" with a list of
//     selectors; a field's condition is a value (equality) or an object of
//     operators $eq, $ne, $in, $nin, $exists. A missing field matches only
//     {"$exists":false}, as in CouchDB. Anything else (nested paths, other
//     operators, $or, …) is an error wrapping engine.ErrUnsupported.
//   - Chunks are leaf documents {_id:"h:…", data, type:"leaf"}, visible to
//     Changes, BulkGet and Get like any document. PutChunks writes a chunk
//     only when it is absent or deleted, with new_edits=true. The first
//     revision of a new chunk, by PutChunks or by Put of exactly
//     {_id, data, type:"leaf"}, is the plug-in's, ChunkRev(id, data), so
//     the same chunk has the same revision on every store and on every
//     LiveSync device. Other first revisions are "1-" + md5 hex of the
//     stored body (keys sorted).
//   - Every BulkDocs, PutBatch, PutChunks and Put call is atomic: after it
//     returns nil, all of its writes are in the store (durably, for a
//     persistent implementation); after it returns an error, or after a
//     crash, none or all of them are. A document refused on its own (a
//     per-document result of BulkDocs or PutBatch) is not written, and
//     does not stop the others. Storage errors (ErrStorageFull, an I/O
//     error) are the call's error, never a per-document result.
//   - Ids and revisions have the size limits MaxIDLength,
//     MaxLocalIDLength and MaxRevLength; a replicated revision's
//     _revisions is read up to MaxRevisions ids. Writing one document is
//     linear in its tree and its _revisions, so no input makes a write
//     (which holds the store's single write transaction) quadratic.
//   - Methods are safe for concurrent use. A cancelled ctx returns
//     ctx.Err(). After Close every method returns ErrClosed.
//
// Nothing in the contract assumes a single local file: an implementation
// may keep its replica in a remote database, as long as it keeps the
// rules above.
type Store interface {
	engine.Endpoint
	engine.LocalChunks

	// Get reads one document. It returns engine.ErrNotFound when the
	// document does not exist, when its winning revision is deleted and
	// opts.Rev is empty, or when opts.Rev has no stored body.
	Get(ctx context.Context, id string, opts GetOptions) (json.RawMessage, error)
	// GetRevs reads several revisions of one document (open_revs) from
	// one load of its revision tree, so reading all n leaves of a document
	// is linear in n, not n Get calls of O(n) each. Results are in the
	// order of opts.Revs (or the leaves' winning order with opts.All).
	// Held or absent revisions are missing, never an error.
	GetRevs(ctx context.Context, id string, opts RevsOptions) ([]RevDocs, error)
	// Put writes a local edit (new_edits=true): with _rev, the revision
	// must be a leaf (a conflict branch may be edited or deleted to resolve
	// it); without _rev, the document must be absent or deleted. It
	// returns the new revision, or an error wrapping ErrConflict or
	// ErrInvalid. "_deleted":true deletes (the body is kept).
	Put(ctx context.Context, doc json.RawMessage) (string, error)
	// PutBatch writes local edits (new_edits=true) of several documents
	// in one atomic call, each as Put would, in order (a later edit of
	// the same id sees the earlier one). Results are in docs order: {ID,
	// Rev} for a written edit, or {ID, Error, Reason} with Error
	// "conflict" (Put's ErrConflict) or "bad_request" (ErrInvalid), which
	// is not written. A non-nil error means nothing was written.
	PutBatch(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error)
	// AllDocs lists the non-deleted documents in id order.
	AllDocs(ctx context.Context, opts AllDocsOptions) ([]DocInfo, error)
	// Compact drops the body of every revision that is not a leaf and
	// stems every document to the current revs limit, as CouchDB's
	// database compaction does; storage they took is free for reuse.
	// Leaves, sequences and the changes feed do not change. It runs in
	// several transactions, each atomic: a cancelled ctx stops it between
	// two with ctx.Err(), and what was compacted stays compacted.
	Compact(ctx context.Context) error
	// RevsLimit returns the number of revisions kept per branch (CouchDB's
	// _revs_limit): the last SetRevsLimit, else Options.RevsLimit.
	RevsLimit(ctx context.Context) (int, error)
	// SetRevsLimit sets the revs limit, durably; n must be at least 1
	// (else an error wrapping ErrInvalid). As in CouchDB, a document is
	// stemmed to it at its next write, and all are by Compact.
	SetRevsLimit(ctx context.Context, n int) error
	// Close releases the store; it waits for calls in flight and wakes
	// waiting Changes calls, which return ErrClosed.
	Close() error
}
