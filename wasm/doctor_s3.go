//go:build js && wasm && !nos3

package main

import (
	"context"

	"github.com/livesync-go/livesync-go/adapters/minio"
	diag "github.com/livesync-go/livesync-go/engine/negotiate/doctor"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// A journal bucket's doctor is its bucket's.
func init() {
	doctors = append(doctors, func(r vault.Remote) remoteDoctor {
		mr, ok := r.(*minio.Remote)
		if !ok {
			return nil
		}
		return func(ctx context.Context, o diag.Options) ([]vault.Finding, bool) {
			return mr.Bucket().Doctor(ctx, o)
		}
	})
}
