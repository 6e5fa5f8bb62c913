//go:build js && wasm

package main

import (
	"context"
	"fmt"
	"net/http"
	"syscall/js"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/setupuri"
	"github.com/livesync-go/livesync-go/engine/vault"
	"github.com/livesync-go/livesync-go/wasm/internal/hosthttp"
)

// openOptions are open()'s options, read from JS before any work.
type openOptions struct {
	setupURI, setupPassphrase string
	settingsJSON              string // the settings object, "" if none
	passphrase                string
	device                    string
	remote                    *remoteOptions // nil: the settings' remote, if any
	client                    *http.Client   // HTTP through the host
	storage                   storageOptions // where the replica lives
}

// remoteOptions are open's remote: {url, user, password, create}.
type remoteOptions struct {
	url, user, password string
	create              bool // create a missing database
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
		ro := &remoteOptions{}
		for key, dst := range map[string]*string{"url": &ro.url, "user": &ro.user, "password": &ro.password} {
			if *dst, err = str(r, key); err != nil {
				return oo, err
			}
		}
		if ro.url == "" {
			return oo, &optionsError{msg: "remote.url must be the database's URL, https://host:5984/DATABASE"}
		}
		if ro.create, err = boolean(r, "create"); err != nil {
			return oo, err
		}
		oo.remote = ro
	}
	fetch := js.Global().Get("fetch")
	if host := o.Get("host"); host.Type() == js.TypeObject && !host.Get("fetch").IsUndefined() {
		fetch = host.Get("fetch")
	}
	if tr, err := hosthttp.New(fetch); err == nil {
		oo.client = &http.Client{Transport: tr}
	}
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

// couchConfig is the remote to attach: open's remote, else the
// settings' CouchDB; nil when there is none.
func (o openOptions) couchConfig(cfg *setupuri.Config) (*couchdb.Config, bool, error) {
	var cc couchdb.Config
	create := false
	switch {
	case o.remote != nil:
		var err error
		if cc, err = couchdb.ParseURL(o.remote.url); err != nil {
			return nil, false, &optionsError{msg: err.Error()}
		}
		if o.remote.user != "" {
			cc.User = o.remote.user
		}
		if o.remote.password != "" {
			cc.Password = o.remote.password
		}
		create = o.remote.create
	case cfg == nil:
		return nil, false, nil
	case cfg.RemoteType != setupuri.RemoteCouchDB:
		return nil, false, &optionsError{msg: fmt.Sprintf("the settings' remote type %q is not supported by this build yet: only CouchDB", cfg.RemoteType)}
	case cfg.CouchDB.URI == "":
		return nil, false, nil
	default:
		cc = couchdb.Config{URL: cfg.CouchDB.URI, Database: cfg.CouchDB.Database, User: cfg.CouchDB.User, Password: cfg.CouchDB.Password}
	}
	if o.client == nil {
		return nil, false, &optionsError{msg: "host.fetch must be a fetch-compatible function (none was given and there is no global fetch)"}
	}
	cc.HTTPClient = o.client
	return &cc, create, nil
}

// open opens a memory replica's vault and attaches the remote.
func open(o openOptions) (_ any, err error) {
	cfg, err := o.config()
	if err != nil {
		return nil, err
	}
	cc, create, err := o.couchConfig(cfg)
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
	h := &handle{ctx: ctx, cancel: cancel}
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
	if cc != nil {
		if h.remote, err = couchdb.NewRemote(*cc, couchdb.RemoteOptions{}); err != nil {
			return nil, &optionsError{msg: err.Error()}
		}
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
