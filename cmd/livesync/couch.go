package main

import (
	"net/url"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
)

// couchConfig resolves the password of spec and returns the adapter's
// configuration of its database.
func (e *cliEnv) couchConfig(spec remoteSpec, f commonFlags) (couchdb.Config, error) {
	cfg := spec.couch
	if f.passwordArg != "" || f.passwordFile != "" || cfg.Password == "" {
		prompt := ""
		if u, err := url.Parse(cfg.URL); err == nil && cfg.User != "" {
			prompt = "Password for " + cfg.User + " at " + u.Host + ": "
		}
		p, err := e.secret(secretSource{what: "password", insecureArg: f.passwordArg, file: f.passwordFile,
			envVar: "LIVESYNC_PASSWORD", configFile: spec.cfg.PasswordFile, prompt: prompt})
		if err != nil {
			return couchdb.Config{}, err
		}
		if p != "" {
			cfg.Password = p
		}
	}
	if cfg.User != "" && cfg.Password == "" {
		return couchdb.Config{}, usageError{"no password for " + cfg.User + ": set LIVESYNC_PASSWORD, use --password-file, or run on a terminal to be asked"}
	}
	return cfg, nil
}
