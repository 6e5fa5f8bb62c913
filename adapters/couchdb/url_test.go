package couchdb

import (
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		raw, id string
		want    Config
	}{
		{"https://alice@couch.example:6984/vault", "https://couch.example:6984/vault",
			Config{URL: "https://couch.example:6984", Database: "vault", User: "alice"}},
		{"http://bob:in-config@10.0.0.2:5984/proxy/path/db", "http://10.0.0.2:5984/proxy/path/db",
			Config{URL: "http://10.0.0.2:5984/proxy/path", Database: "db", User: "bob", Password: "in-config"}},
		{"http://carol@127.0.0.1:5984/notes/", "http://127.0.0.1:5984/notes",
			Config{URL: "http://127.0.0.1:5984", Database: "notes", User: "carol"}},
		{"https://couch.example/db?x=1#y", "https://couch.example/db", Config{URL: "https://couch.example", Database: "db"}},
	} {
		cfg, err := ParseURL(tc.raw)
		if err != nil || cfg != tc.want || DatabaseURL(cfg) != tc.id {
			t.Errorf("ParseURL(%q) = %+v (%s), %v; want %+v (%s)", tc.raw, cfg, DatabaseURL(cfg), err, tc.want, tc.id)
		}
	}
	for _, tc := range []struct{ raw, want string }{
		{"http://alice:s3cret@127.0.0.1:5984/", "the remote URL http://127.0.0.1:5984/ names no database: use https://host:5984/DATABASE"},
		{"http:///db", "names no database"},
		{"ftp://alice:s3cret@h/db", `scheme "ftp"`},
		{"http://alice:s3cret@h:port/db", "not a valid URL"},
	} {
		_, err := ParseURL(tc.raw)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseURL(%q): %v, want an error saying %q without the password", tc.raw, err, tc.want)
		}
	}
}
