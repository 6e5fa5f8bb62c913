//go:build js && wasm && !nocouchdb

package main

import (
	"syscall/js"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine/setupuri"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// The CouchDB remote; the build tag nocouchdb leaves it out.
func init() { remoteAdapters[remoteCouchDB] = newCouchRemote }

// newCouchRemote is open's remote {url, user, password} (user and
// password win over the URL's), else the settings' CouchDB.
func newCouchRemote(r *remoteOptions, cfg *setupuri.Config, fetch js.Value) (vault.Remote, error) {
	client, err := hostClient(fetch)
	if err != nil {
		return nil, err
	}
	var cc couchdb.Config
	if r != nil {
		if cc, err = couchdb.ParseURL(r.url); err != nil {
			return nil, &optionsError{msg: err.Error()}
		}
		if r.user != "" {
			cc.User = r.user
		}
		if r.password != "" {
			cc.Password = r.password
		}
	} else {
		cc = couchdb.Config{URL: cfg.CouchDB.URI, Database: cfg.CouchDB.Database, User: cfg.CouchDB.User, Password: cfg.CouchDB.Password}
	}
	cc.HTTPClient = client
	remote, err := couchdb.NewRemote(cc, couchdb.RemoteOptions{})
	if err != nil {
		return nil, &optionsError{msg: err.Error()}
	}
	return remote, nil
}
