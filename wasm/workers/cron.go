package main

import (
	"context"
	"errors"
)

// runUpstreams bridges the databases with upstreams and hunts their
// held documents' chunks (cron_run.go). Builds for js include it only
// with the build tag upstreams: its HTTP client (net/http and kivik)
// makes the Worker larger than the Free plan's 3 MB, and a run needs the
// Paid plan's limits anyway (1000 D1 queries and subrequests per
// invocation, the Free plan 50).
var runUpstreams func(a *app, ctx context.Context) error

// errNoUpstreamBuild: LIVESYNC_UPSTREAMS is set but the Worker was built
// without the upstreams tag.
var errNoUpstreamBuild = errors.New("LIVESYNC_UPSTREAMS is set, but this build of the Worker has no upstream bridging: " +
	"build it with the Go build tag upstreams and deploy it on the Paid plan")

// Scheduled is the Cron Trigger's task: each database with upstreams is
// bridged to them for at most the run's budget (see runUpstreams).
// Without upstreams it does nothing.
func (a *app) Scheduled(ctx context.Context) error {
	if len(a.cron.upstreams) == 0 {
		return nil
	}
	if runUpstreams == nil {
		return errNoUpstreamBuild
	}
	return runUpstreams(a, ctx)
}
