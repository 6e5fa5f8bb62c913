package holdback

import "context"

// TooManyHeld is the engine.BulkDocResult.Error of a metadata revision
// refused because holding it would exceed Config.MaxHeldDocuments,
// Config.MaxHeldPerOwner or Config.MaxHeldRevisions. Nothing of the revision is kept, and it is not
// counted as present by RevsDiff, so its pusher sends it again at its
// next replication: it is then written through if its chunks arrived
// meanwhile, or held if a slot is free. Replicators (PouchDB, the
// plugin, engine/replicate) treat an error other than "forbidden" or
// "unauthorized" as a failed batch and retry later, which is what a
// refusal asks for.
const TooManyHeld = "too_many_held"

type ownerKey struct{}

// WithOwner returns a copy of ctx that names owner (a user name) as the
// author of the writes made with it, for Config.MaxHeldPerOwner. An
// empty owner names none.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// Owner returns the owner ctx names (WithOwner), or "" for none.
func Owner(ctx context.Context) string {
	s, _ := ctx.Value(ownerKey{}).(string)
	return s
}

type settleKey struct{}

// WithSettle marks a write whose writer waits for its consequences: the
// notes its chunks complete are released before BulkDocs returns, so
// that a client answered last finds every note it completed served.
// A CouchDB-protocol endpoint marks its clients' pushes so; other
// writers (replication, the hunt) leave releases to the purgatory's
// driver.
func WithSettle(ctx context.Context) context.Context {
	return context.WithValue(ctx, settleKey{}, true)
}

func settles(ctx context.Context) bool {
	b, _ := ctx.Value(settleKey{}).(bool)
	return b
}
