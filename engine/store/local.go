package store

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/livesync-go/livesync-go/engine"
)

// LocalReader reads _local documents by id without the "_local/" prefix,
// answering engine.ErrNotFound for an absent one (a Store, an
// engine.Endpoint).
type LocalReader interface {
	GetLocal(ctx context.Context, id string) (json.RawMessage, error)
}

// LiveLocal reads the _local document id from db: nil, nil when it is
// absent or deleted (a {"_deleted":true} body, the marker a
// CouchDB-protocol server keeps when a client deletes it).
func LiveLocal(ctx context.Context, db LocalReader, id string) (json.RawMessage, error) {
	raw, err := db.GetLocal(ctx, id)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m struct {
		Deleted bool `json:"_deleted"`
	}
	if json.Unmarshal(raw, &m) == nil && m.Deleted {
		return nil, nil
	}
	return raw, nil
}
