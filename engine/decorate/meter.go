package decorate

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journalsync"
)

// Meter counts the requests that pass through the Metered decorators
// sharing it (usually the sources of one throttle key), and optionally
// limits how many are in flight at once. Its zero value counts and
// limits nothing but requests, ids and errors; set the fields before the
// first request. Safe for concurrent use.
type Meter struct {
	// Window, if set, is the rate window: Stats.MaxInWindow is the most
	// requests seen starting within one Window (slightly shortened, so
	// that scheduling jitter does not count one start in two windows a
	// scheduler kept apart).
	Window time.Duration
	// Limit, if above 0, is the most requests let through at once;
	// further ones wait for a slot or their context.
	Limit int

	once  sync.Once
	slots chan struct{}

	mu     sync.Mutex
	stats  MeterStats
	starts []time.Time
}

// MeterStats are a Meter's counters and gauges.
type MeterStats struct {
	Requests uint64 // requests started
	IDs      uint64 // chunk ids (or documents) asked for
	Errors   uint64 // requests that failed while their context was live
	InFlight int    // requests on the wire now
	// MaxInFlight and MaxInWindow are the most requests seen on the wire
	// at once and starting within one Window: the proof that the
	// limits held.
	MaxInFlight int
	MaxInWindow int
}

// windowSlack shortens the metered window by 1/windowSlack.
const windowSlack = 100

// Stats returns the meter's counters.
func (m *Meter) Stats() MeterStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// begin waits for a slot (when limited) and counts a request of n ids.
func (m *Meter) begin(ctx context.Context, n int) error {
	if m.Limit > 0 {
		m.once.Do(func() { m.slots = make(chan struct{}, m.Limit) })
		select {
		case m.slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &m.stats
	s.Requests++
	s.IDs += uint64(n)
	s.InFlight++
	s.MaxInFlight = max(s.MaxInFlight, s.InFlight)
	if m.Window > 0 {
		w := m.Window - m.Window/windowSlack
		i := 0
		for i < len(m.starts) && !m.starts[i].After(now.Add(-w)) {
			i++
		}
		m.starts = append(m.starts[i:], now)
		s.MaxInWindow = max(s.MaxInWindow, len(m.starts))
	}
	return nil
}

func (m *Meter) end(ctx context.Context, err error) {
	m.mu.Lock()
	m.stats.InFlight--
	if err != nil && ctx.Err() == nil {
		m.stats.Errors++
	}
	m.mu.Unlock()
	if m.Limit > 0 {
		<-m.slots
	}
}

// metered runs one request of n ids through m.
func metered[T any](ctx context.Context, m *Meter, n int, f func() (T, error)) (T, error) {
	if err := m.begin(ctx, n); err != nil {
		var zero T
		return zero, err
	}
	v, err := f()
	m.end(ctx, err)
	return v, err
}

// Metered counts src's requests in m.
func Metered(src engine.ChunkSource, m *Meter) engine.ChunkSource {
	return meteredSource{ChunkSource: src, m: m}
}

type meteredSource struct {
	engine.ChunkSource
	m *Meter
}

func (s meteredSource) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	return metered(ctx, s.m, len(ids), func() (engine.FetchResult, error) { return s.ChunkSource.FetchChunks(ctx, ids) })
}

// MeteredObjects counts a journal's object requests in m.
func MeteredObjects(o journalsync.Objects, m *Meter) journalsync.Objects {
	return meteredObjects{Objects: o, m: m}
}

type meteredObjects struct {
	journalsync.Objects
	m *Meter
}

func (o meteredObjects) List(ctx context.Context, after string) ([]string, error) {
	return metered(ctx, o.m, 0, func() ([]string, error) { return o.Objects.List(ctx, after) })
}

func (o meteredObjects) Get(ctx context.Context, key string) ([]byte, error) {
	return metered(ctx, o.m, 1, func() ([]byte, error) { return o.Objects.Get(ctx, key) })
}

func (o meteredObjects) Put(ctx context.Context, key string, body []byte) error {
	_, err := metered(ctx, o.m, 1, func() (struct{}, error) { return struct{}{}, o.Objects.Put(ctx, key, body) })
	return err
}

// MeteredEndpoint counts an endpoint's requests in m (ids: the documents
// or revisions a request names).
func MeteredEndpoint(ep engine.Endpoint, m *Meter) engine.Endpoint {
	return meteredEndpoint{ep: ep, m: m}
}

type meteredEndpoint struct {
	ep engine.Endpoint
	m  *Meter
}

func (e meteredEndpoint) Info(ctx context.Context) (engine.EndpointInfo, error) {
	return metered(ctx, e.m, 0, func() (engine.EndpointInfo, error) { return e.ep.Info(ctx) })
}

func (e meteredEndpoint) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	return metered(ctx, e.m, 0, func() (engine.ChangesPage, error) { return e.ep.Changes(ctx, req) })
}

func (e meteredEndpoint) RevsDiff(ctx context.Context, revs map[string][]string) (map[string][]string, error) {
	return metered(ctx, e.m, len(revs), func() (map[string][]string, error) { return e.ep.RevsDiff(ctx, revs) })
}

func (e meteredEndpoint) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	return metered(ctx, e.m, len(revs), func() ([]json.RawMessage, error) { return e.ep.BulkGet(ctx, revs) })
}

func (e meteredEndpoint) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	return metered(ctx, e.m, len(docs), func() ([]engine.BulkDocResult, error) { return e.ep.BulkDocs(ctx, docs) })
}

func (e meteredEndpoint) GetLocal(ctx context.Context, id string) (json.RawMessage, error) {
	return metered(ctx, e.m, 1, func() (json.RawMessage, error) { return e.ep.GetLocal(ctx, id) })
}

func (e meteredEndpoint) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	_, err := metered(ctx, e.m, 1, func() (struct{}, error) { return struct{}{}, e.ep.PutLocal(ctx, id, doc) })
	return err
}
