package couchdb

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// keysBatch is the most ids one _all_docs?keys request names.
const keysBatch = 2000

// allDocsRow is one row of an _all_docs answer.
type allDocsRow struct {
	ID    string `json:"id"`
	Key   any    `json:"key"`
	Error string `json:"error"`
	Value *struct {
		Rev     string `json:"rev"`
		Deleted bool   `json:"deleted"`
	} `json:"value"`
	Doc json.RawMessage `json:"doc"`
}

// docState is what _all_docs says of one id: absent, or its winning
// revision and whether it is deleted.
type docState struct {
	present, deleted bool
	rev              string
	doc              json.RawMessage
}

// lookup reads the winning revision of each id (and its document with
// docs) with one POST _all_docs?keys per keysBatch ids.
func (s *Store) lookup(c context.Context, op string, ids []string, docs bool) (map[string]docState, error) {
	var q url.Values
	if docs {
		q = url.Values{"include_docs": {"true"}}
	}
	return s.lookupQuery(c, op, ids, q)
}

// lookupQuery is lookup with the query q of the _all_docs requests.
func (s *Store) lookupQuery(c context.Context, op string, ids []string, q url.Values) (map[string]docState, error) {
	out := make(map[string]docState, len(ids))
	for start := 0; start < len(ids); start += keysBatch {
		part := ids[start:min(start+keysBatch, len(ids))]
		var a struct {
			Rows []allDocsRow `json:"rows"`
		}
		if err := s.db.do(c, op, "", http.MethodPost, s.db.dbURL("/_all_docs", q), map[string]any{"keys": part}, &a); err != nil {
			return nil, err
		}
		for _, r := range a.Rows {
			if r.Error != "" || r.Value == nil || r.ID == "" {
				continue // not_found
			}
			st := docState{present: true, deleted: r.Value.Deleted, rev: r.Value.Rev}
			if len(r.Doc) > 0 && string(r.Doc) != "null" {
				st.doc = r.Doc
			}
			out[r.ID] = st
		}
	}
	return out, nil
}

// GetChunks reads chunks with one POST _all_docs?keys&include_docs per
// batch of ids. Absent and deleted chunks are not in the map.
func (s *Store) GetChunks(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error) {
	out := make(map[engine.ChunkID]engine.Chunk, len(ids))
	err := s.call(ctx, "get chunks", func(c context.Context) error {
		states, err := s.lookup(c, "get chunks", ids, true)
		if err != nil {
			return err
		}
		for id, st := range states {
			if st.deleted || st.doc == nil {
				continue
			}
			var body struct {
				Data *string `json:"data"`
			}
			if json.Unmarshal(st.doc, &body) != nil || body.Data == nil {
				return &engine.Error{Op: "get chunks", DocID: id, Stage: engine.StageDecode,
					Err: fmt.Errorf("couchdb: not a chunk document: %w", engine.ErrMalformed)}
			}
			out[id] = engine.Chunk{ID: id, Data: *body.Data}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PutChunks writes the chunks that are absent or deleted (see
// putChunkDocs); chunks already there are left as they are.
func (s *Store) PutChunks(ctx context.Context, chunks []engine.Chunk) error {
	for _, ch := range chunks {
		if err := checkChunkID(ch.ID); err != nil {
			return err
		}
	}
	return s.call(ctx, "put chunks", func(c context.Context) error {
		_, err := s.putChunkDocs(c, chunks)
		return err
	})
}

// checkChunkID refuses an id the store cannot keep.
func checkChunkID(id string) error {
	b, err := json.Marshal(map[string]string{"_id": id})
	if err != nil {
		return fmt.Errorf("%w: %v", store.ErrInvalid, err)
	}
	_, err = store.CheckDoc(b, false)
	return err
}

// putChunkDocs writes chunk documents {_id, data, type:"leaf"}: an absent
// chunk with the plug-in's first revision store.ChunkRev (new_edits=false,
// so the same chunk has the same revision wherever it was made and two
// writers make one revision), a deleted one as a new edit on top of its
// tombstone. It returns each chunk's new revision, "" for one that was
// already there (a conflict for Put) or revived meanwhile by another
// writer. One _all_docs and at most two _bulk_docs requests.
func (s *Store) putChunkDocs(c context.Context, chunks []engine.Chunk) ([]string, error) {
	ids := make([]string, len(chunks))
	for i, ch := range chunks {
		ids[i] = ch.ID
	}
	states, err := s.lookup(c, "put chunks", ids, false)
	if err != nil {
		return nil, err
	}
	revs := make([]string, len(chunks))
	var fresh, revive []json.RawMessage
	var reviveIdx []int
	for i, ch := range chunks {
		st := states[ch.ID]
		switch {
		case !st.present:
			rev := store.ChunkRev(ch.ID, ch.Data)
			doc, _ := json.Marshal(map[string]any{"_id": ch.ID, "_rev": rev,
				"_revisions": map[string]any{"start": 1, "ids": []string{strings.TrimPrefix(rev, "1-")}},
				"data":       ch.Data, "type": "leaf"})
			fresh = append(fresh, doc)
			revs[i] = rev
		case st.deleted:
			doc, _ := json.Marshal(map[string]any{"_id": ch.ID, "_rev": st.rev, "data": ch.Data, "type": "leaf"})
			revive = append(revive, doc)
			reviveIdx = append(reviveIdx, i)
		}
	}
	if len(fresh) > 0 {
		rows, err := s.postBulk(c, "put chunks", fresh, false)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if r.Error != "" {
				return nil, &engine.Error{Op: "put chunks", DocID: r.ID, Stage: engine.StageProtocol,
					Err: fmt.Errorf("couchdb: chunk refused: %s: %s", r.Error, r.Reason)}
			}
		}
	}
	if len(revive) > 0 {
		rows, err := s.postBulk(c, "put chunks", revive, true)
		if err != nil {
			return nil, err
		}
		if len(rows) != len(revive) {
			return nil, &engine.Error{Op: "put chunks", Stage: engine.StageProtocol,
				Err: fmt.Errorf("couchdb: %d results for %d documents: %w", len(rows), len(revive), engine.ErrMalformed)}
		}
		for k, i := range reviveIdx {
			switch r := rows[k]; {
			case r.Error == "":
				revs[i] = r.Rev
			case r.Error == "conflict":
				// Revived by another writer meanwhile: it is there.
			default:
				return nil, &engine.Error{Op: "put chunks", DocID: r.ID, Stage: engine.StageProtocol,
					Err: fmt.Errorf("couchdb: chunk refused: %s: %s", r.Error, r.Reason)}
			}
		}
	}
	return revs, nil
}
