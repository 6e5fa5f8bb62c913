package journalsync

import (
	"context"

	"github.com/livesync-go/livesync-go/engine"
)

// ErrExists means Objects.Put found an object under the key already and
// left it as it was. Send then names the pack with a later key. It is
// engine.ErrExists, so that fakes of Objects (engine/enginetest) need not
// import this package.
var ErrExists = engine.ErrExists

// Objects is the object store a journal lives in: one bucket under one
// prefix (adapters/minio.Bucket implements it). Keys are full object keys,
// prefix included. Implementations are safe for concurrent use and retry
// transient failures themselves; an error they return is final for that
// call.
//
// Errors: an absent object wraps engine.ErrNotFound (and not
// engine.ErrNoDatabase): a pack deleted after a listing named it is
// skipped as gone. A missing bucket wraps engine.ErrNoDatabase (and
// engine.ErrNotFound) and fails the run. Authentication failures are
// *engine.Error with StageAuth; network failures and 5xx answers
// StageTransport; the stage of the others (StageStorage for both kinds
// of not-found from adapters/minio) does not matter. A cancelled ctx
// returns ctx.Err() (possibly wrapped).
type Objects interface {
	// List returns the keys of the pack objects that come after the key
	// after ("" lists all), skipping names (the key without the prefix)
	// that start with "_", ordered by journal.ComparePackKeys. Listings
	// longer than one server page (1,000 keys) are complete.
	List(ctx context.Context, after string) ([]string, error)
	// Get downloads a whole object.
	Get(ctx context.Context, key string) ([]byte, error)
	// Put creates the object key with body, with one request, so that
	// readers see either no object or all of it, never a partial one.
	// Put is create-only: it never replaces an existing object. When key
	// exists it returns an error wrapping ErrExists and the stored object
	// is unchanged (two devices that name a pack with the same key must
	// not overwrite each other's records). The one exception: when the
	// stored object is exactly body (an earlier attempt of this same call
	// stored it and its answer was lost), Put may return nil. Put does not
	// keep body.
	Put(ctx context.Context, key string, body []byte) error
	// Prefix is the bucket prefix every key starts with (may be empty).
	Prefix() string
	// ID identifies the journal without credentials (endpoint, bucket,
	// prefix, region): it names the per-device checkpoint and is the
	// throttle key of the journal's chunk source.
	ID() string
}
