package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/livesync-go/livesync-go/engine"
)

// watchedEndpoint marks the upstream live again when a request to it
// succeeds after the replicator reported a failure (its reconnection
// starts by reading the checkpoint), so /status does not show a backoff
// that is over while the feed waits for changes. After a failed request
// the next one first passes the identity gate: an upstream that came
// back reset is noticed before the replicator reads or writes anything
// on it.
type watchedEndpoint struct {
	engine.Endpoint
	u    *upstream
	gate *identityGate
}

// before passes the gate (nil: no gate).
func (w watchedEndpoint) before(ctx context.Context) error {
	if w.gate == nil {
		return nil
	}
	return w.gate.before(ctx)
}

func (w watchedEndpoint) ok(err error) {
	if w.gate != nil {
		w.gate.after(err)
	}
	if err != nil {
		return
	}
	w.u.mu.Lock()
	if w.u.state == StateBackoff {
		w.u.state = StateLive
	}
	w.u.lastOK = time.Now()
	w.u.mu.Unlock()
}

func (w watchedEndpoint) Info(ctx context.Context) (engine.EndpointInfo, error) {
	if err := w.before(ctx); err != nil {
		return engine.EndpointInfo{}, err
	}
	i, err := w.Endpoint.Info(ctx)
	w.ok(err)
	return i, err
}

func (w watchedEndpoint) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	if err := w.before(ctx); err != nil {
		return engine.ChangesPage{}, err
	}
	p, err := w.Endpoint.Changes(ctx, req)
	w.ok(err)
	return p, err
}

func (w watchedEndpoint) RevsDiff(ctx context.Context, revs map[string][]string) (map[string][]string, error) {
	if err := w.before(ctx); err != nil {
		return nil, err
	}
	m, err := w.Endpoint.RevsDiff(ctx, revs)
	w.ok(err)
	return m, err
}

func (w watchedEndpoint) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	if err := w.before(ctx); err != nil {
		return nil, err
	}
	d, err := w.Endpoint.BulkGet(ctx, revs)
	w.ok(err)
	return d, err
}

func (w watchedEndpoint) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	if err := w.before(ctx); err != nil {
		return nil, err
	}
	r, err := w.Endpoint.BulkDocs(ctx, docs)
	w.ok(err)
	return r, err
}

func (w watchedEndpoint) GetLocal(ctx context.Context, id string) (json.RawMessage, error) {
	if err := w.before(ctx); err != nil {
		return nil, err
	}
	d, err := w.Endpoint.GetLocal(ctx, id)
	if errors.Is(err, engine.ErrNotFound) {
		w.ok(nil) // an absent checkpoint is an answer
	} else {
		w.ok(err)
	}
	return d, err
}

func (w watchedEndpoint) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	if err := w.before(ctx); err != nil {
		return err
	}
	err := w.Endpoint.PutLocal(ctx, id, doc)
	w.ok(err)
	return err
}
