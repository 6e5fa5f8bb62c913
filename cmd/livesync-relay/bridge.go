package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	ebridge "github.com/livesync-go/livesync-go/engine/bridge"
	"github.com/livesync-go/livesync-go/engine/hunt"
)

// The relay's bridging is engine/bridge over a served database: this
// file turns the configuration's upstreams into bridge.Upstream values
// (the CouchDB and bucket adapters, the throttle keys, the messages that
// name configuration keys).

// bridgeSetup is what a database needs to bridge its upstreams.
type bridgeSetup struct {
	uuid  string // the relay's server uuid (replication ids)
	specs []upstreamSpec
	hunt  hunt.Config
}

// newBridge opens the upstreams of the database name (their adapters)
// and builds its bridge over local; Start runs it, and Stop or Close
// closes the upstreams.
func newBridge(name string, local ebridge.Local, setup bridgeSetup, log *slog.Logger) (*ebridge.Bridge, error) {
	var ups []ebridge.Upstream
	for _, spec := range setup.specs {
		u, err := openUpstream(spec, log.With("upstream", spec.name))
		if err != nil {
			for _, u := range ups {
				_ = u.Remote.Close()
			}
			return nil, fmt.Errorf("database %q: upstream %q: %w", name, spec.name, err)
		}
		ups = append(ups, u)
	}
	return ebridge.New(local, ebridge.Config{DB: name, UUID: setup.uuid, Upstreams: ups, Hunt: setup.hunt, Log: log})
}

// openUpstream builds spec's adapter: a CouchDB database or a bucket.
func openUpstream(spec upstreamSpec, log *slog.Logger) (ebridge.Upstream, error) {
	u := ebridge.Upstream{Name: spec.name, Kind: spec.kind, Mode: spec.mode, Location: spec.location(),
		Database: spec.couch.Database, ChunksOnline: spec.chunksOnline, DirectFetch: spec.directFetch,
		PollInterval: spec.pollInterval, Explain: func(err error) string { return explainUpstreamErr(spec, err) }}
	switch spec.kind {
	case kindCouchDB:
		r, err := couchdb.NewRemote(spec.couch, couchdb.RemoteOptions{ID: spec.location()})
		if err != nil {
			return u, err
		}
		u.Remote, u.Docs, u.ThrottleKey = r, r.DB(), r.DB().ThrottleKey()
	case kindS3:
		r, err := openBucket(spec.s3, log)
		if err != nil {
			return u, err
		}
		u.Remote, u.ThrottleKey = r, bucketThrottleKey(spec)
	}
	return u, nil
}

// explainUpstreamErr says what failed and, where it helps, what to check,
// in the configuration's words. Adapter errors carry no secrets; neither
// does this.
func explainUpstreamErr(spec upstreamSpec, err error) string {
	var ee *engine.Error
	if errors.As(err, &ee) && ee.Stage == engine.StageAuth {
		if spec.kind == kindCouchDB {
			return "authentication failed: check user and the password (password_file or password_env): " + err.Error()
		}
		if keys := s3SettingKeys(err); keys != "" {
			return "authentication failed: " + keys + ": " + err.Error()
		}
		return "authentication failed: check access_key, the secret key (secret_key_file or secret_key_env) and region: " + err.Error()
	}
	if spec.kind == kindCouchDB && (errors.Is(err, engine.ErrNotFound) || errors.Is(err, ebridge.ErrNoUpstreamDatabase)) {
		// Only a missing database fails a session with not-found: an
		// absent document is an answer, never an error, there.
		return fmt.Sprintf("the database %q does not exist on the server %s (or was deleted): create it there "+
			"(the relay never creates an upstream database), or fix database = %q of upstream %q: %v",
			spec.couch.Database, strings.TrimSuffix(spec.couch.URL, "/"), spec.couch.Database, spec.name, err)
	}
	if spec.kind == kindS3 && errors.Is(err, minio.ErrNoBucket) {
		return fmt.Sprintf("the bucket %q does not exist on the server %s: create it there (the relay never creates buckets), "+
			"or fix bucket = %q of upstream %q: %v", spec.s3.Bucket, minio.EndpointURL(spec.s3),
			spec.s3.Bucket, spec.name, err)
	}
	if spec.kind == kindS3 {
		return withS3SettingKeys(err).Error()
	}
	return err.Error()
}
