package main

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/adapters/folder"
)

// Environment variables of the built-in admin account.
const (
	envAdminUser         = "LIVESYNC_RELAY_ADMIN_USER"
	envAdminPassword     = "LIVESYNC_RELAY_ADMIN_PASSWORD"
	envAdminPasswordFile = "LIVESYNC_RELAY_ADMIN_PASSWORD_FILE"
)

// usersFile keeps the built-in admin's name and password hash in the
// data folder (mode 0600); serverFile keeps the server's uuid.
const (
	usersFile  = "users.json"
	serverFile = "server.json"
)

// defaultAdminName is the built-in admin's name unless
// LIVESYNC_RELAY_ADMIN_USER says otherwise.
const defaultAdminName = "admin"

// passwordIterations is the PBKDF2-SHA256 cost of the hashes the relay
// makes (CouchDB 3.5's default). Tests lower it.
var passwordIterations = couchapi.DefaultPasswordIterations

// Where the built-in admin's password came from.
const (
	adminFromEnv       = "env"       // LIVESYNC_RELAY_ADMIN_PASSWORD
	adminFromEnvFile   = "env-file"  // LIVESYNC_RELAY_ADMIN_PASSWORD_FILE
	adminStored        = "stored"    // users.json, written at an earlier start
	adminGenerated     = "generated" // users.json written now: first start
	adminReset         = "reset"     // users.json rewritten by --reset-admin-password
	adminConfigDefined = "config"    // the configuration lists admin users: no built-in admin
)

// adminAccount is the built-in admin as this start resolved it.
type adminAccount struct {
	name   string
	hash   string // "-pbkdf2:sha256-…"
	source string
	// password is set only when it was generated now (first start or
	// reset): it is printed once on the terminal and never logged.
	password string
}

// usersDoc is the content of users.json.
type usersDoc struct {
	Version int          `json:"version"`
	Admin   *storedAdmin `json:"admin"`
}

type storedAdmin struct {
	Name         string    `json:"name"`
	PasswordHash string    `json:"password_hash"`
	Created      time.Time `json:"created"`
}

// hashPassword hashes a password as CouchDB 3.5 does: PBKDF2-SHA256 with
// a 32-hex-digit salt, in CouchDB's "-pbkdf2:sha256-<key>,<salt>,<n>"
// form, which couchapi.User.Password accepts as is.
func hashPassword(password string) (string, error) {
	salt := hex.EncodeToString(randomBytes(16))
	key, err := pbkdf2.Key(sha256.New, password, []byte(salt), passwordIterations, sha256.Size)
	if err != nil {
		return "", err
	}
	return "-pbkdf2:sha256-" + hex.EncodeToString(key) + "," + salt + "," + strconv.Itoa(passwordIterations), nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return b
}

// newPassword returns a strong random password: 26 characters of
// base32 (A–Z, 2–7), 130 bits.
func newPassword() string { return rand.Text() }

func validUserName(n string) bool { return n != "" && !strings.ContainsAny(n, ":\x00\r\n") }

// decodeUsers parses users.json. Its errors never quote the file.
func decodeUsers(b []byte) (*storedAdmin, error) {
	var d usersDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, errors.New("not valid JSON")
	}
	if d.Version != 1 {
		return nil, fmt.Errorf("version %d is not 1", d.Version)
	}
	if d.Admin == nil || !validUserName(d.Admin.Name) {
		return nil, errors.New("no admin name")
	}
	u := couchapi.User{Name: d.Admin.Name, Password: d.Admin.PasswordHash, Admin: true}
	if !strings.HasPrefix(u.Password, "-pbkdf2") {
		return nil, errors.New("the admin password is not a -pbkdf2 hash")
	}
	if err := (couchapi.Config{Databases: couchapi.NewMemoryDatabases(), Users: []couchapi.User{u}}).Validate(); err != nil {
		return nil, errors.New("the admin password hash is malformed")
	}
	return d.Admin, nil
}

// builtinAdmin resolves the built-in admin account: from the environment
// (never stored), else from users.json, else (first start, or reset) a
// new generated password whose hash is stored in users.json.
func builtinAdmin(dataDir string, getenv func(string) string, reset bool) (adminAccount, error) {
	name := getenv(envAdminUser)
	if name != "" && !validUserName(name) {
		return adminAccount{}, usageError{envAdminUser + " must not contain ':' or line breaks"}
	}
	pw, source := getenv(envAdminPassword), adminFromEnv
	if f := getenv(envAdminPasswordFile); f != "" {
		if pw != "" {
			return adminAccount{}, usageError{"set " + envAdminPassword + " or " + envAdminPasswordFile + ", not both"}
		}
		var err error
		if pw, err = readSecretFile(f, "admin password"); err != nil {
			return adminAccount{}, usageError{err.Error()}
		}
		source = adminFromEnvFile
	}
	if pw != "" {
		if reset {
			return adminAccount{}, usageError{"--reset-admin-password generates a password, but " + envAdminPassword + " (or _FILE) sets one: unset it or drop the flag"}
		}
		if name == "" {
			name = defaultAdminName
		}
		h, err := hashPassword(pw)
		if err != nil {
			return adminAccount{}, err
		}
		return adminAccount{name: name, hash: h, source: source}, nil
	}

	path := filepath.Join(dataDir, usersFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil && !reset:
		st, derr := decodeUsers(b)
		if derr != nil {
			return adminAccount{}, fmt.Errorf("%s is damaged (%v): restart with --reset-admin-password to write a new one", path, derr)
		}
		if name != "" && name != st.Name {
			return adminAccount{}, usageError{fmt.Sprintf("%s=%s, but the stored admin is %q: set its password too (%s), or restart with --reset-admin-password to rename the admin",
				envAdminUser, name, st.Name, envAdminPassword)}
		}
		return adminAccount{name: st.Name, hash: st.PasswordHash, source: adminStored}, nil
	case err == nil && reset:
		if st, derr := decodeUsers(b); derr == nil && name == "" {
			name = st.Name
		}
		source = adminReset
	case errors.Is(err, fs.ErrNotExist):
		source = adminGenerated
	default:
		return adminAccount{}, err
	}
	if name == "" {
		name = defaultAdminName
	}
	pw = newPassword()
	h, err := hashPassword(pw)
	if err != nil {
		return adminAccount{}, err
	}
	doc, err := json.MarshalIndent(usersDoc{Version: 1, Admin: &storedAdmin{Name: name, PasswordHash: h, Created: time.Now().UTC().Truncate(time.Second)}}, "", "  ")
	if err != nil {
		return adminAccount{}, err
	}
	if err := folder.WritePrivate(filepath.Join(dataDir, usersFile), append(doc, '\n')); err != nil {
		return adminAccount{}, fmt.Errorf("storing the admin account: %w", err)
	}
	return adminAccount{name: name, hash: h, source: source, password: pw}, nil
}

// serverUUID returns the server's uuid kept in server.json, writing a
// new one at first start. PouchDB builds its replication ids (and so its
// checkpoints) from it, so it must not change across restarts.
func serverUUID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, serverFile)
	var d struct {
		UUID string `json:"uuid"`
	}
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if json.Unmarshal(b, &d) == nil && len(d.UUID) == 32 {
			if _, err := hex.DecodeString(d.UUID); err == nil {
				return d.UUID, nil
			}
		}
		return "", fmt.Errorf("%s is damaged: delete it (clients then replicate from scratch once)", path)
	case !errors.Is(err, fs.ErrNotExist):
		return "", err
	}
	d.UUID = hex.EncodeToString(randomBytes(16))
	b, _ = json.Marshal(d)
	if err := folder.WritePrivate(filepath.Join(dataDir, serverFile), append(b, '\n')); err != nil {
		return "", fmt.Errorf("storing the server uuid: %w", err)
	}
	return d.UUID, nil
}
