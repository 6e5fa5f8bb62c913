package vault

import (
	"context"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// Remote is one place a vault syncs with: a CouchDB database, a journal
// bucket, a peer. It is a transport only; the vault runs the handshake,
// replication, chunk retrieval and the hunt over it. Implementations live
// in the adapters (couchdb.Remote, minio.Remote) and are safe for
// concurrent use.
//
// A remote replicates through exactly one of Endpoint (the CouchDB
// replication protocol) and Objects (a journal of packs); the other is
// nil.
type Remote interface {
	// ID names the remote without credentials (its URL). It keys what the
	// replica remembers of the remote.
	ID() string
	// Negotiate is the remote's side of the LiveSync handshake.
	Negotiate() negotiate.Port
	// ChunkRange is the chunk-format range this client announces in the
	// remote's milestone (negotiate.CouchDBChunkRange,
	// negotiate.JournalChunkRange).
	ChunkRange() negotiate.ChunkRange
	// Endpoint is the remote's replication endpoint, nil for a journal.
	Endpoint() engine.Endpoint
	// Objects is the remote's journal, nil for a replication endpoint.
	Objects() journalsync.Objects
	// Chunks returns the remote's source for fetching chunks by id,
	// decoding with codec (the vault's settings and the remote's salt), or
	// nil when the remote cannot fetch by id. A journal's chunks are
	// fetched through the pack index of the journal the vault keeps over
	// the replica (journalsync.Journal.ChunkSource), when the remote
	// allows it: see DirectFetcher.
	Chunks(codec *livesync.Codec) engine.ChunkSource
	// Reset deletes everything the remote holds (a database is destroyed
	// and created again, a bucket's objects under its prefix deleted), so
	// the next handshake writes a new salt.
	Reset(ctx context.Context) error
	// Close releases the remote's connections.
	Close() error
}

// DirectFetcher is implemented by journal remotes that say whether their
// chunks may be fetched by id (a bucket's direct_fetch). A journal
// remote without it allows fetch by id when Chunks returns a source.
type DirectFetcher interface {
	DirectFetch() bool
}
