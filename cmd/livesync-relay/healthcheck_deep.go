package main

import (
	"fmt"
	"time"

	ebridge "github.com/livesync-go/livesync-go/engine/bridge"
)

// judgeStatus reads /status for healthcheck --deep: the problems a
// person must look at, or a one-line summary when there are none. An
// upstream replicating (live) is fine however long ago its last
// exchange was (nothing to exchange); one connecting, catching up or
// backing off is a problem once it has had no successful exchange for
// maxStale (since the relay started if it never had one). A stopped
// upstream is one another relay runs (a database kept on CouchDB).
func judgeStatus(st *statusDoc, now time.Time, maxStale time.Duration) (string, []string) {
	var problems []string
	ups, live, held := 0, 0, 0
	for _, d := range st.Databases {
		held += d.HeldDocuments
		if d.Shared != nil && d.Shared.LastError != "" {
			problems = append(problems, fmt.Sprintf("database %s: its CouchDB store fails (the relay answers 503 for it): %s", d.Name, d.Shared.LastError))
		}
		if m := d.Holdback.MaxHeldDocuments; m > 0 && d.HeldDocuments >= m {
			problems = append(problems, fmt.Sprintf("database %s: %d held documents, at max_held_documents: new pushes are refused until chunks arrive", d.Name, d.HeldDocuments))
		}
		for _, u := range d.Upstreams {
			if u.State == ebridge.StateStopped {
				continue
			}
			ups++
			if p := judgeUpstream(d.Name, u, st.Started, now, maxStale); p != "" {
				problems = append(problems, p)
			} else if u.State == ebridge.StateLive {
				live++
			}
		}
	}
	return fmt.Sprintf("%d database(s), %d of %d upstream(s) live, %d held document(s)", len(st.Databases), live, ups, held), problems
}

// judgeUpstream says what is wrong with one upstream ("" if nothing).
func judgeUpstream(db string, u ebridge.UpstreamStatus, started, now time.Time, maxStale time.Duration) string {
	why := ""
	if u.LastError != "" {
		why = ": " + u.LastError
	}
	if u.State == ebridge.StateError {
		return fmt.Sprintf("database %s: upstream %s failed (state error)%s", db, u.Name, why)
	}
	if u.State == ebridge.StateLive {
		return ""
	}
	since, what := started, "since the relay started"
	if u.LastSuccess != nil {
		since, what = *u.LastSuccess, "since its last success"
	}
	if d := now.Sub(since); d > maxStale {
		return fmt.Sprintf("database %s: upstream %s %s for %s %s%s", db, u.Name, u.State, d.Round(time.Second), what, why)
	}
	return ""
}
