package minio_test

import (
	"errors"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/negotiate/negotiatetest"
)

// TestPortSuite runs negotiate's port conformance suite on a bucket: the
// sync-parameters and milestone objects with their ETags, no version
// document.
func TestPortSuite(t *testing.T) {
	env := envS3(t)
	for _, prefix := range []string{"vault/", ""} {
		negotiatetest.PortSuite(t, func(t *testing.T) negotiate.Port {
			b, cleanup := freshBucket(t, env, prefix)
			t.Cleanup(cleanup)
			return b.Negotiate()
		}, negotiate.JournalChunkRange)
	}
}

// A missing bucket is no proof that a record is absent: reading one wraps
// ErrNoBucket and negotiate.ErrNoDatabase, and the handshake writes
// nothing.
func TestPortMissingBucket(t *testing.T) {
	env := envS3(t)
	env.Bucket = "lsgo-test-missing-bucket"
	b, err := minio.New(env)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = b.Negotiate().Read(t.Context(), negotiate.RecordSyncParameters)
	if !errors.Is(err, minio.ErrNoBucket) || !errors.Is(err, negotiate.ErrNoDatabase) || !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Read on a missing bucket: %v", err)
	}
	if _, err := negotiate.ReadMilestone(t.Context(), b.Negotiate()); !errors.Is(err, minio.ErrNoBucket) {
		t.Fatalf("ReadMilestone on a missing bucket: %v, want the error", err)
	}
}
