package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine/hunt"
)

// Kinds of upstream.
const (
	kindCouchDB = "couchdb"
	kindS3      = "s3"
)

// Modes of an upstream: which way documents travel, or none.
const (
	modeSync   = "sync"   // both ways (the default)
	modePull   = "pull"   // upstream → relay only
	modePush   = "push"   // relay → upstream only
	modeSource = "source" // no replication: a chunk source of the hunt only
)

// defaultPollInterval is how often a bucket upstream is listed for new
// packs when nothing else wakes it (a relay change wakes a push at once).
const defaultPollInterval = 10 * time.Second

// upstreamNameRE is the rule for upstream names: they are metric labels
// and /status keys.
var upstreamNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// upstreamConfig is one [[databases.upstreams]] table: a remote the
// relay replicates with continuously and hunts chunks on.
type upstreamConfig struct {
	Name string `toml:"name"`
	Kind string `toml:"kind"`
	Mode string `toml:"mode"`
	// ChunksOnline pulls metadata only (LiveSync's readChunksOnline);
	// chunks come through the hunt (CouchDB upstreams).
	ChunksOnline bool `toml:"chunks_online"`

	// CouchDB.
	URL          string `toml:"url"`
	Database     string `toml:"database"`
	User         string `toml:"user"`
	PasswordFile string `toml:"password_file"`
	PasswordEnv  string `toml:"password_env"`

	// S3 (journal bucket).
	Endpoint      string        `toml:"endpoint"`
	Bucket        string        `toml:"bucket"`
	Prefix        string        `toml:"prefix"`
	Region        string        `toml:"region"`
	AccessKey     string        `toml:"access_key"`
	SecretKeyFile string        `toml:"secret_key_file"`
	SecretKeyEnv  string        `toml:"secret_key_env"`
	CAFile        string        `toml:"ca_file"`
	PathStyle     *bool         `toml:"path_style"`
	DirectFetch   bool          `toml:"direct_fetch"`
	PollInterval  time.Duration `toml:"poll_interval"`
	// E2EE false declares a vault without end-to-end encryption, so a
	// bucket upstream needs no passphrase (S3 only).
	E2EE *bool `toml:"e2ee"`
}

// huntConfig is the [hunt] table: the per-source throttle and backoff of
// every database's purgatory hunt; zero values mean engine/hunt's
// defaults (5 in flight, 30 per 60 s, backoff 20 s doubling to 120 s,
// hedge after 30 s).
type huntConfig struct {
	MaxInFlight  int           `toml:"max_in_flight"`
	MaxPerWindow int           `toml:"max_per_window"`
	Window       time.Duration `toml:"window"`
	BackoffBase  time.Duration `toml:"backoff_base"`
	BackoffCap   time.Duration `toml:"backoff_cap"`
	HedgeAfter   time.Duration `toml:"hedge_after"`
	BatchSize    int           `toml:"batch_size"`
}

func (h huntConfig) config() hunt.Config {
	return hunt.Config{
		MaxInFlight: h.MaxInFlight, MaxPerWindow: h.MaxPerWindow, Window: h.Window,
		BackoffBase: h.BackoffBase, BackoffCap: h.BackoffCap, HedgeAfter: h.HedgeAfter, BatchSize: h.BatchSize,
	}
}

// mode returns the configured mode, sync when unset.
func (u upstreamConfig) mode() string {
	if u.Mode == "" {
		return modeSync
	}
	return u.Mode
}

// validateUpstreams checks database d's upstream tables; bad reports
// each problem.
func validateUpstreams(d dbConfig, bad func(string, ...any)) {
	names := map[string]bool{}
	hasPassphrase := d.PassphraseFile != "" || d.PassphraseEnv != ""
	for i, u := range d.Upstreams {
		where := fmt.Sprintf("databases %q: upstreams[%d]", d.Name, i)
		if !upstreamNameRE.MatchString(u.Name) {
			bad("%s: name %q: want 1 to 64 letters, digits, '.', '_' or '-'", where, u.Name)
		} else {
			where = fmt.Sprintf("databases %q: upstream %q", d.Name, u.Name)
			if names[u.Name] {
				bad("%s is listed twice", where)
			}
			names[u.Name] = true
		}
		switch u.mode() {
		case modeSync, modePull, modePush, modeSource:
		default:
			bad("%s: mode %q: want \"sync\", \"pull\", \"push\" or \"source\"", where, u.Mode)
		}
		switch u.Kind {
		case kindCouchDB:
			validateCouchUpstream(u, where, bad)
		case kindS3:
			validateS3Upstream(u, where, hasPassphrase, bad)
		default:
			bad("%s: kind %q: want \"couchdb\" or \"s3\"", where, u.Kind)
		}
	}
}

func validateCouchUpstream(u upstreamConfig, where string, bad func(string, ...any)) {
	if pu, err := url.Parse(u.URL); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		bad("%s: url %q: want the server's http:// or https:// URL, e.g. https://couch.example.com:6984", where, u.URL)
	} else if pu.User != nil {
		bad("%s: url: no user or password in the URL; use user and password_file or password_env", where)
	} else if strings.Trim(pu.Path, "/") != "" || pu.RawQuery != "" || pu.Fragment != "" {
		bad("%s: url %q: give the server only; the database goes in database", where, u.URL)
	}
	if !couchapi.ValidDatabaseName(u.Database) {
		bad("%s: database %q is not a valid database name (^[a-z][a-z0-9_$()+-]*$)", where, u.Database)
	}
	if u.PasswordFile != "" && u.PasswordEnv != "" {
		bad("%s: give password_file or password_env, not both", where)
	}
	if (u.PasswordFile != "" || u.PasswordEnv != "") && u.User == "" {
		bad("%s: a password needs a user", where)
	}
	if u.ChunksOnline && (u.mode() == modePush || u.mode() == modeSource) {
		bad("%s: chunks_online applies to pulls; mode %q pulls nothing", where, u.mode())
	}
	for _, k := range []keySet{
		{"endpoint", u.Endpoint != ""}, {"bucket", u.Bucket != ""}, {"prefix", u.Prefix != ""}, {"region", u.Region != ""},
		{"access_key", u.AccessKey != ""}, {"secret_key_file", u.SecretKeyFile != ""}, {"secret_key_env", u.SecretKeyEnv != ""},
		{"ca_file", u.CAFile != ""}, {"path_style", u.PathStyle != nil}, {"direct_fetch", u.DirectFetch},
		{"poll_interval", u.PollInterval != 0}, {"e2ee", u.E2EE != nil},
	} {
		if k.set {
			bad("%s: %s is a key of s3 upstreams", where, k.key)
		}
	}
}

func validateS3Upstream(u upstreamConfig, where string, hasPassphrase bool, bad func(string, ...any)) {
	if u.Endpoint == "" || u.Bucket == "" {
		bad("%s: an s3 upstream needs endpoint and bucket", where)
	}
	if u.SecretKeyFile != "" && u.SecretKeyEnv != "" {
		bad("%s: give secret_key_file or secret_key_env, not both", where)
	}
	if (u.AccessKey == "") != (u.SecretKeyFile == "" && u.SecretKeyEnv == "") {
		bad("%s: give access_key with secret_key_file or secret_key_env, or none of them", where)
	}
	if u.PollInterval < 0 {
		bad("%s: poll_interval is negative", where)
	}
	if u.mode() == modeSource && !u.DirectFetch {
		bad("%s: mode \"source\" needs direct_fetch = true: without it a bucket cannot serve chunks by id", where)
	}
	if u.ChunksOnline {
		bad("%s: chunks_online applies to CouchDB upstreams; journal packs carry their chunks", where)
	}
	if !hasPassphrase && (u.E2EE == nil || *u.E2EE) {
		bad("%s: a bucket upstream needs the vault passphrase (passphrase_file or passphrase_env of the database): "+
			"journal packs hold the plaintext form and the relay stores the encrypted remote form, so it must "+
			"encrypt and decrypt at this boundary; for a vault without end-to-end encryption set e2ee = false", where)
	}
	for _, k := range []keySet{
		{"url", u.URL != ""}, {"database", u.Database != ""}, {"user", u.User != ""},
		{"password_file", u.PasswordFile != ""}, {"password_env", u.PasswordEnv != ""},
	} {
		if k.set {
			bad("%s: %s is a key of couchdb upstreams", where, k.key)
		}
	}
	if u.Endpoint != "" && u.Bucket != "" {
		mc := minio.Config{Endpoint: u.Endpoint, Bucket: u.Bucket, Prefix: u.Prefix, Region: u.Region, PathStyle: pathStyle(u)}
		if err := mc.Validate(); err != nil {
			bad("%s: %v", where, withS3SettingKeys(err))
		}
	}
}

// keySet is a configuration key and whether it was given.
type keySet struct {
	key string
	set bool
}

func pathStyle(u upstreamConfig) bool { return u.PathStyle == nil || *u.PathStyle }

// upstreamSpec is one upstream with its secrets read: what the relay
// connects with. Secrets are never logged or shown in /status.
type upstreamSpec struct {
	name, kind, mode string
	chunksOnline     bool
	couch            couchdb.Config // kind couchdb
	s3               minio.Config   // kind s3
	directFetch      bool
	pollInterval     time.Duration
	plainVault       bool // e2ee = false
}

// location is where the upstream is, without credentials, for /status
// and logs.
func (u upstreamSpec) location() string {
	if u.kind == kindCouchDB {
		return strings.TrimSuffix(u.couch.URL, "/") + "/" + u.couch.Database
	}
	return minio.EndpointURL(u.s3) + "/" + u.s3.Bucket + "/" + u.s3.Prefix
}

// resolveUpstreams reads the secrets and files of database d's upstreams.
func resolveUpstreams(fc *fileConfig, d dbConfig, getenv func(string) string) ([]upstreamSpec, error) {
	var out []upstreamSpec
	for _, u := range d.Upstreams {
		s := upstreamSpec{name: u.Name, kind: u.Kind, mode: u.mode(), chunksOnline: u.ChunksOnline,
			directFetch: u.DirectFetch, pollInterval: u.PollInterval, plainVault: u.E2EE != nil && !*u.E2EE}
		fail := func(err error) error {
			return usageError{fmt.Sprintf("database %q: upstream %q: %v", d.Name, u.Name, err)}
		}
		switch u.Kind {
		case kindCouchDB:
			s.couch = couchdb.Config{URL: strings.TrimSuffix(u.URL, "/"), Database: u.Database, User: u.User}
			if u.PasswordFile != "" || u.PasswordEnv != "" {
				pw, err := secretFrom(fc.resolvePath(u.PasswordFile), u.PasswordEnv, getenv, "password")
				if err != nil {
					return nil, fail(err)
				}
				s.couch.Password = pw
			}
			if err := s.couch.Validate(); err != nil {
				return nil, fail(err)
			}
		case kindS3:
			s.s3 = minio.Config{Endpoint: u.Endpoint, Bucket: u.Bucket, Prefix: u.Prefix, Region: u.Region,
				AccessKey: u.AccessKey, PathStyle: pathStyle(u)}
			if u.SecretKeyFile != "" || u.SecretKeyEnv != "" {
				sk, err := secretFrom(fc.resolvePath(u.SecretKeyFile), u.SecretKeyEnv, getenv, "secret key")
				if err != nil {
					return nil, fail(err)
				}
				s.s3.SecretKey = sk
			}
			if u.CAFile != "" {
				pem, err := os.ReadFile(fc.resolvePath(u.CAFile))
				if err != nil {
					return nil, fail(fmt.Errorf("ca_file: %w", err))
				}
				s.s3.CACertPEM = pem
			}
			if err := s.s3.Validate(); err != nil {
				return nil, fail(withS3SettingKeys(err))
			}
			if s.pollInterval == 0 {
				s.pollInterval = defaultPollInterval
			}
		default:
			return nil, fail(errors.New("unknown kind"))
		}
		out = append(out, s)
	}
	return out, nil
}
