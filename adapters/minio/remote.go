package minio

import (
	"context"
	"net/url"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// Remote is a journal bucket as a vault remote: the journal's objects and
// the handshake's records.
type Remote struct {
	id     string
	b      *Bucket
	direct bool
}

var _ vault.Remote = (*Remote)(nil)

// RemoteOptions configure NewRemote.
type RemoteOptions struct {
	// ID names the remote in the vault's records; "" means BucketURL.
	ID string
	// DirectFetch lets readers fetch chunks by id through the journal's
	// pack index (journalsync.Config.DirectFetch); off, chunks arrive only
	// with the packs a pull receives, as upstream's journal replicator.
	DirectFetch bool
}

// NewRemote opens the bucket of cfg as a vault remote. It does not
// contact the server.
func NewRemote(cfg Config, o RemoteOptions) (*Remote, error) {
	b, err := New(cfg)
	if err != nil {
		return nil, err
	}
	id := o.ID
	if id == "" {
		id = BucketURL(cfg)
	}
	return &Remote{id: id, b: b, direct: o.DirectFetch}, nil
}

// BucketURL names cfg's bucket without credentials or options:
// s3://host[:port]/bucket[/prefix].
func BucketURL(cfg Config) string {
	host := cfg.Endpoint
	if i := strings.Index(host, "://"); i >= 0 {
		host = host[i+3:]
	}
	p := "/" + cfg.Bucket
	if cfg.Prefix != "" {
		p += "/" + cfg.Prefix
	}
	return (&url.URL{Scheme: "s3", Host: host, Path: p}).String()
}

// Bucket is the remote's bucket.
func (r *Remote) Bucket() *Bucket { return r.b }

// ID names the remote without credentials.
func (r *Remote) ID() string { return r.id }

// Negotiate is the bucket's side of the handshake (Bucket.Negotiate).
func (r *Remote) Negotiate() negotiate.Port { return r.b.Negotiate() }

// ChunkRange is negotiate.JournalChunkRange.
func (r *Remote) ChunkRange() negotiate.ChunkRange { return negotiate.JournalChunkRange }

// Endpoint is nil: a bucket is a journal.
func (r *Remote) Endpoint() engine.Endpoint { return nil }

// Objects is the bucket.
func (r *Remote) Objects() journalsync.Objects { return r.b }

// Chunks is nil: a bucket's chunks are fetched by id through the pack
// index of the vault's journal over it (journalsync.Journal.ChunkSource),
// when DirectFetch allows it.
func (r *Remote) Chunks(*livesync.Codec) engine.ChunkSource { return nil }

// DirectFetch reports RemoteOptions.DirectFetch: whether the vault's
// journal over this bucket may fetch chunks by id.
func (r *Remote) DirectFetch() bool { return r.direct }

// Reset deletes every object under the bucket's prefix.
func (r *Remote) Reset(ctx context.Context) error {
	_, err := r.b.Reset(ctx)
	return err
}

// Close does nothing: the bucket keeps no connection of its own.
func (r *Remote) Close() error { return nil }
