//go:build js && wasm

package main

import (
	"context"
	"fmt"
	"syscall/js"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/setupuri"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// openOptions are open()'s options, read from JS before any work.
type openOptions struct {
	setupURI, setupPassphrase string
	settingsJSON              string // the settings object, "" if none
	passphrase                string
	device                    string
	remote                    *remoteOptions // nil: the settings' remote, if any
	fetch                     js.Value       // the host's fetch: HTTP goes through it
	storage                   storageOptions // where the replica lives
}

// The kinds of remote open's remote option names (remote.kind).
const (
	remoteCouchDB = "couchdb" // a CouchDB database, the default kind
	remoteS3      = "s3"      // an S3 bucket holding the journal
)

// remoteOptions are open's remote: a CouchDB database {url, user,
// password, create} or an S3 bucket {kind: "s3", endpoint, bucket,
// accessKey, secretKey, region, prefix, create}.
type remoteOptions struct {
	kind                string // remoteCouchDB or remoteS3
	url, user, password string // CouchDB
	// S3: region "" is asked from the server; prefix is the LiveSync
	// bucket prefix ("my-vault/").
	endpoint, bucket, accessKey, secretKey, region, prefix string
	create                                                 bool // create the vault on an empty remote
}

// remoteAdapter makes the vault.Remote of one kind, from open's remote
// (r not nil) or else from the settings' (cfg). The file of each adapter
// this build includes (remote_couchdb.go, remote_s3.go) registers its
// own in remoteAdapters, so that a build tag leaves the adapter and its
// dependencies out of the module.
//
// fetch is the host's fetch function; an adapter sends its requests
// through it with hostClient (remote_http.go, which only a build with a
// remote adapter includes: net/http costs the module about 0.36 MB
// brotli).
type remoteAdapter func(r *remoteOptions, cfg *setupuri.Config, fetch js.Value) (vault.Remote, error)

var remoteAdapters = map[string]remoteAdapter{}

// parseRemote reads open's remote option.
func parseRemote(r js.Value) (*remoteOptions, error) {
	ro := &remoteOptions{}
	var err error
	if ro.kind, err = str(r, "kind"); err != nil {
		return nil, err
	}
	if ro.create, err = boolean(r, "create"); err != nil {
		return nil, err
	}
	var keys map[string]*string
	switch ro.kind {
	case "", remoteCouchDB:
		ro.kind = remoteCouchDB
		keys = map[string]*string{"url": &ro.url, "user": &ro.user, "password": &ro.password}
	case remoteS3:
		keys = map[string]*string{"endpoint": &ro.endpoint, "bucket": &ro.bucket, "accessKey": &ro.accessKey,
			"secretKey": &ro.secretKey, "region": &ro.region, "prefix": &ro.prefix}
	default:
		return nil, &optionsError{msg: fmt.Sprintf("remote.kind %q: want \"couchdb\" (the default) or \"s3\"", ro.kind)}
	}
	for key, dst := range keys {
		if *dst, err = str(r, key); err != nil {
			return nil, err
		}
	}
	switch {
	case ro.kind == remoteCouchDB && ro.url == "":
		return nil, &optionsError{msg: "remote.url must be the database's URL, https://host:5984/DATABASE"}
	case ro.kind == remoteS3 && (ro.endpoint == "" || ro.bucket == ""):
		return nil, &optionsError{msg: "an S3 remote needs remote.endpoint (https://host[:port]) and remote.bucket"}
	}
	return ro, nil
}

// parseOpen reads open's options:
//
//	{settings | setupURI + setupPassphrase, passphrase, device,
//	 remote: {url, user, password, create}, storage: "memory", host: {fetch}}
//
// settings is the plugin's settings object (its keys: encrypt,
// usePathObfuscation, customChunkSize, couchDB_URI, …); setupURI is the
// plugin's Setup URI (obsidian://setuplivesync?settings=…). passphrase is
// the vault's E2EE passphrase (it wins over the settings'); remote.url
// is the database's URL and wins over the settings' remote.
func parseOpen(o js.Value) (openOptions, error) {
	var oo openOptions
	if o.Type() != js.TypeObject {
		return oo, &optionsError{msg: "open needs an options object"}
	}
	var err error
	if oo.storage, err = parseStorage(o.Get("storage")); err != nil {
		return oo, err
	}
	for key, dst := range map[string]*string{"setupURI": &oo.setupURI, "setupPassphrase": &oo.setupPassphrase,
		"passphrase": &oo.passphrase, "device": &oo.device} {
		if *dst, err = str(o, key); err != nil {
			return oo, err
		}
	}
	switch s := o.Get("settings"); {
	case s.Type() == js.TypeObject && oo.setupURI != "":
		return oo, &optionsError{msg: "pass settings or setupURI, not both"}
	case s.Type() == js.TypeObject:
		oo.settingsJSON = js.Global().Get("JSON").Call("stringify", s).String()
	case !s.IsUndefined() && !s.IsNull():
		return oo, &optionsError{msg: "settings must be the plugin's settings object"}
	}
	if oo.setupURI != "" && oo.setupPassphrase == "" {
		return oo, &optionsError{msg: "a setupURI needs its setupPassphrase (the passphrase the Setup URI was made with)"}
	}
	if r := o.Get("remote"); r.Type() == js.TypeObject {
		if oo.remote, err = parseRemote(r); err != nil {
			return oo, err
		}
	}
	fetch := js.Global().Get("fetch")
	if host := o.Get("host"); host.Type() == js.TypeObject && !host.Get("fetch").IsUndefined() {
		fetch = host.Get("fetch")
	}
	oo.fetch = fetch
	return oo, nil
}

// config is the vault's settings and remote from settings or setupURI
// (nil when neither was given). Parsing a Setup URI derives a key, so it
// runs here, off the host's event loop.
func (o openOptions) config() (*setupuri.Config, error) {
	var cfg *setupuri.Config
	var err error
	switch {
	case o.setupURI != "":
		cfg, err = setupuri.Parse(o.setupURI, o.setupPassphrase)
	case o.settingsJSON != "":
		cfg, err = setupuri.FromJSON([]byte(o.settingsJSON))
		if err == nil {
			var tv negotiate.TweakValues
			if tv.UnmarshalJSON([]byte(o.settingsJSON)) == nil && !tv.Has("customChunkSize") {
				cfg.Vault.CustomChunkSize = vault.DefaultSettings(false).CustomChunkSize
			}
		}
	default:
		return nil, nil
	}
	if err != nil {
		return nil, &optionsError{msg: err.Error(), err: err}
	}
	if o.passphrase != "" {
		cfg.Vault.Passphrase = o.passphrase
	}
	if err := cfg.Validate(); err != nil {
		return nil, &optionsError{msg: "settings: " + err.Error(), err: err}
	}
	return cfg, nil
}

// remoteKind is the kind of the remote to attach: open's remote's, else
// the settings'; "" when there is none.
func (o openOptions) remoteKind(cfg *setupuri.Config) (string, error) {
	switch {
	case o.remote != nil:
		return o.remote.kind, nil
	case cfg == nil:
		return "", nil
	case cfg.RemoteType == setupuri.RemoteCouchDB:
		if cfg.CouchDB.URI == "" {
			return "", nil
		}
		return remoteCouchDB, nil
	case cfg.RemoteType == setupuri.RemoteS3:
		if cfg.S3.Endpoint == "" && cfg.S3.Bucket == "" {
			return "", nil
		}
		return remoteS3, nil
	}
	return "", fmt.Errorf("the settings' remote type %q is not supported: only CouchDB and S3 (MINIO): %w", cfg.RemoteType, engine.ErrUnsupported)
}

// newRemote makes the remote to attach (nil when there is none) and says
// whether a missing vault may be created on it. It does not contact the
// server.
func (o openOptions) newRemote(cfg *setupuri.Config) (vault.Remote, bool, error) {
	kind, err := o.remoteKind(cfg)
	if err != nil || kind == "" {
		return nil, false, err
	}
	adapter, ok := remoteAdapters[kind]
	if !ok {
		return nil, false, fmt.Errorf("this build of livesync.wasm has no %s remote (it was built without that adapter): %w", kind, engine.ErrUnsupported)
	}
	if o.fetch.Type() != js.TypeFunction {
		return nil, false, &optionsError{msg: "host.fetch must be a fetch-compatible function (none was given and there is no global fetch)"}
	}
	r, err := adapter(o.remote, cfg, o.fetch)
	if err != nil {
		return nil, false, err
	}
	return r, o.remote != nil && o.remote.create, nil
}

// open opens a memory replica's vault and attaches the remote.
func open(o openOptions) (_ any, err error) {
	cfg, err := o.config()
	if err != nil {
		return nil, err
	}
	remote, create, err := o.newRemote(cfg)
	if err != nil {
		return nil, err
	}
	var settings *livesync.Settings
	dev := negotiate.DeviceInfo{DeviceName: o.device, AppVersion: "livesync-go-wasm", PluginVersion: "livesync-go-wasm"}
	passphrase := o.passphrase
	if cfg != nil {
		settings, passphrase = &cfg.Vault, cfg.Vault.Passphrase
		if dev.DeviceName == "" {
			dev.DeviceName = cfg.DeviceName
		}
	}
	if dev.DeviceName == "" {
		dev.DeviceName = "livesync-go-wasm"
	}

	ctx, cancel := context.WithCancel(context.Background())
	h := &handle{ctx: ctx, cancel: cancel, remote: remote, passphrase: passphrase}
	openHandles.add(h)
	defer func() {
		if err != nil {
			h.shutdown()
		}
	}()
	if h.st, err = openStore(ctx, o.storage); err != nil {
		return nil, err
	}
	if h.v, err = vault.Open(ctx, h.st, vault.Options{Settings: settings, Passphrase: passphrase, Device: dev}); err != nil {
		return nil, err
	}
	if h.remote != nil {
		ao := vault.AttachOptions{Create: create, NewVault: settings, Passphrase: func() (string, error) {
			if passphrase == "" {
				return "", vault.ErrNeedPassphrase
			}
			return passphrase, nil
		}}
		if h.link, err = h.v.Attach(ctx, h.remote, ao); err != nil {
			return nil, err
		}
	} else if !h.v.HasVault() {
		return nil, vault.ErrNoVault
	}
	h.startEvents()
	return h.object(), nil
}
