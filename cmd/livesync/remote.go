package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// remoteSpec is a remote as named on the command line or in the
// configuration, before connecting.
type remoteSpec struct {
	name  string         // the configuration's name, "" for a URL
	arg   string         // the URL as given on the command line (no password), "" for a name
	kind  string         // "couchdb", "s3" or "p2p"
	id    string         // the URL without credentials (couchdb.DatabaseURL, minio.BucketURL, p2p://GROUP)
	cfg   remoteConfig   // the configuration's table
	couch couchdb.Config // kind "couchdb": a password only from the configuration's URL
	s3    minio.Location // kind "s3": a secret key only from the configuration's URL
	group string         // kind "p2p": the sync group whose approved peers are the remote
}

// String is the remote's URL without credentials.
func (s remoteSpec) String() string { return s.id }

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
				spec.s3.CAFile = rc.CAFile
			}
			spec.s3.DirectFetch = spec.s3.DirectFetch || rc.DirectFetch
		}
		if rc.User != "" {
			spec.couch.User = rc.User
		}
		return spec, nil
	}
	spec, err := parseRemoteURL(arg, false)
	spec.arg = arg // a command-line URL never holds a password (parseRemoteURL)
	return spec, err
}

// parseRemoteURL parses a remote URL (couchdb.ParseURL, minio.ParseURL).
// A password or secret key in a URL given on the command line is
// refused: other users see it in the process list.
func parseRemoteURL(raw string, fromConfig bool) (remoteSpec, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return remoteSpec{}, usageError{fmt.Sprintf("the remote is not a valid URL: %v", couchdb.RedactURLError(err))}
	}
	_, secret := u.User.Password()
	switch u.Scheme {
	case "http", "https":
		if secret && !fromConfig {
			return remoteSpec{}, usageError{"the remote URL holds a password, which other users can see in the process list; " +
				"give it with $LIVESYNC_PASSWORD, --password-file or the prompt instead (or --password-insecure-arg if you must)"}
		}
		c, err := couchdb.ParseURL(raw)
		if err != nil {
			return remoteSpec{}, usageError{err.Error()}
		}
		return remoteSpec{kind: "couchdb", couch: c, id: couchdb.DatabaseURL(c)}, nil
	case "s3":
		if secret && !fromConfig {
			return remoteSpec{}, usageError{"the bucket URL holds a secret key, which other users can see in the process list; " +
				"give it with $LIVESYNC_S3_SECRET_KEY, --password-file or the prompt instead (or --password-insecure-arg if you must)"}
		}
		l, err := minio.ParseURL(raw)
		if err != nil {
			return remoteSpec{}, usageError{err.Error()}
		}
		return remoteSpec{kind: "s3", s3: l, id: minio.BucketURL(l.Config)}, nil
	case "p2p":
		group, err := parseP2PURL(raw)
		if err != nil {
			return remoteSpec{}, err
		}
		return remoteSpec{kind: "p2p", group: group, id: "p2p://" + group}, nil
	}
	return remoteSpec{}, usageError{fmt.Sprintf("unknown kind of remote %q: use an http:// or https:// CouchDB database URL, an s3:// bucket URL, or p2p://GROUP (the approved peers of a sync group)", u.Scheme)}
}

// connectOptions are what a command asks of the connection.
type connectOptions struct {
	// create creates a missing database (push, sync, import).
	create bool
	// newVault holds the command line's settings for a new vault.
	newVault vaultConfig
	// readOnly connects without writing anything to the remote: no
	// database, salt or milestone entry, and a locked remote is read
	// without joining it (ls --remote, cat --remote, export with a
	// throwaway replica).
	readOnly bool
}

// link is a remote attached to the replica's vault.
type link struct {
	*vault.Link
	v      *vault.Vault
	bucket string // the bucket's name, for a journal bucket
	// closed, if set, is called once the remote is closed (a peer's
	// link releases its group's session).
	closed func()
}

// connect opens the remote of spec (resolving its password or secret
// key) and attaches it to the replica's vault: the vault's settings are
// the replica's, else the command line's or the configuration's for a
// new vault, else the remote's preferred ones; the passphrase is asked
// when the vault needs one; the handshake and the passphrase check are
// the vault's (vault.Vault.Attach). A locked remote is joined by an
// empty replica and refused with a *lockedError otherwise.
func (c *command) connect(spec remoteSpec, rep *replica, o connectOptions) (*link, error) {
	r, bucket, err := c.openRemote(spec)
	if err != nil {
		return nil, err
	}
	cfg, err := c.config()
	if err != nil {
		return nil, err
	}
	dev := deviceInfoFor(cfg.DeviceName, rep, spec)
	ao := vault.AttachOptions{Create: o.create, ReadOnly: o.readOnly, Device: &dev,
		Passphrase: func() (string, error) { return c.passphraseFor(&spec, c.cf) },
		Admit:      func(_ context.Context, l vault.Locked) (bool, error) { return c.admit(spec, l) }}
	ao.NewVault = newVaultOf(spec, o.newVault)
	l, err := rep.v.Attach(c.ctx, r, ao)
	if err != nil {
		r.Close()
		var ue usageError
		var pe *vault.PassphraseError
		if errors.As(err, &ue) || (errors.As(err, &pe) && pe.Remote == "") {
			return nil, rep.fileErr("", err)
		}
		return nil, &remoteError{remote: spec.String(), err: remoteErr(err), bucket: bucket}
	}
	return &link{Link: l, v: rep.v, bucket: bucket}, nil
}

// newVaultOf returns the settings of a new vault on spec that the
// command line (flags) and the configuration set, nil when they set none:
// the remote's preferred settings, else the defaults, apply then.
func newVaultOf(spec remoteSpec, flags vaultConfig) *livesync.Settings {
	explicit := spec.cfg.vaultConfig.merge(flags)
	if !explicit.isSet() {
		return nil
	}
	s := newVaultSettings(explicit, spec.kind == "s3")
	return &s
}

// openRemote resolves the password or secret key of spec and opens its
// database or bucket (no request is made); for a bucket it also returns
// its name.
func (c *command) openRemote(spec remoteSpec) (vault.Remote, string, error) {
	switch spec.kind {
	case "couchdb":
		cfg, err := c.couchConfig(spec, c.cf)
		if err != nil {
			return nil, "", err
		}
		r, err := couchdb.NewRemote(cfg, couchdb.RemoteOptions{ID: spec.String()})
		if err != nil {
			return nil, "", usageError{err.Error()}
		}
		return r, "", nil
	case "s3":
		cfg, err := c.bucketConfig(spec, c.cf)
		if err != nil {
			return nil, "", err
		}
		r, err := minio.NewRemote(cfg, minio.RemoteOptions{ID: spec.String(), DirectFetch: spec.s3.DirectFetch})
		if err != nil {
			return nil, "", bucketConfigError(err)
		}
		return r, spec.s3.Bucket, nil
	case "p2p":
		return nil, "", refuseP2P(spec, c.cmd)
	}
	return nil, "", usageError{fmt.Sprintf("unknown kind of remote %q", spec.kind)}
}

// remoteErr puts an error of the vault about a remote in the CLI's
// words.
func remoteErr(err error) error {
	var pe *vault.PassphraseError
	if errors.As(err, &pe) {
		return &passphraseError{remote: pe.Remote, docID: pe.DocID, what: pe.What}
	}
	return err
}

// wrap names the remote in its errors (the local replica's errors are
// already *localError and keep their own name).
func (l *link) wrap(err error) error {
	var le *localError
	var re *remoteError
	if err == nil || errors.As(err, &le) || errors.As(err, &re) || errors.Is(err, context.Canceled) {
		return err
	}
	return &remoteError{remote: l.ID(), err: remoteErr(err), bucket: l.bucket}
}

// Close detaches the remote from the vault and closes it.
func (l *link) Close() error {
	l.v.Detach(l.Link)
	err := l.Remote().Close()
	if l.closed != nil {
		l.closed()
	}
	return err
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
	return negotiate.DeviceInfo{DeviceName: deviceName(name), VaultName: vaultNameFor(r, spec), AppVersion: "livesync-go", PluginVersion: "livesync-go"}
}
