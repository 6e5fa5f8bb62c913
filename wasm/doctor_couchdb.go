//go:build js && wasm && !nocouchdb

package main

import (
	"context"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	diag "github.com/livesync-go/livesync-go/engine/negotiate/doctor"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// A CouchDB remote's doctor is its database's.
func init() {
	doctors = append(doctors, func(r vault.Remote) remoteDoctor {
		cr, ok := r.(*couchdb.Remote)
		if !ok {
			return nil
		}
		return func(ctx context.Context, o diag.Options) ([]vault.Finding, bool) {
			return cr.DB().Doctor(ctx, o), true
		}
	})
}
