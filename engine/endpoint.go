package engine

import (
	"context"
	"encoding/json"
)

// Change is one row of a changes feed (style=all_docs): the document, the
// sequence at which its latest change happened, and its leaf revisions.
// Seq is opaque: never parse or compare it, only hand it back as Since.
type Change struct {
	Seq     string
	ID      string
	Revs    []string // leaf revisions, winning revision first
	Deleted bool     // the winning revision is a tombstone
}

// ChangesRequest asks for changes after Since ("" = from the start).
type ChangesRequest struct {
	Since string
	// Limit caps the rows of one page; 0 means the endpoint's default.
	Limit int
	// Selector, if set, is a Mango selector such as
	// {"type":{"$ne":"leaf"}} (readChunksOnline); only matching
	// documents are listed, but LastSeq still advances past the rest.
	Selector json.RawMessage
	// Wait, if true, blocks (longpoll) until at least one change exists
	// after Since or ctx ends; an ended ctx returns ctx.Err().
	Wait bool
}

// ChangesPage is one page of a changes feed. LastSeq is where the next
// request continues. Pending, when the endpoint knows it, is the number of
// changes left after this page (-1 if unknown).
type ChangesPage struct {
	Results []Change
	LastSeq string
	Pending int
}

// DocRev names one revision of one document.
type DocRev struct {
	ID  string
	Rev string
}

// BulkDocResult is the outcome of writing one document: Error is empty on
// success, else a CouchDB error name such as "forbidden" or "conflict".
type BulkDocResult struct {
	ID     string
	Rev    string
	Error  string
	Reason string
}

// EndpointInfo describes a database.
type EndpointInfo struct {
	Name      string
	UpdateSeq string // opaque
	DocCount  int64
}

// Endpoint is one side of CouchDB-protocol replication: a remote database
// (CouchDB, a relay, a peer) or the local store. Documents travel as JSON
// objects with _id, _rev and, from BulkGet, _revisions; an Endpoint stores
// and returns them unchanged (a remote's encryption transform is a
// decorator around its Endpoint, not part of it). Errors: ErrNotFound for
// an absent local document or database; *Error with StageTransport for
// network failures (retryable), StageAuth for 401/403 (permanent),
// StageProtocol for answers that break the protocol; a request too large
// for the server wraps ErrTooLarge. A cancelled ctx returns ctx.Err().
type Endpoint interface {
	Info(ctx context.Context) (EndpointInfo, error)
	Changes(ctx context.Context, req ChangesRequest) (ChangesPage, error)
	// RevsDiff returns, per document, the revisions this endpoint lacks.
	RevsDiff(ctx context.Context, revs map[string][]string) (map[string][]string, error)
	// BulkGet returns the named revisions with their _revisions history
	// (revs=true), in request order; a revision the endpoint lacks is
	// left out.
	BulkGet(ctx context.Context, revs []DocRev) ([]json.RawMessage, error)
	// BulkDocs writes documents with new_edits=false: each keeps its _rev
	// and _revisions, and no conflict is ever reported.
	BulkDocs(ctx context.Context, docs []json.RawMessage) ([]BulkDocResult, error)
	// GetLocal reads a _local document by its id without the "_local/"
	// prefix; ErrNotFound if absent.
	GetLocal(ctx context.Context, id string) (json.RawMessage, error)
	// PutLocal writes a _local document (last write wins).
	PutLocal(ctx context.Context, id string, doc json.RawMessage) error
}
