package main

import (
	"github.com/livesync-go/livesync-go/adapters/couchdb"
)

// couchConfig resolves the password of spec and returns the adapter's
// configuration of its database.
func (e *cliEnv) couchConfig(spec remoteSpec, f commonFlags) (couchdb.Config, error) {
	password := spec.password
	if f.passwordArg != "" || f.passwordFile != "" || password == "" {
		prompt := ""
		if spec.user != "" {
			prompt = "Password for " + spec.user + " at " + spec.url.Host + ": "
		}
		p, err := e.secret(secretSource{what: "password", insecureArg: f.passwordArg, file: f.passwordFile,
			envVar: "LIVESYNC_PASSWORD", configFile: spec.cfg.PasswordFile, prompt: prompt})
		if err != nil {
			return couchdb.Config{}, err
		}
		if p != "" {
			password = p
		}
	}
	if spec.user != "" && password == "" {
		return couchdb.Config{}, usageError{"no password for " + spec.user + ": set LIVESYNC_PASSWORD, use --password-file, or run on a terminal to be asked"}
	}
	server, database, err := couchdb.SplitURL(spec.url.String())
	if err != nil {
		return couchdb.Config{}, usageError{err.Error()}
	}
	return couchdb.Config{URL: server, Database: database, User: spec.user, Password: password}, nil
}
