package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/decorate"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// How a peer's chunks become the database's documents. A plain chunk's
// remote form is the same on every replica. An end-to-end encrypted
// chunk ("h:+" id) is encrypted with a key derived from the vault
// passphrase and the salt of the replica that serves it, and every
// device serving a group has a salt of its own (the handshake records it
// serves), so the peer's form is the database's only when their salts
// are the same. Otherwise the relay re-encrypts with the database's salt
// when it has the vault passphrase, and cannot use the chunk when it has
// not: storing it would give the database a chunk its clients cannot
// decrypt.

// peerSaltTTL is how long a peer's salt is trusted before it is read
// again (a peer's group records change only when its vault is reset).
const peerSaltTTL = 30 * time.Second

var (
	errNoChunkRev  = errors.New("the peer sent no revision and the chunk is encrypted: the relay needs the vault passphrase to compute it")
	errNoRelaySalt = errors.New("the database has no vault salt yet: an encrypted chunk from a peer cannot be stored")
	errNoPeerSalt  = errors.New("the peer serves no sync parameters: its encrypted chunks cannot be matched to the database's salt")
	errOtherSalt   = errors.New("the peer's vault salt is not the database's, and without the vault passphrase the relay cannot re-encrypt its chunks (set passphrase_env or passphrase_file for the database)")
)

// chunkForm is how one request's encrypted chunks are stored.
type chunkForm struct {
	forward  bool            // the peer's remote form is the database's (same salt)
	from, to *livesync.Codec // re-encrypt: decode with from (the peer's salt), encode with to (the database's)
	relay    *livesync.Codec // the database's codec; nil without the passphrase
	why      error           // neither: why the chunks cannot be used
}

// form compares the peer's salt with the database's.
func (s *peerSource) form(ctx context.Context) *chunkForm {
	codec, csalt := s.codec()
	f := &chunkForm{relay: codec}
	rs, err := dbSalt(ctx, s.db)
	if err != nil {
		f.why = err
		return f
	}
	ps, err := s.peerSalt(ctx)
	switch {
	case err != nil:
		f.why = err
	case rs == nil:
		f.why = errNoRelaySalt
	case ps == nil:
		f.why = errNoPeerSalt
	case bytes.Equal(rs, ps):
		f.forward = true
	case codec == nil || !bytes.Equal(csalt, rs):
		f.why = errOtherSalt
	default:
		from, err := livesync.New(livesync.Config{Settings: codec.Settings(), Salt: ps})
		if err != nil {
			f.why = err
		} else {
			f.from, f.to = from, codec
		}
	}
	return f
}

// dbSalt reads the database's salt (nil when it has none).
func dbSalt(ctx context.Context, db store.LocalReader) ([]byte, error) {
	raw, err := store.LiveLocal(ctx, db, negotiate.SyncParametersLocalID)
	if raw == nil || err != nil {
		return nil, err
	}
	return negotiate.SaltOf(raw)
}

// peerSalt reads the salt of the group records the peer serves, at most
// every peerSaltTTL.
func (s *peerSource) peerSalt(ctx context.Context) ([]byte, error) {
	s.saltMu.Lock()
	defer s.saltMu.Unlock()
	if !s.saltRead.IsZero() && time.Since(s.saltRead) < peerSaltTTL {
		return s.salt, nil
	}
	raw, _, err := s.rem.Negotiate().Read(ctx, negotiate.RecordSyncParameters)
	var salt []byte
	switch {
	case errors.Is(err, engine.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("reading the peer's sync parameters: %w", err)
	default:
		if salt, err = negotiate.SaltOf(raw); err != nil {
			return nil, fmt.Errorf("the peer's sync parameters: %w", err)
		}
	}
	s.salt, s.saltRead = salt, time.Now()
	return salt, nil
}

// chunkDoc is the chunk document of c in the database's remote form:
// {_id, _rev, data, type: "leaf"}, with "e_": true for an end-to-end
// encrypted chunk (an "h:+" id: the remote form encrypts exactly those),
// re-encrypted when f says so. The revision is the peer's; a peer that
// sent none gets the revision LiveSync gives a new chunk, store.ChunkRev
// over the plaintext (as the bridge does for a bucket's chunks), which
// needs a codec that decodes the chunk. f is nil for a plain chunk.
func chunkDoc(c p2p.RawChunk, f *chunkForm) (json.RawMessage, error) {
	rev := c.Rev
	if rev != "" && !validRev(rev) {
		return nil, fmt.Errorf("the peer sent a malformed revision: %w", engine.ErrMalformed)
	}
	d := livesync.ChunkDoc(livesync.Chunk{ID: c.ID, Data: c.Data})
	e2ee := decorate.IsE2EEChunkID(c.ID)
	if e2ee {
		d["e_"] = json.RawMessage("true")
	}
	var decoder *livesync.Codec // decodes d when the revision must be computed
	switch {
	case !e2ee:
		decoder = plainChunkCodec
	case f == nil:
		return nil, errNoPeerSalt
	case f.forward:
		decoder = f.relay
	case f.from != nil:
		plain, err := plaintext(f.from, d)
		if err != nil {
			return nil, err
		}
		if rev == "" {
			rev = store.ChunkRev(c.ID, plain)
		}
		if d, err = f.to.EncodeRemote(livesync.ChunkDoc(livesync.Chunk{ID: c.ID, Data: plain})); err != nil {
			return nil, err
		}
	default:
		return nil, f.why
	}
	if rev == "" {
		if decoder == nil {
			return nil, errNoChunkRev
		}
		plain, err := plaintext(decoder, d)
		if err != nil {
			return nil, err
		}
		rev = store.ChunkRev(c.ID, plain)
	}
	d["_rev"], _ = json.Marshal(rev)
	return d.MarshalJSON()
}

// plainChunkCodec decodes what a plain vault's remote form holds
// (compressed data).
var plainChunkCodec = func() *livesync.Codec {
	c, err := livesync.New(livesync.Config{})
	if err != nil {
		panic(err) // a codec without settings always builds
	}
	return c
}()

// plaintext decodes the chunk document d with c.
func plaintext(c *livesync.Codec, d livesync.Doc) (string, error) {
	dec, err := c.DecodeRemote(d)
	if err != nil {
		return "", err
	}
	ch, err := livesync.ParseChunk(dec)
	if err != nil {
		return "", err
	}
	return ch.Data, nil
}
