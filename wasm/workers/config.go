package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/engine/holdback"
)

// Defaults of the Worker's settings (its vars and secrets).
const (
	// defaultCORSOrigins are the origins the plugin runs under: Obsidian on
	// the desktop, on iOS/Android (Capacitor) and its mobile web views.
	defaultCORSOrigins = "app://obsidian.md capacitor://localhost http://localhost"
	// defaultMaxRequestBytes is well under Workers' own request body limit
	// (100 MB on the Free and Pro plans) and leaves room in the isolate's
	// 128 MB of memory for the decoded batch.
	defaultMaxRequestBytes = 32 << 20
	// defaultMaxDocumentBytes keeps one document inside D1's 2 MB row
	// limit with room for its revision tree.
	defaultMaxDocumentBytes = 1_000_000
	// defaultChangesTimeout bounds a longpoll or continuous feed: the
	// plugin's PouchDB asks again when it ends.
	defaultChangesTimeout = 10 * time.Second
	// maxChangesTimeout keeps a feed well inside the time a client and
	// Cloudflare's edge keep an idle request open.
	maxChangesTimeout = 60 * time.Second
	// passwordIterations stretches the in-memory hash of a password given
	// in plaintext. The hash never leaves the isolate and is rebuilt for
	// every request (each request runs a fresh Go instance), so stretching
	// would only spend the request's CPU time.
	passwordIterations = 1000
)

// settings are the Worker's configuration, read from its environment.
type settings struct {
	cfg couchapi.Config
	// hold configures every database's hold-back (its Log is set per
	// scope).
	hold couchapi.HeldConfig
}

// getenv looks a variable or secret up; "" when unset.
type getenv func(name string) string

// parseSettings builds the couchapi configuration from the Worker's vars
// and secrets:
//
//	LIVESYNC_USERS            (secret) users, separated by spaces or newlines,
//	                          each name:password:db1,db2 or name:password:*
//	                          (an admin, who may use every database)
//	LIVESYNC_CORS_ORIGINS     origins allowed to call from a browser,
//	                          separated by spaces or commas; "*" for any
//	LIVESYNC_MAX_REQUEST_BYTES, LIVESYNC_MAX_DOCUMENT_BYTES  body limits (413 beyond)
//	LIVESYNC_CHANGES_TIMEOUT  seconds a longpoll or continuous feed waits
//	LIVESYNC_UUID             the server uuid PouchDB keys its checkpoints on
//	LIVESYNC_COOKIE_SECRET    (secret) signs session cookies
//	LIVESYNC_PASSPHRASES      (secret) vault passphrases, one line per
//	                          database: db:passphrase (see parsePassphrases)
//	LIVESYNC_MAX_HELD_DOCUMENTS, LIVESYNC_MAX_HELD_PER_USER
//	LIVESYNC_MAX_HELD_CHUNK_IDS, LIVESYNC_MAX_HELD_CHUNK_IDS_PER_USER
//	                          limits of the hold-back (see parseHold)
//
// Without LIVESYNC_UUID or LIVESYNC_COOKIE_SECRET both are derived from
// LIVESYNC_USERS, so they stay the same from request to request.
func parseSettings(env getenv) (settings, error) {
	users, err := parseUsers(env("LIVESYNC_USERS"))
	if err != nil {
		return settings{}, err
	}
	cfg := couchapi.Config{
		Users:              users,
		CORSOrigins:        fields(orDefault(env("LIVESYNC_CORS_ORIGINS"), defaultCORSOrigins)),
		PasswordIterations: passwordIterations,
		ChangesTimeout:     defaultChangesTimeout,
		MaxRequestBytes:    defaultMaxRequestBytes,
		MaxDocumentBytes:   defaultMaxDocumentBytes,
		// Workers compresses answers itself when the client accepts it.
		Compression: couchapi.CompressionOff,
	}
	if cfg.MaxRequestBytes, err = sizeVar(env, "LIVESYNC_MAX_REQUEST_BYTES", defaultMaxRequestBytes, 100_000_000); err != nil {
		return settings{}, err
	}
	if cfg.MaxDocumentBytes, err = sizeVar(env, "LIVESYNC_MAX_DOCUMENT_BYTES", defaultMaxDocumentBytes, 2_000_000); err != nil {
		return settings{}, err
	}
	if v := env("LIVESYNC_CHANGES_TIMEOUT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || time.Duration(n)*time.Second > maxChangesTimeout {
			return settings{}, fmt.Errorf("LIVESYNC_CHANGES_TIMEOUT must be 1 to %d seconds", int(maxChangesTimeout/time.Second))
		}
		cfg.ChangesTimeout = time.Duration(n) * time.Second
	}
	users64 := sha256.Sum256([]byte("livesync-workers uuid\x00" + env("LIVESYNC_USERS")))
	cfg.UUID = orDefault(env("LIVESYNC_UUID"), hex.EncodeToString(users64[:16]))
	secret := []byte(env("LIVESYNC_COOKIE_SECRET"))
	if len(secret) == 0 {
		s := sha256.Sum256([]byte("livesync-workers cookie\x00" + env("LIVESYNC_USERS")))
		secret = s[:]
	}
	cfg.CookieSecret = secret
	hold, err := parseHold(env)
	if err != nil {
		return settings{}, err
	}
	return settings{cfg: cfg, hold: hold}, nil
}

// parseUsers reads LIVESYNC_USERS. A password may contain ':' (the name
// ends at the first, the databases start after the last) but no space.
func parseUsers(v string) ([]couchapi.User, error) {
	var users []couchapi.User
	for i, entry := range strings.Fields(v) {
		first, last := strings.IndexByte(entry, ':'), strings.LastIndexByte(entry, ':')
		if first <= 0 || first == last {
			return nil, fmt.Errorf("LIVESYNC_USERS: entry %d is not name:password:databases", i+1)
		}
		u := couchapi.User{Name: entry[:first], Password: entry[first+1 : last]}
		switch dbs := entry[last+1:]; dbs {
		case "*":
			u.Admin = true
		case "":
			return nil, fmt.Errorf("LIVESYNC_USERS: user %q has no databases (give db1,db2 or *)", u.Name)
		default:
			u.Databases = strings.Split(dbs, ",")
		}
		users = append(users, u)
	}
	if len(users) == 0 {
		return nil, errors.New("LIVESYNC_USERS is not set: set it with `npx wrangler secret put LIVESYNC_USERS`")
	}
	return users, nil
}

// sizeVar reads a byte count between 1 and most, def when unset.
func sizeVar(env getenv, name string, def, most int64) (int64, error) {
	v := env(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || n > most {
		return 0, fmt.Errorf("%s must be a byte count from 1 to %d", name, most)
	}
	return n, nil
}

// fields splits on spaces and commas.
func fields(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' })
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// heldSaveInterval keeps a request's hold-back from saving on a timer:
// the scope saves it when the request ends (holdback.Store.Close).
const heldSaveInterval = 24 * time.Hour

// maxHeldLimit bounds the hold-back limits a var may set.
const maxHeldLimit = 100_000_000

// parseHold reads the hold-back's settings: no client sees a note
// before its chunks.
//
//	LIVESYNC_PASSPHRASES                  (secret) lines db:passphrase
//	LIVESYNC_MAX_HELD_DOCUMENTS           documents held at once per database (10000)
//	LIVESYNC_MAX_HELD_PER_USER            documents held at once for one user (2000)
//	LIVESYNC_MAX_HELD_CHUNK_IDS           chunk ids the held revisions need, per database (1000000)
//	LIVESYNC_MAX_HELD_CHUNK_IDS_PER_USER  the same for one user (200000)
//
// The defaults are the relay's (holdback's). Without a database's
// passphrase, its metadata with path obfuscation cannot be judged and is
// served unheld, as the relay does.
func parseHold(env getenv) (couchapi.HeldConfig, error) {
	pp, err := parsePassphrases(env("LIVESYNC_PASSPHRASES"))
	if err != nil {
		return couchapi.HeldConfig{}, err
	}
	hc := holdback.Config{
		SaveInterval:                heldSaveInterval,
		MaxHeldDocumentsName:        "the Worker's var LIVESYNC_MAX_HELD_DOCUMENTS",
		MaxHeldPerOwnerName:         "the Worker's var LIVESYNC_MAX_HELD_PER_USER",
		MaxHeldChunkIDsName:         "the Worker's var LIVESYNC_MAX_HELD_CHUNK_IDS",
		MaxHeldChunkIDsPerOwnerName: "the Worker's var LIVESYNC_MAX_HELD_CHUNK_IDS_PER_USER",
	}
	for _, l := range []struct {
		name string
		def  int
		to   *int
	}{
		{"LIVESYNC_MAX_HELD_DOCUMENTS", holdback.DefaultMaxHeldDocuments, &hc.MaxHeldDocuments},
		{"LIVESYNC_MAX_HELD_PER_USER", holdback.DefaultMaxHeldPerOwner, &hc.MaxHeldPerOwner},
		{"LIVESYNC_MAX_HELD_CHUNK_IDS", holdback.DefaultMaxHeldChunkIDs, &hc.MaxHeldChunkIDs},
		{"LIVESYNC_MAX_HELD_CHUNK_IDS_PER_USER", holdback.DefaultMaxHeldChunkIDsPerOwner, &hc.MaxHeldChunkIDsPerOwner},
	} {
		n, err := sizeVar(env, l.name, int64(l.def), maxHeldLimit)
		if err != nil {
			return couchapi.HeldConfig{}, fmt.Errorf("%s must be a count from 1 to %d", l.name, maxHeldLimit)
		}
		*l.to = int(n)
	}
	if err := hc.Validate(); err != nil {
		return couchapi.HeldConfig{}, err
	}
	return couchapi.HeldConfig{Holdback: hc, Passphrases: pp}, nil
}

// parsePassphrases reads LIVESYNC_PASSPHRASES: one line per database,
// db:passphrase. The name ends at the first ':' (a database name has
// none); the passphrase is the rest of the line as written, spaces
// included (a trailing CR is dropped). Blank lines are skipped. An error
// names the line, never its passphrase.
func parsePassphrases(v string) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(v, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		db, pass, ok := strings.Cut(line, ":")
		db = strings.TrimSpace(db)
		switch {
		case !ok || pass == "":
			return nil, fmt.Errorf("LIVESYNC_PASSPHRASES: line %d is not db:passphrase", i+1)
		case !couchapi.ValidDatabaseName(db):
			return nil, fmt.Errorf("LIVESYNC_PASSPHRASES: line %d does not start with a database name", i+1)
		case out[db] != "":
			return nil, fmt.Errorf("LIVESYNC_PASSPHRASES: database %q has two lines", db)
		}
		out[db] = pass
	}
	return out, nil
}
