package decorate

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
)

// fakeSource has the chunks in have.
type fakeSource struct {
	key    string
	have   map[string]string
	fl     *flaky
	off    bool // CanFetchDirect false
	asked  [][]engine.ChunkID
	mu     sync.Mutex
	block  chan struct{} // if set, FetchChunks waits for it
	inside chan struct{} // if set, told when a request starts
}

func (s *fakeSource) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	s.mu.Lock()
	s.asked = append(s.asked, slices.Clone(ids))
	s.mu.Unlock()
	if s.inside != nil {
		s.inside <- struct{}{}
	}
	if s.block != nil {
		select {
		case <-s.block:
		case <-ctx.Done():
			return engine.FetchResult{}, ctx.Err()
		}
	}
	if s.fl != nil {
		if err := s.fl.call("fetch"); err != nil {
			return engine.FetchResult{}, err
		}
	}
	var r engine.FetchResult
	for _, id := range ids {
		if d, ok := s.have[id]; ok {
			r.Found = append(r.Found, engine.Chunk{ID: id, Data: d})
		} else {
			r.Missing = append(r.Missing, id)
		}
	}
	return r, nil
}

func (s *fakeSource) CanFetchDirect() bool { return !s.off }
func (s *fakeSource) ThrottleKey() string  { return s.key }

// fakeEndpoint answers every request with empty results after its
// flaky failures; BulkGet returns docs, BulkDocs keeps what it got.
type fakeEndpoint struct {
	fl      *flaky
	docs    []json.RawMessage
	written []json.RawMessage
}

func (e *fakeEndpoint) Info(ctx context.Context) (engine.EndpointInfo, error) {
	return engine.EndpointInfo{Name: "x"}, e.fl.call("info")
}

func (e *fakeEndpoint) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	return engine.ChangesPage{}, e.fl.call("changes")
}

func (e *fakeEndpoint) RevsDiff(ctx context.Context, revs map[string][]string) (map[string][]string, error) {
	return nil, e.fl.call("revsdiff")
}

func (e *fakeEndpoint) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	if err := e.fl.call("bulkget"); err != nil {
		return nil, err
	}
	return slices.Clone(e.docs), nil
}

func (e *fakeEndpoint) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	if err := e.fl.call("bulkdocs"); err != nil {
		return nil, err
	}
	e.written = append(e.written, docs...)
	return nil, nil
}

func (e *fakeEndpoint) GetLocal(ctx context.Context, id string) (json.RawMessage, error) {
	return json.RawMessage(`{}`), e.fl.call("getlocal")
}

func (e *fakeEndpoint) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	return e.fl.call("putlocal")
}

// exerciseEndpoint calls every method of ep once and fails on an error.
func exerciseEndpoint(t *testing.T, ep engine.Endpoint) {
	t.Helper()
	ctx := t.Context()
	errs := []error{}
	_, err := ep.Info(ctx)
	errs = append(errs, err)
	_, err = ep.Changes(ctx, engine.ChangesRequest{})
	errs = append(errs, err)
	_, err = ep.RevsDiff(ctx, map[string][]string{"a": {"1-a"}})
	errs = append(errs, err)
	_, err = ep.BulkGet(ctx, []engine.DocRev{{ID: "a", Rev: "1-a"}})
	errs = append(errs, err)
	_, err = ep.BulkDocs(ctx, []json.RawMessage{json.RawMessage(`{"_id":"a"}`)})
	errs = append(errs, err)
	_, err = ep.GetLocal(ctx, "x")
	errs = append(errs, err)
	errs = append(errs, ep.PutLocal(ctx, "x", json.RawMessage(`{}`)))
	for i, err := range errs {
		if err != nil {
			t.Fatalf("method %d: %v", i, err)
		}
	}
}
