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
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault"
	"github.com/livesync-go/livesync-go/wasm/internal/hosthttp"
)

// openOptions are open()'s options, read from JS before any work.
type openOptions struct {
	settings   *livesync.Settings // a new vault's settings, nil: the remote's
	passphrase string
	remote     *couchdb.Config // nil: no remote
	create     bool            // create a missing database
	device     string
}

// parseOpen reads open's options:
//
//	{settings, passphrase, remote: {url, user, password, create},
//	 storage: "memory", device, host: {fetch}}
//
// settings are the plugin's settings object (its keys, such as encrypt,
// usePathObfuscation, customChunkSize); url is the database's URL.
func parseOpen(o js.Value) (openOptions, error) {
	var oo openOptions
	if o.Type() != js.TypeObject {
		return oo, &optionsError{"open needs an options object"}
	}
	storage, err := str(o, "storage")
	if err != nil {
		return oo, err
	}
	if storage != "" && storage != "memory" {
		return oo, &optionsError{fmt.Sprintf("storage %q is not available: this build keeps the replica in memory (storage: \"memory\")", storage)}
	}
	if uri, _ := str(o, "setupURI"); uri != "" {
		return oo, &optionsError{"setupURI is not supported by this build yet: pass settings and remote"}
	}
	if oo.passphrase, err = str(o, "passphrase"); err != nil {
		return oo, err
	}
	if oo.device, err = str(o, "device"); err != nil {
		return oo, err
	}
	if s := o.Get("settings"); s.Type() == js.TypeObject {
		if oo.passphrase == "" {
			oo.passphrase, _ = str(s, "passphrase")
		}
		if oo.settings, err = settingsOf(s, oo.passphrase); err != nil {
			return oo, err
		}
	}
	if r := o.Get("remote"); r.Type() == js.TypeObject {
		if oo.remote, err = remoteOf(r, o.Get("host")); err != nil {
			return oo, err
		}
		if oo.create, err = boolean(r, "create"); err != nil {
			return oo, err
		}
	}
	return oo, nil
}

// settingsOf reads the plugin's settings object (its tweak values).
func settingsOf(s js.Value, passphrase string) (*livesync.Settings, error) {
	raw := js.Global().Get("JSON").Call("stringify", s).String()
	var tv negotiate.TweakValues
	if err := tv.UnmarshalJSON([]byte(raw)); err != nil {
		return nil, &optionsError{"settings: " + err.Error()}
	}
	base := vault.DefaultSettings(false)
	base.Passphrase = passphrase
	st, err := livesync.FromTweakValues(base, tv)
	if err != nil {
		return nil, &optionsError{"settings: " + err.Error()}
	}
	return &st, nil
}

// remoteOf reads remote: {url, user, password}, with HTTP through
// host.fetch (else the global fetch).
func remoteOf(r, host js.Value) (*couchdb.Config, error) {
	u, err := str(r, "url")
	if err != nil || u == "" {
		return nil, &optionsError{"remote.url must be the database's URL, https://host:5984/DATABASE"}
	}
	cfg, err := couchdb.ParseURL(u)
	if err != nil {
		return nil, &optionsError{err.Error()}
	}
	if user, _ := str(r, "user"); user != "" {
		cfg.User = user
	}
	if pw, _ := str(r, "password"); pw != "" {
		cfg.Password = pw
	}
	fetch := js.Global().Get("fetch")
	if host.Type() == js.TypeObject && !host.Get("fetch").IsUndefined() {
		fetch = host.Get("fetch")
	}
	tr, err := hosthttp.New(fetch)
	if err != nil {
		return nil, &optionsError{"host.fetch must be a fetch-compatible function (none was given and there is no global fetch)"}
	}
	cfg.HTTPClient = &http.Client{Transport: tr}
	return &cfg, nil
}

// open opens a memory replica's vault and attaches the remote.
func open(o openOptions) (_ any, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	h := &handle{ctx: ctx, cancel: cancel}
	defer func() {
		if err != nil {
			h.shutdown()
		}
	}()
	if h.st, err = store.NewMemory(store.Options{Name: "livesync-wasm"}); err != nil {
		return nil, err
	}
	dev := negotiate.DeviceInfo{DeviceName: o.device, AppVersion: "livesync-go-wasm", PluginVersion: "livesync-go-wasm"}
	if dev.DeviceName == "" {
		dev.DeviceName = "livesync-go-wasm"
	}
	if h.v, err = vault.Open(ctx, h.st, vault.Options{Settings: o.settings, Passphrase: o.passphrase, Device: dev}); err != nil {
		return nil, err
	}
	if o.remote != nil {
		if h.remote, err = couchdb.NewRemote(*o.remote, couchdb.RemoteOptions{}); err != nil {
			return nil, &optionsError{err.Error()}
		}
		ao := vault.AttachOptions{Create: o.create, NewVault: o.settings, Passphrase: func() (string, error) {
			if o.passphrase == "" {
				return "", vault.ErrNeedPassphrase
			}
			return o.passphrase, nil
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
