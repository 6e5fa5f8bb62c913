package engine

import "context"

// ChunkID is a chunk document id ("h:…" or "h:+…").
type ChunkID = string

// Chunk is a chunk in the local, plaintext form: Data is the piece exactly
// as stored in the leaf document (text, or base64 for binary files).
type Chunk struct {
	ID   ChunkID
	Data string
}

// FetchResult is a chunk source's answer to one request. Every requested
// id appears exactly once, either in Found or in Missing; an answer that
// breaks this rule is invalid and treated as such by the caller.
type FetchResult struct {
	// Found holds the chunks the source returned, in plaintext (the
	// source decrypts at its remote boundary). The caller owns the slice.
	Found []Chunk
	// Missing lists the ids the source answered it does not have. This is
	// a successful omission, not proof that no other source has them.
	Missing []ChunkID
}

// ChunkSource fetches chunks by id from one remote: a CouchDB database, a
// journal bucket with a pack index, or a peer. Implementations must be
// safe for concurrent use; throttling, retry and metrics are decorators
// around a ChunkSource, not part of it.
type ChunkSource interface {
	// FetchChunks asks for up to 100 ids (the caller never sends more, nor
	// the same id twice in one request). It returns an error for transport
	// and authentication failures; an error is never an omission. A
	// cancelled ctx returns ctx.Err() (possibly wrapped) and is never
	// retried by callers.
	FetchChunks(ctx context.Context, ids []ChunkID) (FetchResult, error)
	// CanFetchDirect reports whether the source supports fetch by id at
	// all (upstream: CouchDB, unless useOnlyLocalChunk). When false,
	// chunks from this remote arrive only through finite replication.
	CanFetchDirect() bool
	// ThrottleKey names the politeness domain of the source: host:port
	// for CouchDB, endpoint+bucket for S3, the peer id for P2P. Sources
	// that share a key share a throttle.
	ThrottleKey() string
}

// LocalChunks is what chunk retrieval needs from the local store.
type LocalChunks interface {
	// GetChunks reads chunks from the store itself, bypassing any cache.
	// Ids that are not stored are absent from the result; that is not an
	// error. A deleted chunk is absent.
	GetChunks(ctx context.Context, ids []ChunkID) (map[ChunkID]Chunk, error)
	// PutChunks persists fetched chunks. Chunks are content-addressed, so
	// writing one that exists is not an error.
	PutChunks(ctx context.Context, chunks []Chunk) error
}
