package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// remote is a connected vault remote, whatever its kind: a CouchDB
// database (couchRemote) or an S3 journal bucket (bucketRemote,
// engine/journalsync).
type remote interface {
	// ID names the remote without credentials (its URL); it keys the
	// replica's record of the remote.
	ID() string
	// Codec is the vault's codec with the remote's salt.
	Codec() *livesync.Codec
	// Replicate runs one replication in dir between the local replica
	// (whose replication identity is localID) and the remote: one-shot,
	// or live until ctx ends. Progress goes to opts' callbacks.
	Replicate(ctx context.Context, local store.Store, localID string, dir replicate.Direction, opts replicateOptions) (syncResult, error)
	// Chunks is the remote's chunk source for reads on demand, nil if it
	// cannot fetch chunks by id.
	Chunks() engine.ChunkSource
	// Files lists the file metadata the remote holds, decoded (deleted
	// files included, marked).
	Files(ctx context.Context) ([]livesync.Meta, error)
	// Milestone reads the remote's milestone, nil if it has none.
	Milestone(ctx context.Context) (*negotiate.Milestone, error)
	// UpdateMilestone changes the milestone with fn and writes it back
	// conditionally, redoing fn from a fresh read after a lost race
	// (couchdb.DB.UpdateMilestone, minio.Bucket.UpdateMilestone).
	UpdateMilestone(ctx context.Context, me string, fn func(m *negotiate.Milestone, found bool) (bool, error)) (*negotiate.Milestone, error)
	// ChunkRange is the chunk-format range this client announces in the
	// remote's milestone.
	ChunkRange() negotiate.ChunkRange
	// Reset deletes everything the remote holds (the database is
	// destroyed and created again, a bucket's objects under its prefix
	// are deleted), so that the next handshake writes a new salt.
	Reset(ctx context.Context) error
	// ForgetCheckpoint drops what the replica remembers of the remote's
	// content, as after a reset: the next push sends every document.
	// (A CouchDB remote's checkpoints are on both sides, and the reset
	// removed the remote's; a journal's is in the replica alone.)
	ForgetCheckpoint(ctx context.Context) error
	// wrapErr names the remote in an error of its own.
	wrapErr(err error) error
	Close() error
}

// syncResult is the outcome of one replication run.
type syncResult struct {
	replicate.Result
	// journal is what a journal bucket's run did (nil for CouchDB).
	journal *journalsync.Result
	// quarantined lists the journal packs that could not be opened: set
	// aside by this run or an earlier one (journal remotes only).
	quarantined []journalsync.Quarantine
}

// newlyQuarantined reports whether q was set aside by this run.
func (r syncResult) newlyQuarantined(q journalsync.Quarantine) bool {
	if r.journal == nil {
		return false
	}
	for _, n := range r.journal.Quarantined {
		if n.Key == q.Key {
			return true
		}
	}
	return false
}

// replicateOptions are the choices of one replication run.
type replicateOptions struct {
	live         bool
	metadataOnly bool // pull without chunks (LiveSync's readChunksOnline)
	progress     func(replicate.Progress)
	// written, if set, is told how many documents each bulk write stored
	// in direction dir (live runs report these).
	written func(dir replicate.Direction, n int)
	// packs, if set, is told about every journal pack received or sent
	// (journal remotes).
	packs func(journalsync.Progress)
	// warn, if set, is told about every pack a live run quarantines.
	warn func(journalsync.Quarantine)
	// polled, if set, is told what each poll of a live run on a journal
	// bucket did.
	polled func(journalsync.Result)
	// retrying, if set, is told about a transport failure of a live run
	// on a journal bucket and the pause before the next poll.
	retrying func(err error, wait time.Duration)
	// holder, if set, sees every pulled metadata revision (the CLI's
	// record of held files).
	holder replicate.Holder
	// interval is the pause between two polls of a live run on a journal
	// bucket (default 10 s).
	interval time.Duration
	// retryQuarantined releases the quarantined packs before receiving.
	retryQuarantined bool
	log              *slog.Logger // nil discards
}

// remoteSpec is a remote as named on the command line or in the
// configuration, before connecting.
type remoteSpec struct {
	name     string   // the configuration's name, "" for a URL
	arg      string   // the URL as given on the command line (no password), "" for a name
	kind     string   // "couchdb" or "s3"
	url      *url.URL // the URL without credentials
	user     string
	password string // from the configuration's URL, else ""
	cfg      remoteConfig
	s3       s3Spec // kind "s3"
}

// String is the remote's URL without credentials.
func (s remoteSpec) String() string { return s.url.String() }

// resolveRemote turns a command's REMOTE argument (a URL, a configured
// name, or "" for the configuration's default) into a spec.
func resolveRemote(cfg *config, arg string) (remoteSpec, error) {
	if arg == "" {
		if cfg.DefaultRemote == "" {
			return remoteSpec{}, usageError{"no remote given, and the configuration has no default_remote"}
		}
		arg = cfg.DefaultRemote
	}
	if !strings.Contains(arg, "://") {
		rc := cfg.Remotes[arg]
		if rc == nil {
			where := "the configuration file"
			if cfg.path != "" {
				where = cfg.path
			}
			return remoteSpec{}, usageError{fmt.Sprintf("%q is neither a URL nor a remote in %s", arg, where)}
		}
		if rc.Kind == "s3" && rc.URL == "" {
			spec, err := s3SpecFromConfig(rc.s3Config)
			if err != nil {
				return remoteSpec{}, err
			}
			spec.name, spec.cfg = arg, *rc
			return spec, nil
		}
		spec, err := parseRemoteURL(rc.URL, true)
		if err != nil {
			return remoteSpec{}, err
		}
		spec.name = arg
		spec.cfg = *rc
		if spec.kind == "s3" {
			if rc.CAFile != "" {
				spec.s3.caFile = rc.CAFile
			}
			spec.s3.directFetch = spec.s3.directFetch || rc.DirectFetch
		}
		if rc.User != "" {
			spec.user = rc.User
		}
		return spec, nil
	}
	spec, err := parseRemoteURL(arg, false)
	spec.arg = arg // a command-line URL never holds a password (parseRemoteURL)
	return spec, err
}

// parseRemoteURL parses a remote URL. A password in a URL given on the
// command line is refused: other users see it in the process list.
func parseRemoteURL(raw string, fromConfig bool) (remoteSpec, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return remoteSpec{}, usageError{fmt.Sprintf("the remote is not a valid URL: %v", redactURLError(err))}
	}
	var spec remoteSpec
	switch u.Scheme {
	case "http", "https":
		spec.kind = "couchdb"
	case "s3":
		return parseS3URL(u, fromConfig)
	default:
		return remoteSpec{}, usageError{fmt.Sprintf("unknown kind of remote %q: use an http:// or https:// CouchDB database URL, or an s3:// bucket URL", u.Scheme)}
	}
	if u.User != nil {
		spec.user = u.User.Username()
		if p, ok := u.User.Password(); ok {
			if !fromConfig {
				return remoteSpec{}, usageError{"the remote URL holds a password, which other users can see in the process list; " +
					"give it with $LIVESYNC_PASSWORD, --password-file or the prompt instead (or --password-insecure-arg if you must)"}
			}
			spec.password = p
		}
		u.User = nil
	}
	db := strings.Trim(u.Path, "/")
	if i := strings.LastIndexByte(db, '/'); i >= 0 {
		db = db[i+1:]
	}
	if db == "" || u.Host == "" {
		return remoteSpec{}, usageError{fmt.Sprintf("the remote URL %s names no database: use https://host:5984/DATABASE", u.Redacted())}
	}
	u.RawQuery, u.Fragment = "", ""
	u.Path = "/" + strings.Trim(u.Path, "/")
	spec.url = u
	return spec, nil
}

// redactURLError drops the URL from a url.Parse error, which may hold a
// password.
func redactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// connectOptions are what a command asks of the connection.
type connectOptions struct {
	flags commonFlags
	// create creates a missing database (push, sync, import).
	create bool
	// newVault holds the command line's settings for a new vault.
	newVault vaultConfig
	// deviceName is this device's name in the milestone.
	deviceName string
	// readOnly connects without writing anything to the remote: no
	// database, salt or milestone entry, and a locked remote is read
	// without joining it (ls --remote, cat --remote, export with a
	// throwaway replica).
	readOnly bool
	// check relaxes the milestone checks (push --rebuild reads a remote
	// whose settings it is about to replace).
	check negotiate.CheckOptions
}

// connect opens the remote of spec for the replica r: it resolves the
// password, works out the vault's settings (the replica's own, else the
// command line's or the configuration's for a new vault, else the
// remote's preferred ones), resolves the passphrase when the vault needs
// one, runs the LiveSync handshake, checks the passphrase against the
// remote's data, and records the settings in the replica.
func (e *cliEnv) connect(spec remoteSpec, r *replica, o connectOptions) (remote, error) {
	switch spec.kind {
	case "couchdb":
		return e.connectCouch(spec, r, o)
	case "s3":
		return e.connectBucket(spec, r, o)
	}
	return nil, usageError{fmt.Sprintf("unknown kind of remote %q", spec.kind)}
}

// vaultSettings decides the settings of the vault on a remote whose
// milestone prefers pref (hasPref false: none). It returns the tweak
// values to announce and the settings without a passphrase. A new vault
// on a journal bucket (journal set) gets the object-storage preset's
// chunk size (10) unless one is given.
func vaultSettings(r *replica, pref negotiate.TweakValues, hasPref bool, explicit vaultConfig, journal bool) (negotiate.TweakValues, livesync.Settings, error) {
	var tv negotiate.TweakValues
	switch {
	case r.vault != nil:
		tv = r.vault.Tweaks
	case explicit.isSet() || !hasPref:
		if journal && explicit.CustomChunkSize == nil {
			size := journalChunkSize
			explicit.CustomChunkSize = &size
		}
		tv = newVaultSettings(explicit).TweakValues()
	default:
		tv = pref
	}
	s, err := settingsOf(tv)
	return tv, s, err
}

// passphraseFor resolves the vault passphrase for spec.
func (e *cliEnv) passphraseFor(spec *remoteSpec, f commonFlags) (string, error) {
	cf := ""
	if spec != nil {
		cf = spec.cfg.PassphraseFile
	}
	p, err := e.secret(secretSource{what: "passphrase", insecureArg: f.passphraseArg, file: f.passphraseFile,
		envVar: "LIVESYNC_PASSPHRASE", configFile: cf, prompt: "Vault passphrase: "})
	if err != nil {
		return "", err
	}
	if p == "" {
		return "", usageError{"the vault is end-to-end encrypted or has obfuscated paths: set LIVESYNC_PASSPHRASE, use --passphrase-file, or run on a terminal to be asked"}
	}
	return p, nil
}

// deviceInfoFor is how this CLI names itself in the milestone of the
// remote spec, for the replica r: the device name (device_name, else
// livesync-cli@HOST) and the vault name (vaultNameFor).
func deviceInfoFor(name string, r *replica, spec remoteSpec) negotiate.DeviceInfo {
	if name == "" {
		name = "livesync-cli"
		if h, err := os.Hostname(); err == nil && h != "" {
			name += "@" + h
		}
	}
	return negotiate.DeviceInfo{DeviceName: name, VaultName: vaultNameFor(r, spec), AppVersion: "livesync-go", PluginVersion: "livesync-go"}
}
