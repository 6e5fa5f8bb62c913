package couchdb

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// Compact asks the server to compact the database (POST _compact), which
// drops the bodies of non-leaf revisions, and waits until it is done
// (compact_running false in the database's information), polling every
// compactPoll. A cancelled ctx stops the wait, not the compaction.
func (s *Store) Compact(ctx context.Context) error {
	return s.call(ctx, "compact", func(c context.Context) error {
		if err := s.db.do(c, "compact", "", http.MethodPost, s.db.dbURL("/_compact", nil), struct{}{}, nil); err != nil {
			return err
		}
		for {
			info, err := s.dbStatus(c)
			if err != nil {
				return err
			}
			if !info.CompactRunning {
				return nil
			}
			select {
			case <-c.Done():
				return c.Err()
			case <-time.After(compactPoll):
			}
		}
	})
}

const compactPoll = 200 * time.Millisecond

// RevsLimit reads the database's _revs_limit. A server without the
// endpoint (PouchDB's express-pouchdb) gives an error wrapping
// engine.ErrUnsupported.
func (s *Store) RevsLimit(ctx context.Context) (int, error) {
	var n int
	err := s.call(ctx, "revs limit", func(c context.Context) error {
		err := s.db.do(c, "revs limit", "", http.MethodGet, s.db.dbURL("/_revs_limit", nil), nil, &n)
		if errors.Is(err, engine.ErrNotFound) {
			if _, ierr := s.dbStatus(c); ierr == nil {
				return fmt.Errorf("couchdb: the server has no _revs_limit: %w", engine.ErrUnsupported)
			}
		}
		return err
	})
	return n, err
}

// SetRevsLimit sets the database's _revs_limit (n ≥ 1); the server stems
// each document to it at its next write.
func (s *Store) SetRevsLimit(ctx context.Context, n int) error {
	if n < 1 {
		return fmt.Errorf("%w: revs limit %d: it must be at least 1", store.ErrInvalid, n)
	}
	return s.call(ctx, "set revs limit", func(c context.Context) error {
		var ok struct {
			OK bool `json:"ok"`
		}
		err := s.db.do(c, "set revs limit", "", http.MethodPut, s.db.dbURL("/_revs_limit", nil), n, &ok)
		if errors.Is(err, engine.ErrNotFound) || httpStatus(err) == http.StatusBadRequest {
			if _, ierr := s.dbStatus(c); ierr == nil {
				return fmt.Errorf("couchdb: the server does not take a _revs_limit: %w: %w", engine.ErrUnsupported, err)
			}
		}
		return err
	})
}
