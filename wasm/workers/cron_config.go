package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
)

// Defaults and bounds of the cron task's settings.
const (
	// defaultCronBudget is how long a run bridges and hunts: inside the
	// 30 s of CPU a Cron Trigger gets by default, and a run's wall time
	// waits mostly on the network.
	defaultCronBudget = 25 * time.Second
	// maxCronBudget is the 15 minutes Cloudflare lets a Cron Trigger run.
	maxCronBudget = 15 * time.Minute
	// defaultCronQueries is the most D1 queries a run makes: under the
	// Paid plan's 1000 per invocation, with room for the Worker's own.
	defaultCronQueries = 950
	// maxCronQueries is the Paid plan's limit.
	maxCronQueries = 1000
	// defaultCronSubrequests is the most requests a run sends to
	// upstreams (the Paid plan allows 1000 subrequests per invocation;
	// the Free plan 50).
	defaultCronSubrequests = 900
	maxHuntLimit           = 1000
)

// upstreamSetting is one element of LIVESYNC_UPSTREAMS: a CouchDB
// database the Worker's database DB replicates with in its cron runs.
type upstreamSetting struct {
	DB   string `json:"db"`
	Name string `json:"name"`
	// URL is the upstream database's URL: the server and the database
	// as its last path segment.
	URL      string `json:"url"`
	User     string `json:"user"`
	Password string `json:"password"`
	// Mode is sync (the default), pull, push or source.
	Mode string `json:"mode"`
	// ChunksOnline pulls metadata only; chunks come through the hunt.
	ChunksOnline bool `json:"chunks_online"`
}

// cronSettings configure the Cron Trigger's task.
type cronSettings struct {
	// upstreams are grouped by database, databases sorted by name.
	upstreams   map[string][]upstreamSetting
	budget      time.Duration
	queries     int // D1 queries a run may make
	subrequests int // upstream requests a run may send
	// Hunt limits (0: engine/hunt's defaults, the relay's).
	huntInFlight, huntPerWindow int
	huntWindow                  time.Duration
}

// dbs returns the databases with upstreams, sorted.
func (c cronSettings) dbs() []string {
	var out []string
	for db := range c.upstreams {
		out = append(out, db)
	}
	slices.Sort(out)
	return out
}

// upstreamNameRE is the rule for upstream names (the relay's).
var upstreamNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// parseCron reads the cron task's settings from the Worker's vars and
// secrets:
//
//	LIVESYNC_UPSTREAMS        (secret) JSON list of CouchDB upstreams:
//	                          [{"db":"vault","url":"https://couch.example/vault",
//	                            "user":"u","password":"p"}], optional "name",
//	                          "mode" (sync, pull, push, source), "chunks_online"
//	LIVESYNC_CRON_BUDGET      seconds a run may take (25)
//	LIVESYNC_CRON_MAX_QUERIES D1 queries a run may make (950; at most 1000)
//	LIVESYNC_CRON_MAX_SUBREQUESTS requests a run may send upstream (900)
//	LIVESYNC_HUNT_MAX_IN_FLIGHT, LIVESYNC_HUNT_MAX_PER_WINDOW,
//	LIVESYNC_HUNT_WINDOW      the hunt's per-source limits (5, 30 per 60 s)
//
// An error names the setting and the element, never a password.
func parseCron(env getenv) (cronSettings, error) {
	c := cronSettings{budget: defaultCronBudget, queries: defaultCronQueries, subrequests: defaultCronSubrequests}
	ups, err := parseUpstreams(env("LIVESYNC_UPSTREAMS"))
	if err != nil {
		return cronSettings{}, err
	}
	c.upstreams = ups
	ints := []struct {
		name     string
		min, max int
		to       *int
	}{
		{"LIVESYNC_CRON_MAX_QUERIES", 100, maxCronQueries, &c.queries},
		{"LIVESYNC_CRON_MAX_SUBREQUESTS", 1, 100_000, &c.subrequests},
		{"LIVESYNC_HUNT_MAX_IN_FLIGHT", 1, maxHuntLimit, &c.huntInFlight},
		{"LIVESYNC_HUNT_MAX_PER_WINDOW", 1, maxHuntLimit, &c.huntPerWindow},
	}
	for _, v := range ints {
		if s := env(v.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < v.min || n > v.max {
				return cronSettings{}, fmt.Errorf("%s must be a whole number from %d to %d", v.name, v.min, v.max)
			}
			*v.to = n
		}
	}
	secs := []struct {
		name string
		max  time.Duration
		to   *time.Duration
	}{
		{"LIVESYNC_CRON_BUDGET", maxCronBudget, &c.budget},
		{"LIVESYNC_HUNT_WINDOW", time.Hour, &c.huntWindow},
	}
	for _, v := range secs {
		if s := env(v.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || time.Duration(n)*time.Second > v.max {
				return cronSettings{}, fmt.Errorf("%s must be 1 to %d seconds", v.name, int(v.max/time.Second))
			}
			*v.to = time.Duration(n) * time.Second
		}
	}
	return c, nil
}

// parseUpstreams reads LIVESYNC_UPSTREAMS.
func parseUpstreams(v string) (map[string][]upstreamSetting, error) {
	if len(bytes.TrimSpace([]byte(v))) == 0 {
		return nil, nil
	}
	var list []upstreamSetting
	d := json.NewDecoder(bytes.NewReader([]byte(v)))
	d.DisallowUnknownFields()
	if err := d.Decode(&list); err != nil {
		// The decoder's message may quote the input: say where, not what.
		return nil, fmt.Errorf("LIVESYNC_UPSTREAMS must be a JSON list of objects with db, url and optionally user, password, name, mode, chunks_online (%s)", jsonErrKind(err))
	}
	out := map[string][]upstreamSetting{}
	names := map[string]bool{}
	for i, u := range list {
		where := fmt.Sprintf("LIVESYNC_UPSTREAMS[%d]", i)
		if !couchapi.ValidDatabaseName(u.DB) {
			return nil, fmt.Errorf("%s: db %q is not a valid database name (^[a-z][a-z0-9_$()+-]*$)", where, u.DB)
		}
		pu, err := url.Parse(u.URL)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" || pu.RawQuery != "" || pu.Fragment != "" {
			return nil, fmt.Errorf("%s: url: want the upstream database's http:// or https:// URL, e.g. https://couch.example.com/vault", where)
		}
		if pu.User != nil {
			return nil, fmt.Errorf("%s: url: give user and password as their own keys, not in the URL", where)
		}
		if u.Name == "" {
			u.Name = fmt.Sprintf("upstream-%d", i+1)
		}
		if !upstreamNameRE.MatchString(u.Name) {
			return nil, fmt.Errorf("%s: name %q: want 1 to 64 letters, digits, '.', '_' or '-'", where, u.Name)
		}
		if names[u.DB+"\x00"+u.Name] {
			return nil, fmt.Errorf("%s: database %q has two upstreams named %q", where, u.DB, u.Name)
		}
		names[u.DB+"\x00"+u.Name] = true
		switch u.Mode {
		case "":
			u.Mode = "sync"
		case "sync", "pull", "push", "source":
		default:
			return nil, fmt.Errorf("%s: mode %q: want \"sync\", \"pull\", \"push\" or \"source\"", where, u.Mode)
		}
		if u.ChunksOnline && (u.Mode == "push" || u.Mode == "source") {
			return nil, fmt.Errorf("%s: chunks_online applies to pulls; mode %q pulls nothing", where, u.Mode)
		}
		if u.Password != "" && u.User == "" {
			return nil, fmt.Errorf("%s: a password needs a user", where)
		}
		out[u.DB] = append(out[u.DB], u)
	}
	return out, nil
}

// jsonErrKind describes a JSON decoding error without its input.
func jsonErrKind(err error) string {
	switch e := err.(type) {
	case *json.SyntaxError:
		return fmt.Sprintf("invalid JSON at byte %d", e.Offset)
	case *json.UnmarshalTypeError:
		return fmt.Sprintf("a value of the wrong type at byte %d", e.Offset)
	default:
		if s := err.Error(); strings.HasPrefix(s, "json: unknown field") {
			return s // it quotes the key, never a value
		}
		return "not a JSON list"
	}
}
