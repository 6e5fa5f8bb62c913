package couchapi

import "context"

type userKey struct{}

// UserFrom returns the name of the user the Server authenticated for the
// request whose context ctx is (or derives from), or "" for none. The
// Server sets it before it calls the Databases and the Store, so that a
// store can count what each user writes (the relay's hold-back limits
// held documents per user).
func UserFrom(ctx context.Context) string {
	s, _ := ctx.Value(userKey{}).(string)
	return s
}

// withUser returns ctx naming user as the authenticated user.
func withUser(ctx context.Context, user string) context.Context {
	return context.WithValue(ctx, userKey{}, user)
}

// WithUser returns ctx naming user as the authenticated user, as the
// Server names a request's: a store written another way than through the
// Server (the relay's peer-to-peer serving) attributes its writes with it.
func WithUser(ctx context.Context, user string) context.Context { return withUser(ctx, user) }
