//go:build !js || upstreams

package main

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/livesync-go/livesync-go/wasm/workers/d1kv"
)

// cronBatchesLimit is the pages an upstream replication of a cron run
// has in flight: below Workers' six simultaneous connections per
// invocation.
const cronBatchesLimit = 4

// cronReserve is the part of a cap kept for stopping: a run winds down
// when it has used all but this much of its D1 queries or subrequests,
// and stopping, settling and saving every database takes a few queries.
func cronReserve(limit int) int { return max(10, limit/10) }

// cronMeter counts a run's D1 queries (it is the run's d1kv.Exec) and
// its upstream requests (client). Past cap minus the reserve it winds
// the run down (the next run goes on) and refuses what the run's work
// still asks, so that the reserve is left for stopping: once the
// bridge has stopped, the database's closing (closing set) may use it,
// up to the cap, which a run never exceeds. A refused read or write
// fails that work's store transaction as a whole, which the next run
// does again.
type cronMeter struct {
	x                 d1kv.Exec
	queryCap, reqCap  int
	queries, requests atomic.Int64
	closing           atomic.Bool
	windDown          context.CancelCauseFunc
	client            *http.Client
}

var _ d1kv.Exec = (*cronMeter)(nil)

func newCronMeter(x d1kv.Exec, queries, requests int, windDown context.CancelCauseFunc) *cronMeter {
	m := &cronMeter{x: x, queryCap: queries, reqCap: requests, windDown: windDown}
	m.client = &http.Client{Transport: meteredTransport{m: m, next: upstreamTransport()}}
	return m
}

// take counts one more use of a cap and reports whether it is allowed.
func (m *cronMeter) take(n *atomic.Int64, limit int, cause error) error {
	used := int(n.Add(1))
	stop := limit - cronReserve(limit)
	if used > stop {
		m.windDown(cause)
	}
	if used > limit || used > stop && !m.closing.Load() {
		n.Add(-1)
		return fmt.Errorf("cron: the run's %s of %d is used up; the next run goes on", cause, limit)
	}
	return nil
}

func (m *cronMeter) Query(ctx context.Context, sql string, args ...any) ([]d1kv.Row, error) {
	if err := m.take(&m.queries, m.queryCap, errQueryBudget); err != nil {
		return nil, err
	}
	return m.x.Query(ctx, sql, args...)
}

func (m *cronMeter) Batch(ctx context.Context, stmts []d1kv.Stmt) error {
	if err := m.take(&m.queries, m.queryCap, errQueryBudget); err != nil {
		return err
	}
	return m.x.Batch(ctx, stmts)
}

// meteredTransport counts the requests sent upstream.
type meteredTransport struct {
	m    *cronMeter
	next http.RoundTripper
}

func (t meteredTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := t.m.take(&t.m.requests, t.m.reqCap, errSubrequestBudget); err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	return t.next.RoundTrip(r)
}
