package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// remote is a connected vault remote, whatever its kind. CouchDB
// databases are the one kind today (couchRemote); an S3 journal bucket
// ("s3://…", engine/journalsync) is the next, and needs only another
// implementation of this interface and a case in connect.
type remote interface {
	// ID names the remote without credentials (its URL); it keys the
	// replica's record of the remote.
	ID() string
	// Codec is the vault's codec with the remote's salt.
	Codec() *livesync.Codec
	// Replicate runs one replication in dir between the local replica
	// (whose replication identity is localID) and the remote: one-shot,
	// or live until ctx ends. progress is called after every batch.
	Replicate(ctx context.Context, local store.Store, localID string, dir replicate.Direction, opts replicateOptions) (replicate.Result, error)
	// Chunks is the remote's chunk source for reads on demand, nil if it
	// cannot fetch chunks by id.
	Chunks() engine.ChunkSource
	// Files lists the file metadata the remote holds, decoded (deleted
	// files included, marked).
	Files(ctx context.Context) ([]livesync.Meta, error)
	Close() error
}

// replicateOptions are the choices of one replication run.
type replicateOptions struct {
	live         bool
	metadataOnly bool // pull without chunks (LiveSync's readChunksOnline)
	progress     func(replicate.Progress)
	// written, if set, is told how many documents each bulk write stored
	// in direction dir (live runs report these).
	written func(dir replicate.Direction, n int)
	log     *slog.Logger // nil discards
}

// remoteSpec is a remote as named on the command line or in the
// configuration, before connecting.
type remoteSpec struct {
	name     string   // the configuration's name, "" for a URL
	kind     string   // "couchdb"
	url      *url.URL // the URL without credentials
	user     string
	password string // from the configuration's URL, else ""
	cfg      remoteConfig
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
		spec, err := parseRemoteURL(rc.URL, true)
		if err != nil {
			return remoteSpec{}, err
		}
		spec.name = arg
		spec.cfg = *rc
		if rc.User != "" {
			spec.user = rc.User
		}
		return spec, nil
	}
	return parseRemoteURL(arg, false)
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
		return remoteSpec{}, usageError{"s3:// journal remotes are not supported by this version of the CLI yet"}
	default:
		return remoteSpec{}, usageError{fmt.Sprintf("unknown kind of remote %q: use an http:// or https:// CouchDB database URL", u.Scheme)}
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
	}
	return nil, usageError{fmt.Sprintf("unknown kind of remote %q", spec.kind)}
}

// vaultSettings decides the settings of the vault on a remote whose
// milestone prefers pref (hasPref false: none). It returns the tweak
// values to announce and the settings without a passphrase.
func vaultSettings(r *replica, pref negotiate.TweakValues, hasPref bool, explicit vaultConfig) (negotiate.TweakValues, livesync.Settings, error) {
	var tv negotiate.TweakValues
	switch {
	case r.vault != nil:
		tv = r.vault.Tweaks
	case explicit.isSet() || !hasPref:
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

// deviceInfo is how this CLI names itself in a milestone's node_info.
func deviceInfoFor(name string) negotiate.DeviceInfo {
	if name == "" {
		name = "livesync-cli"
		if h, err := os.Hostname(); err == nil && h != "" {
			name += "@" + h
		}
	}
	return negotiate.DeviceInfo{DeviceName: name, AppVersion: "livesync-go", PluginVersion: "livesync-go"}
}
