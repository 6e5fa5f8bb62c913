package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/minio"
)

func testEnv(vars map[string]string) *cliEnv {
	return &cliEnv{ctx: context.Background(), stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard,
		getenv: func(k string) string { return vars[k] }}
}

func TestParseArgsInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		pos      []string
		json     bool
		store    string
		isUsage  bool
		helpWant bool
	}{
		{args: []string{"home", "--json"}, pos: []string{"home"}, json: true},
		{args: []string{"--json", "home", "--store", "x.db"}, pos: []string{"home"}, json: true, store: "x.db"},
		{args: []string{"a", "b", "--store=y", "c"}, pos: []string{"a", "b", "c"}, store: "y"},
		{args: []string{"a", "--", "--json", "-"}, pos: []string{"a", "--json", "-"}},
		{args: []string{"-", "--json"}, pos: []string{"-"}, json: true},
		{args: []string{"--bogus"}, isUsage: true},
		{args: []string{"-h"}, helpWant: true},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		js := fs.Bool("json", false, "")
		st := fs.String("store", "", "")
		pos, err := parseArgs(fs, tc.args)
		switch {
		case tc.isUsage:
			if !errors.As(err, new(usageError)) {
				t.Errorf("%v: %v, want a usage error", tc.args, err)
			}
		case tc.helpWant:
			if !errors.Is(err, flag.ErrHelp) {
				t.Errorf("%v: %v, want ErrHelp", tc.args, err)
			}
		case err != nil || !slices.Equal(pos, tc.pos) || *js != tc.json || *st != tc.store:
			t.Errorf("%v: pos %q json %v store %q err %v", tc.args, pos, *js, *st, err)
		}
	}
}

func TestResolveRemote(t *testing.T) {
	cfg := &config{DefaultRemote: "home", Remotes: map[string]*remoteConfig{
		"home":  {URL: "https://alice@couch.example:6984/vault", PasswordFile: "/pw"},
		"inner": {URL: "http://bob:in-config@10.0.0.2:5984/proxy/path/db"},
	}}
	for _, tc := range []struct {
		arg, url, user, name, password string
	}{
		{"", "https://couch.example:6984/vault", "alice", "home", ""},
		{"home", "https://couch.example:6984/vault", "alice", "home", ""},
		{"inner", "http://10.0.0.2:5984/proxy/path/db", "bob", "inner", "in-config"},
		{"http://carol@127.0.0.1:5984/notes/", "http://127.0.0.1:5984/notes", "carol", "", ""},
		{"https://couch.example/db?x=1#y", "https://couch.example/db", "", "", ""},
	} {
		spec, err := resolveRemote(cfg, tc.arg)
		if err != nil || spec.String() != tc.url || spec.couch.User != tc.user || spec.name != tc.name || spec.couch.Password != tc.password || spec.kind != "couchdb" {
			t.Errorf("%q: %+v %v", tc.arg, spec, err)
		}
	}
	for _, tc := range []struct{ arg, want string }{
		{"http://alice:s3cret@127.0.0.1:5984/db", "process list"},
		{"s3://AK:s3cret@minio.example:9000/vaults/", "process list"},
		{"s3://minio.example:9000/", "names no bucket"},
		{"s3://minio.example:9000/b/?tsl=1", "unknown parameter"},
		{"s3://minio.example:9000/b/?tls=maybe", "want 1 or 0"},
		{"s3://minio.example:9000/b/?path-style=1&virtual-host=1", "both"},
		{"ftp://host/db", "unknown kind"},
		{"http://127.0.0.1:5984/", "names no database"},
		{"nowhere", "neither a URL nor a remote"},
	} {
		_, err := resolveRemote(cfg, tc.arg)
		if !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: %v, want a usage error mentioning %q", tc.arg, err, tc.want)
		}
	}
	if _, err := resolveRemote(&config{}, ""); !errors.As(err, new(usageError)) {
		t.Errorf("no remote and no default: %v", err)
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	write := func(p, s string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	def := write(filepath.Join(home, ".config", "livesync", "config.toml"), `
store = "vault/store.db"
default_remote = "home"
device_name = "laptop"

[remote.home]
url = "https://alice@couch.example:6984/vault"
password_file = "~/pw"
passphrase_file = "/etc/livesync/pass"
e2ee = true
custom_chunk_size = 10
`)
	cfg, err := testEnv(map[string]string{"HOME": home}).loadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Remotes["home"]
	if cfg.path != def || cfg.Store != filepath.Join(filepath.Dir(def), "vault/store.db") || cfg.DeviceName != "laptop" ||
		r.PasswordFile != filepath.Join(home, "pw") || r.PassphraseFile != "/etc/livesync/pass" ||
		r.E2EE == nil || !*r.E2EE || r.ObfuscatePaths != nil || *r.CustomChunkSize != 10 {
		t.Errorf("config: %+v, remote %+v", cfg, r)
	}
	// $XDG_CONFIG_HOME and $LIVESYNC_CONFIG take precedence; a missing
	// default file is no configuration, a missing named one an error.
	if cfg, err := testEnv(map[string]string{"HOME": home, "XDG_CONFIG_HOME": filepath.Join(dir, "none")}).loadConfig(""); err != nil || cfg.path != "" {
		t.Errorf("missing default file: %+v %v", cfg, err)
	}
	if _, err := testEnv(map[string]string{"LIVESYNC_CONFIG": filepath.Join(dir, "none.toml")}).loadConfig(""); !errors.As(err, new(usageError)) {
		t.Errorf("missing named file: %v", err)
	}
	for name, body := range map[string]string{
		"unknown key":     "[remote.x]\nurl = \"http://h/db\"\npasword_file = \"typo\"\n",
		"no url":          "[remote.x]\nuser = \"a\"\n",
		"bad default":     "default_remote = \"y\"\n[remote.x]\nurl = \"http://h/db\"\n",
		"not toml":        "url = = 3",
		"wrong type":      "[remote.x]\nurl = \"http://h/db\"\ne2ee = \"yes\"\n",
		"top-level typos": "stroe = \"x\"\n",
	} {
		p := write(filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".toml"), body)
		if _, err := testEnv(nil).loadConfig(p); !errors.As(err, new(usageError)) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
}

func TestSecretPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "flag")
	cfgFile := filepath.Join(dir, "config")
	os.WriteFile(file, []byte("from-file\r\n"), 0o600)
	os.WriteFile(cfgFile, []byte("from-config\n"), 0o600)
	prompts := 0
	env := testEnv(map[string]string{"LIVESYNC_PASSPHRASE": "from-env"})
	env.readSecret = func(string) (string, error) { prompts++; return "from-prompt", nil }
	src := secretSource{what: "passphrase", envVar: "LIVESYNC_PASSPHRASE", prompt: "? "}
	check := func(s secretSource, want string) {
		t.Helper()
		if got, err := env.secret(s); err != nil || got != want {
			t.Errorf("%+v: %q %v, want %q", s, got, err, want)
		}
	}
	s := src
	s.insecureArg, s.file, s.configFile = "from-arg", file, cfgFile
	check(s, "from-arg")
	s.insecureArg = ""
	check(s, "from-file")
	s.file = ""
	check(s, "from-env")
	env.getenv = func(string) string { return "" }
	check(s, "from-config")
	s.configFile = ""
	check(s, "from-prompt")
	env.readSecret = nil // no terminal: nothing, and no prompt
	check(s, "")
	if prompts != 1 {
		t.Errorf("prompted %d times, want once", prompts)
	}
	s.file = filepath.Join(dir, "missing")
	if _, err := env.secret(s); !errors.As(err, new(usageError)) {
		t.Errorf("missing file: %v", err)
	}
}

// The passphrase prompt appears only on a terminal and only when the
// vault needs a passphrase; without a terminal the error says how to give
// one.
func TestPassphrasePrompt(t *testing.T) {
	s := newSession(t)
	asked := 0
	var errb strings.Builder
	env := &cliEnv{ctx: context.Background(), stdin: strings.NewReader("note\n"), stdout: io.Discard, stderr: &errb,
		getenv: func(string) string { return "" }, stdinTerminal: true,
		readSecret: func(prompt string) (string, error) { asked++; return "typed", nil }}
	if code := runEnv(env, []string{"put", "a.md", "-", "--encrypt", "--store", s.store}); code != exitOK || asked != 1 {
		t.Fatalf("exit %d, asked %d times: %s", code, asked, errb.String())
	}
	if strings.Contains(errb.String(), "typed") {
		t.Error("the passphrase was printed")
	}
	s.env["LIVESYNC_PASSPHRASE"] = "typed"
	if out := s.ok("", "cat", "a.md"); out != "note\n" {
		t.Errorf("cat with the passphrase typed before: %q", out)
	}
	s2 := newSession(t)
	s2.ok("plain\n", "put", "p.md")
	env.readSecret = func(string) (string, error) { asked++; return "x", nil }
	env.stdin = strings.NewReader("")
	if code := runEnv(env, []string{"cat", "p.md", "--store", s2.store}); code != exitOK || asked != 1 {
		t.Errorf("an unencrypted vault asked for a passphrase (exit %d, asked %d)", code, asked)
	}
}

func TestResolveBucketRemote(t *testing.T) {
	yes := true
	cfg := &config{Remotes: map[string]*remoteConfig{
		"keys": {Kind: "s3", PassphraseFile: "/pp", s3Config: s3Config{Endpoint: "https://minio.example:9000/", Bucket: "vaults", Prefix: "mine/",
			Region: "eu-1", AccessKey: "AK", SecretKeyFile: "/sk", CAFile: "/ca.pem", PathStyle: true, DirectFetch: true}},
		"url": {Kind: "s3", URL: "s3://AK:in-config@10.0.0.2:9000/vaults?region=r&tls=1", s3Config: s3Config{CAFile: "/ca.pem"}},
		"tls": {Kind: "s3", s3Config: s3Config{Endpoint: "minio.example", TLS: &yes, Bucket: "b"}},
	}}
	for _, tc := range []struct {
		arg, id string
		want    minio.Location
	}{
		{"keys", "s3://minio.example:9000/vaults/mine/", minio.Location{Config: minio.Config{Endpoint: "minio.example:9000", Secure: true, Bucket: "vaults",
			Prefix: "mine/", Region: "eu-1", AccessKey: "AK", PathStyle: true}, CAFile: "/ca.pem", DirectFetch: true}},
		{"url", "s3://10.0.0.2:9000/vaults", minio.Location{Config: minio.Config{Endpoint: "10.0.0.2:9000", Secure: true, Bucket: "vaults", Region: "r",
			AccessKey: "AK", SecretKey: "in-config"}, CAFile: "/ca.pem"}},
		{"tls", "s3://minio.example/b", minio.Location{Config: minio.Config{Endpoint: "minio.example", Secure: true, Bucket: "b"}}},
		{"s3://AK@127.0.0.1:9000/b/vault/?region=lsgo-local-1&virtual-host=0&direct-fetch=1", "s3://127.0.0.1:9000/b/vault/",
			minio.Location{Config: minio.Config{Endpoint: "127.0.0.1:9000", Bucket: "b", Prefix: "vault/", Region: "lsgo-local-1", AccessKey: "AK"}, DirectFetch: true}},
	} {
		spec, err := resolveRemote(cfg, tc.arg)
		if err != nil || spec.kind != "s3" || spec.String() != tc.id || !reflect.DeepEqual(spec.s3, tc.want) {
			t.Errorf("%q: %v\n got %+v (%s)\nwant %+v (%s)", tc.arg, err, spec.s3, spec.String(), tc.want, tc.id)
		}
	}
	if spec, _ := resolveRemote(cfg, "keys"); spec.cfg.SecretKeyFile != "/sk" || spec.cfg.PassphraseFile != "/pp" {
		t.Errorf("the files of the remote's table are lost: %+v", spec.cfg)
	}
	no := false
	bad := &config{Remotes: map[string]*remoteConfig{"x": {Kind: "s3", s3Config: s3Config{Endpoint: "https://h", TLS: &no, Bucket: "b"}}}}
	if _, err := resolveRemote(bad, "x"); !errors.As(err, new(usageError)) {
		t.Errorf("https endpoint with tls = false: %v", err)
	}
}

func TestLoadBucketConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := write("ok.toml", `
[remote.bucket]
kind = "s3"
endpoint = "127.0.0.1:9000"
bucket = "vaults"
prefix = "v/"
access_key = "AK"
secret_key_file = "secret"
ca_file = "~/ca.pem"
virtual_host = true
direct_fetch = true

[remote.byurl]
url = "s3://AK@127.0.0.1:9000/vaults/v/"
secret_key_file = "secret"
`)
	cfg, err := testEnv(map[string]string{"HOME": "/home/u"}).loadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.Remotes["bucket"]
	if b.Kind != "s3" || b.SecretKeyFile != filepath.Join(dir, "secret") || b.CAFile != "/home/u/ca.pem" || !b.VirtualHost || !b.DirectFetch {
		t.Errorf("bucket: %+v", b)
	}
	if cfg.Remotes["byurl"].Kind != "s3" {
		t.Errorf("an s3:// url makes a bucket remote: %+v", cfg.Remotes["byurl"])
	}
	for name, body := range map[string]string{
		"s3 keys on couch": "[remote.x]\nurl = \"http://h/db\"\nbucket = \"b\"\n",
		"no bucket":        "[remote.x]\nkind = \"s3\"\nendpoint = \"h:9000\"\n",
		"user on s3":       "[remote.x]\nkind = \"s3\"\nendpoint = \"h:9000\"\nbucket = \"b\"\nuser = \"alice\"\n",
		"both url and key": "[remote.x]\nurl = \"s3://h/b\"\nbucket = \"b\"\n",
		"unknown kind":     "[remote.x]\nkind = \"ftp\"\nurl = \"ftp://h\"\n",
		"both styles":      "[remote.x]\nkind = \"s3\"\nendpoint = \"h:9000\"\nbucket = \"b\"\npath_style = true\nvirtual_host = true\n",
		"http url as s3":   "[remote.x]\nkind = \"s3\"\nurl = \"http://h/db\"\n",
	} {
		p := write(strings.ReplaceAll(name, " ", "-")+".toml", body)
		if _, err := testEnv(nil).loadConfig(p); !errors.As(err, new(usageError)) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
}

// config.example.toml, the documentation of the configuration file,
// loads, and every remote in it resolves.
func TestConfigExample(t *testing.T) {
	cfg, err := testEnv(map[string]string{"HOME": t.TempDir()}).loadConfig("config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"home", "bucket", "bucket2"} {
		spec, err := resolveRemote(cfg, name)
		if err != nil {
			t.Errorf("remote %s: %v", name, err)
			continue
		}
		if want := map[string]string{"home": "couchdb", "bucket": "s3", "bucket2": "s3"}[name]; spec.kind != want {
			t.Errorf("remote %s is %s, want %s", name, spec.kind, want)
		}
	}
	if cfg.DefaultRemote != "home" || cfg.DeviceName != "laptop" || !cfg.Remotes["bucket"].DirectFetch {
		t.Errorf("%+v", cfg)
	}
}
