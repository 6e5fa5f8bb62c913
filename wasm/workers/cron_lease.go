//go:build !js || upstreams

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/wasm/workers/d1kv"
)

// The cron task keeps its own rows in d1kv's livesync_kv table under
// cronDB, a name no CouchDB database can have (they start with a
// letter), so no client reaches them and no store's commit version
// guards them:
//
//	(cronDB, leaseBucket, db)  the lease of database db: {"holder","until"}
//	(cronDB, stateBucket, db)  the hunt's State after db's last run
//
// Keys and values are TEXT.
const (
	cronDB      = "_livesync_cron"
	leaseBucket = 0
	stateBucket = 1
)

// leaseValue is a lease row: who holds it and until when (Unix ms).
type leaseValue struct {
	Holder string `json:"holder"`
	Until  int64  `json:"until"`
}

// lease is one run's hold on a database: while it lasts no other run
// (another isolate's cron event) bridges that database, so the hunt's
// per-source limits are the only ones in force.
type lease struct {
	x      d1kv.Exec
	db     string
	holder string
	value  string // the row as this run last wrote it
	until  time.Time
}

// newHolder names a run.
func newHolder() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// errLeaseHeld: another run holds the database's lease.
var errLeaseHeld = errors.New("another cron run holds the database's lease")

// takeLease takes the lease of db for ttl, or renews it when holder has
// it, by compare-and-swap: it reads the row and writes the new one only
// if the row is still what it read. errLeaseHeld when another run holds
// it and its time has not run out, or won the race to take it.
func takeLease(ctx context.Context, x d1kv.Exec, db, holder string, now time.Time, ttl time.Duration) (*lease, error) {
	old, found, err := readCronRow(ctx, x, leaseBucket, db)
	if err != nil {
		return nil, err
	}
	if found {
		var cur leaseValue
		if json.Unmarshal([]byte(old), &cur) == nil && cur.Holder != holder && cur.Until > now.UnixMilli() {
			return nil, fmt.Errorf("%w (until %s)", errLeaseHeld, time.UnixMilli(cur.Until).UTC().Format(time.RFC3339))
		}
	} else {
		old = "" // a row never holds "": the swap below then fails if one appeared
	}
	until := now.Add(ttl)
	nv, _ := json.Marshal(leaseValue{Holder: holder, Until: until.UnixMilli()})
	err = x.Batch(ctx, []d1kv.Stmt{{
		SQL: `INSERT INTO livesync_kv (db, b, k, v) VALUES (?1, ?2, ?3, ?4)
			ON CONFLICT (db, b, k) DO UPDATE SET v = CASE WHEN livesync_kv.v = ?5 THEN excluded.v ELSE NULL END`,
		Args: []any{cronDB, int64(leaseBucket), db, string(nv), old},
	}})
	if err != nil {
		// The swap fails (NOT NULL) when the row changed since it was
		// read: another run took the lease first.
		cur, found2, rerr := readCronRow(ctx, x, leaseBucket, db)
		if rerr == nil && found2 && cur != old {
			return nil, errLeaseHeld
		}
		return nil, fmt.Errorf("taking the cron lease: %w", err)
	}
	return &lease{x: x, db: db, holder: holder, value: string(nv), until: until}, nil
}

// renew extends the lease to now+ttl if this run still holds it.
func (l *lease) renew(ctx context.Context, now time.Time, ttl time.Duration) error {
	nl, err := takeLease(ctx, l.x, l.db, l.holder, now, ttl)
	if err != nil {
		return err
	}
	l.value, l.until = nl.value, nl.until
	return nil
}

// release saves the hunt's state st (when not nil) and gives the lease
// up, in one batch that writes nothing unless the lease is still this
// run's: a run that outlived its lease leaves the state to the run that
// took it over.
func (l *lease) release(ctx context.Context, st *hunt.State) error {
	var stmts []d1kv.Stmt
	if st != nil {
		raw, err := json.Marshal(st)
		if err != nil {
			return err
		}
		if len(raw) > d1kv.MaxRowBytes/2 {
			// A state this large (100,000 documents in backoff) is not
			// worth a row near D1's limit: the next run starts afresh.
			raw = []byte("{}")
		}
		stmts = append(stmts, d1kv.Stmt{
			SQL: `INSERT INTO livesync_kv (db, b, k, v) SELECT ?1, ?2, ?3, ?4
				WHERE EXISTS (SELECT 1 FROM livesync_kv WHERE db = ?1 AND b = ?5 AND k = ?3 AND v = ?6)
				ON CONFLICT (db, b, k) DO UPDATE SET v = excluded.v`,
			Args: []any{cronDB, int64(stateBucket), l.db, string(raw), int64(leaseBucket), l.value},
		})
	}
	stmts = append(stmts, d1kv.Stmt{
		SQL:  `DELETE FROM livesync_kv WHERE db = ?1 AND b = ?2 AND k = ?3 AND v = ?4`,
		Args: []any{cronDB, int64(leaseBucket), l.db, l.value},
	})
	return l.x.Batch(ctx, stmts)
}

// loadHuntState reads the hunt's state of db's last run; an empty State
// when there is none or it does not parse (a fresh start is safe: the
// limits only begin again).
func loadHuntState(ctx context.Context, x d1kv.Exec, db string) (hunt.State, error) {
	raw, found, err := readCronRow(ctx, x, stateBucket, db)
	if err != nil || !found {
		return hunt.State{}, err
	}
	var st hunt.State
	if json.Unmarshal([]byte(raw), &st) != nil {
		return hunt.State{}, nil
	}
	return st, nil
}

// readCronRow reads one of the cron task's rows.
func readCronRow(ctx context.Context, x d1kv.Exec, bucket int, db string) (string, bool, error) {
	rows, err := x.Query(ctx, `SELECT v FROM livesync_kv WHERE db = ?1 AND b = ?2 AND k = ?3`, cronDB, int64(bucket), db)
	if err != nil {
		return "", false, err
	}
	if len(rows) == 0 || len(rows[0]) == 0 {
		return "", false, nil
	}
	s, err := text(rows[0][0])
	return s, err == nil, err
}

// text is a TEXT value as D1 or SQLite returns it (a string, or bytes
// for a value stored as a BLOB).
func text(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case []byte:
		return string(v), nil
	case []any:
		b := make([]byte, len(v))
		for i, e := range v {
			n, ok := e.(float64)
			if !ok || n < 0 || n > 255 {
				return "", errors.New("d1: a BLOB value is not an array of bytes")
			}
			b[i] = byte(n)
		}
		return string(b), nil
	}
	return "", fmt.Errorf("d1: a cron row's value is %T, not TEXT", v)
}
