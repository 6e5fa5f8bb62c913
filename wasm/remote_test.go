//go:build js && wasm

package main

import (
	"errors"
	"syscall/js"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/setupuri"
)

func TestParseRemote(t *testing.T) {
	good := []struct {
		in   map[string]any
		want remoteOptions
	}{
		{map[string]any{"url": "http://h/db", "user": "u", "password": "p", "create": true},
			remoteOptions{kind: remoteCouchDB, url: "http://h/db", user: "u", password: "p", create: true}},
		{map[string]any{"kind": "couchdb", "url": "http://h/db"}, remoteOptions{kind: remoteCouchDB, url: "http://h/db"}},
		{map[string]any{"kind": "s3", "endpoint": "https://s3", "bucket": "b", "accessKey": "a", "secretKey": "s", "region": "r", "prefix": "v/"},
			remoteOptions{kind: remoteS3, endpoint: "https://s3", bucket: "b", accessKey: "a", secretKey: "s", region: "r", prefix: "v/"}},
	}
	for _, c := range good {
		got, err := parseRemote(js.ValueOf(c.in))
		if err != nil || *got != c.want {
			t.Errorf("parseRemote(%v) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	bad := []map[string]any{
		{"user": "u"},                                // no url
		{"kind": "s3", "bucket": "b"},                // no endpoint
		{"kind": "s3", "endpoint": "https://s3"},     // no bucket
		{"kind": "ftp", "url": "ftp://h"},            // unknown kind
		{"kind": "s3", "endpoint": 1, "bucket": "b"}, // not a string
		{"url": "http://h/db", "create": "yes"},      // not a boolean
	}
	for _, in := range bad {
		var oe *optionsError
		if _, err := parseRemote(js.ValueOf(in)); !errors.As(err, &oe) {
			t.Errorf("parseRemote(%v): %v, want an options error", in, err)
		}
	}
}

func TestRemoteKindOfSettings(t *testing.T) {
	cases := []struct {
		cfg  setupuri.Config
		want string
	}{
		{setupuri.Config{RemoteType: setupuri.RemoteCouchDB, CouchDB: setupuri.CouchDB{URI: "http://h"}}, remoteCouchDB},
		{setupuri.Config{RemoteType: setupuri.RemoteCouchDB}, ""},
		{setupuri.Config{RemoteType: setupuri.RemoteS3, S3: setupuri.S3{Endpoint: "https://s3", Bucket: "b"}}, remoteS3},
		{setupuri.Config{RemoteType: setupuri.RemoteS3}, ""},
	}
	for _, c := range cases {
		if got, err := (openOptions{}).remoteKind(&c.cfg); got != c.want || err != nil {
			t.Errorf("remoteKind(%q) = %q, %v; want %q", c.cfg.RemoteType, got, err, c.want)
		}
	}
	p2p := setupuri.Config{RemoteType: setupuri.RemoteP2P}
	if _, err := (openOptions{}).remoteKind(&p2p); !errors.Is(err, engine.ErrUnsupported) {
		t.Errorf("remoteKind(ONLY_P2P): %v, want unsupported", err)
	}
}

// A remote whose adapter the build left out fails with code unsupported.
func TestMissingAdapterIsUnsupported(t *testing.T) {
	saved := remoteAdapters
	defer func() { remoteAdapters = saved }()
	remoteAdapters = map[string]remoteAdapter{}
	for _, ro := range []*remoteOptions{{kind: remoteCouchDB, url: "http://h/db"}, {kind: remoteS3, endpoint: "https://s3", bucket: "b"}} {
		o := openOptions{remote: ro, fetch: js.Global().Get("fetch")}
		_, _, err := o.newRemote(nil)
		if code := classify(err).Code; code != CodeUnsupported {
			t.Errorf("%s remote without its adapter: %v (code %q), want code %q", ro.kind, err, code, CodeUnsupported)
		}
	}
}
