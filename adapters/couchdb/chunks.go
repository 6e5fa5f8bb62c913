package couchdb

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// MaxChunkKeys is the most ids FetchChunks sends in one request
// (upstream's ChunkFetcher BATCH_SIZE).
const MaxChunkKeys = 100

// ChunkSource is the engine.ChunkSource of a DB: chunks fetched by id with
// POST _all_docs?include_docs=true, decoded to plaintext by a codec.
type ChunkSource struct {
	db    *DB
	codec *livesync.Codec
}

var _ engine.ChunkSource = (*ChunkSource)(nil)

// ChunkSource returns the chunk source of d. codec decodes the remote form
// (decrypts E2EE chunks, decompresses); nil means the remote stores
// chunks in plaintext.
func (d *DB) ChunkSource(codec *livesync.Codec) *ChunkSource {
	return &ChunkSource{db: d, codec: codec}
}

// FetchChunks asks for up to MaxChunkKeys ids. Rows with an error
// (not_found) and rows without a document (deleted) are Missing, as
// upstream's fetchRemoteChunks drops them; ids the server did not answer
// at all are Missing too, so every id appears exactly once.
func (s *ChunkSource) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	if len(ids) > MaxChunkKeys {
		return engine.FetchResult{}, fmt.Errorf("couchdb: fetch chunks: %d ids, at most %d per request", len(ids), MaxChunkKeys)
	}
	if len(ids) == 0 {
		return engine.FetchResult{}, nil
	}
	var a struct {
		Rows []struct {
			Key   string          `json:"key"`
			Error string          `json:"error"`
			Doc   json.RawMessage `json:"doc"`
		} `json:"rows"`
	}
	q := url.Values{"include_docs": {"true"}}
	if err := s.db.do(ctx, "fetch chunks", "", http.MethodPost, s.db.dbURL("/_all_docs", q),
		map[string]any{"keys": ids}, &a); err != nil {
		return engine.FetchResult{}, err
	}
	found := map[string]engine.Chunk{}
	for _, r := range a.Rows {
		if r.Error != "" || len(r.Doc) == 0 || string(r.Doc) == "null" {
			continue
		}
		doc, err := livesync.ParseDoc(r.Doc)
		if err != nil {
			return engine.FetchResult{}, &engine.Error{Op: "fetch chunks", DocID: r.Key, Stage: engine.StageProtocol, Err: err}
		}
		if doc.Deleted() {
			continue
		}
		if s.codec != nil {
			if doc, err = s.codec.DecodeRemote(doc); err != nil {
				return engine.FetchResult{}, err
			}
		}
		c, err := livesync.ParseChunk(doc)
		if err != nil {
			return engine.FetchResult{}, err
		}
		found[r.Key] = c
	}
	var res engine.FetchResult
	for _, id := range ids {
		if c, ok := found[id]; ok && c.ID == id {
			res.Found = append(res.Found, c)
			delete(found, id)
		} else {
			res.Missing = append(res.Missing, id)
		}
	}
	return res, nil
}

// CanFetchDirect is true unless Config.LocalChunksOnly.
func (s *ChunkSource) CanFetchDirect() bool { return !s.db.cfg.LocalChunksOnly }

// ThrottleKey is the server's host:port.
func (s *ChunkSource) ThrottleKey() string { return s.db.ThrottleKey() }

// DocsByID reads the current revision of each document in ids with POST
// _all_docs?include_docs=true (at most MaxChunkKeys ids per call), and
// returns them exactly as the server stores them: the remote form, _rev
// included, nothing decoded. Ids the server does not have, and deleted
// documents, are absent from the map. It is the raw counterpart of
// ChunkSource.FetchChunks, for a relay that keeps the remote form of a
// vault (chunks still encrypted) and must not decode it.
func (d *DB) DocsByID(ctx context.Context, ids []string) (map[string]json.RawMessage, error) {
	if len(ids) > MaxChunkKeys {
		return nil, fmt.Errorf("couchdb: docs by id: %d ids, at most %d per request", len(ids), MaxChunkKeys)
	}
	out := map[string]json.RawMessage{}
	if len(ids) == 0 {
		return out, nil
	}
	var a struct {
		Rows []struct {
			Key   string `json:"key"`
			Error string `json:"error"`
			Value struct {
				Deleted bool `json:"deleted"`
			} `json:"value"`
			Doc json.RawMessage `json:"doc"`
		} `json:"rows"`
	}
	q := url.Values{"include_docs": {"true"}}
	if err := d.do(ctx, "docs by id", "", http.MethodPost, d.dbURL("/_all_docs", q),
		map[string]any{"keys": ids}, &a); err != nil {
		return nil, err
	}
	for _, r := range a.Rows {
		if r.Error != "" || r.Value.Deleted || len(r.Doc) == 0 || string(r.Doc) == "null" {
			continue
		}
		var head struct {
			ID      string `json:"_id"`
			Deleted bool   `json:"_deleted"`
		}
		if err := json.Unmarshal(r.Doc, &head); err != nil {
			return nil, &engine.Error{Op: "docs by id", DocID: r.Key, Stage: engine.StageProtocol,
				Err: fmt.Errorf("couchdb: a row's doc is not a JSON object: %w", engine.ErrMalformed)}
		}
		if head.ID != r.Key || head.Deleted {
			continue
		}
		out[r.Key] = r.Doc
	}
	return out, nil
}
