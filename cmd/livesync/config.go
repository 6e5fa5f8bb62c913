package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// config is the configuration file (TOML); config.example.toml beside
// this file shows every key. Relative paths are relative to the file's
// folder; "~/" is the home folder. Unknown keys are an error, so that a
// typo is not silently ignored.
type config struct {
	Store         string                   `toml:"store"`
	DefaultRemote string                   `toml:"default_remote"`
	DeviceName    string                   `toml:"device_name"`
	Remotes       map[string]*remoteConfig `toml:"remote"`
	P2P           p2pConfig                `toml:"p2p"`
	LiveSyncP2P   livesyncP2PConfig        `toml:"livesync_p2p"`

	path string // the file it was read from ("" if none)
}

// remoteConfig is one [remote.NAME] table.
type remoteConfig struct {
	// Kind is "couchdb" (the default, unless url is an s3:// or p2p://
	// URL), "s3" (a journal bucket) or "p2p" (the approved peers of a
	// sync group, url "p2p://GROUP").
	Kind           string `toml:"kind"`
	URL            string `toml:"url"`
	User           string `toml:"user"`
	PasswordFile   string `toml:"password_file"`
	PassphraseFile string `toml:"passphrase_file"`
	s3Config
	vaultConfig
}

// s3Config holds the keys of a [remote.NAME] table with kind = "s3".
type s3Config struct {
	Endpoint      string `toml:"endpoint"`
	TLS           *bool  `toml:"tls"`
	Bucket        string `toml:"bucket"`
	Prefix        string `toml:"prefix"`
	Region        string `toml:"region"`
	AccessKey     string `toml:"access_key"`
	SecretKeyFile string `toml:"secret_key_file"`
	CAFile        string `toml:"ca_file"`
	PathStyle     bool   `toml:"path_style"`
	VirtualHost   bool   `toml:"virtual_host"`
	DirectFetch   bool   `toml:"direct_fetch"`
}

// isSet reports whether any S3 key is set.
func (c s3Config) isSet() bool { return c != s3Config{} }

// vaultConfig holds the settings of a new vault; nil means "not set".
type vaultConfig struct {
	E2EE            *bool `toml:"e2ee"`
	ObfuscatePaths  *bool `toml:"obfuscate_paths"`
	CustomChunkSize *int  `toml:"custom_chunk_size"`
	CaseSensitive   *bool `toml:"case_sensitive"`
}

// configPath returns the configuration file to read and whether it was
// named explicitly (a missing default file is not an error).
func (e *cliEnv) configPath(flagValue string) (string, bool) {
	if flagValue != "" {
		return flagValue, true
	}
	if p := e.getenv("LIVESYNC_CONFIG"); p != "" {
		return p, true
	}
	if dir := e.getenv("XDG_CONFIG_HOME"); dir != "" {
		return filepath.Join(dir, "livesync", "config.toml"), false
	}
	if home := e.getenv("HOME"); home != "" {
		return filepath.Join(home, ".config", "livesync", "config.toml"), false
	}
	return "", false
}

// loadConfig reads the configuration file; with none, it returns an empty
// configuration.
func (e *cliEnv) loadConfig(flagValue string) (*config, error) {
	path, explicit := e.configPath(flagValue)
	cfg := &config{}
	if path == "" {
		return cfg, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if !explicit && errors.Is(err, fs.ErrNotExist) {
			return cfg, nil
		}
		return nil, usageError{fmt.Sprintf("configuration file: %v", err)}
	}
	md, err := toml.Decode(string(b), cfg)
	if err != nil {
		return nil, usageError{fmt.Sprintf("configuration file %s: %v", path, err)}
	}
	if und := md.Undecoded(); len(und) > 0 {
		var keys []string
		for _, k := range und {
			keys = append(keys, k.String())
		}
		sort.Strings(keys)
		return nil, usageError{fmt.Sprintf("configuration file %s: unknown keys %s", path, strings.Join(keys, ", "))}
	}
	cfg.path = path
	dir := filepath.Dir(path)
	cfg.Store = e.expandPath(cfg.Store, dir)
	for name, r := range cfg.Remotes {
		if r == nil {
			return nil, usageError{fmt.Sprintf("configuration file %s: remote %q has no url", path, name)}
		}
		if err := r.check(); err != nil {
			return nil, usageError{fmt.Sprintf("configuration file %s: remote %q %s", path, name, err)}
		}
		r.PasswordFile = e.expandPath(r.PasswordFile, dir)
		r.PassphraseFile = e.expandPath(r.PassphraseFile, dir)
		r.SecretKeyFile = e.expandPath(r.SecretKeyFile, dir)
		r.CAFile = e.expandPath(r.CAFile, dir)
	}
	if err := cfg.P2P.check(); err != nil {
		return nil, usageError{fmt.Sprintf("configuration file %s: [p2p] %s", path, err)}
	}
	cfg.P2P.PassphraseFile = e.expandPath(cfg.P2P.PassphraseFile, dir)
	if err := cfg.LiveSyncP2P.check(); err != nil {
		return nil, usageError{fmt.Sprintf("configuration file %s: [livesync_p2p] %s", path, err)}
	}
	cfg.LiveSyncP2P.expand(e, dir)
	if cfg.DefaultRemote != "" && cfg.Remotes[cfg.DefaultRemote] == nil {
		return nil, usageError{fmt.Sprintf("configuration file %s: default_remote %q is not a [remote.%s] table", path, cfg.DefaultRemote, cfg.DefaultRemote)}
	}
	return cfg, nil
}

// check settles the kind of a remote table and refuses keys of the other
// kind; the error completes "remote NAME ...".
func (r *remoteConfig) check() error {
	if r.Kind == "" {
		r.Kind = "couchdb"
		if strings.HasPrefix(r.URL, "s3://") || (r.URL == "" && r.s3Config.isSet()) {
			r.Kind = "s3"
		}
		if strings.HasPrefix(r.URL, "p2p://") {
			r.Kind = "p2p"
		}
	}
	switch r.Kind {
	case "couchdb":
		if r.URL == "" {
			return errors.New("has no url")
		}
		if r.s3Config.isSet() {
			return errors.New(`has keys of an S3 bucket (endpoint, bucket, access_key, ...): add kind = "s3", or remove them`)
		}
	case "s3":
		if r.User != "" || r.PasswordFile != "" {
			return errors.New("is an S3 bucket: use access_key and secret_key_file instead of user and password_file")
		}
		c := r.s3Config
		inURL := c.Endpoint != "" || c.TLS != nil || c.Bucket != "" || c.Prefix != "" || c.Region != "" ||
			c.AccessKey != "" || c.PathStyle || c.VirtualHost
		switch {
		case r.URL != "" && inURL:
			return errors.New("has both an s3:// url and keys the url already gives (endpoint, tls, bucket, prefix, region, access_key, path_style, virtual_host): use one or the other")
		case r.URL != "" && !strings.HasPrefix(r.URL, "s3://"):
			return errors.New(`is of kind "s3" but its url is not an s3:// URL`)
		case r.URL == "" && (r.Endpoint == "" || r.Bucket == ""):
			return errors.New(`is of kind "s3" and needs endpoint and bucket (or an s3:// url)`)
		case r.PathStyle && r.VirtualHost:
			return errors.New("sets both path_style and virtual_host")
		}
	case "p2p":
		switch {
		case !strings.HasPrefix(r.URL, "p2p://"):
			return errors.New(`is of kind "p2p" and needs url = "p2p://GROUP"`)
		case r.User != "" || r.PasswordFile != "" || r.s3Config.isSet():
			return errors.New(`is of kind "p2p": peers need no user, password or bucket keys (the group's passphrase and relays are in the [p2p] table)`)
		}
	default:
		return fmt.Errorf(`has kind %q: use "couchdb", "s3" or "p2p"`, r.Kind)
	}
	return nil
}

// expandPath resolves "~/" and paths relative to dir.
func (e *cliEnv) expandPath(p, dir string) string {
	switch {
	case p == "":
		return ""
	case p == "~" || strings.HasPrefix(p, "~/"):
		return filepath.Join(e.getenv("HOME"), p[1:])
	case filepath.IsAbs(p):
		return p
	}
	return filepath.Join(dir, p)
}

// readSecretFile reads a password or passphrase file; one trailing
// newline (LF or CRLF) is not part of the secret.
func readSecretFile(name, what string) (string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return "", usageError{fmt.Sprintf("reading the %s file: %v", what, err)}
	}
	s := string(b)
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s, nil
}

// secretSource is where one secret may come from, in order of precedence:
// an explicit insecure argument, a file flag, the environment, a file
// from the configuration, a prompt on the terminal.
type secretSource struct {
	what        string // "password", "passphrase"
	insecureArg string
	file        string
	envVar      string
	configFile  string
	prompt      string
}

// get returns the secret, or "" when no source has one and there is no
// terminal to ask on.
func (e *cliEnv) secret(s secretSource) (string, error) {
	switch {
	case s.insecureArg != "":
		return s.insecureArg, nil
	case s.file != "":
		return readSecretFile(s.file, s.what)
	case e.getenv(s.envVar) != "":
		return e.getenv(s.envVar), nil
	case s.configFile != "":
		return readSecretFile(s.configFile, s.what)
	case e.readSecret != nil && s.prompt != "":
		v, err := e.readSecret(s.prompt)
		if err != nil {
			return "", usageError{fmt.Sprintf("reading the %s: %v", s.what, err)}
		}
		return v, nil
	}
	return "", nil
}
