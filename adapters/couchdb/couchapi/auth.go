package couchapi

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sessionCookie is CouchDB's session cookie name.
const sessionCookie = "AuthSession"

// verifiedTTL is how long a successful password check is remembered
// after its last use, so Basic auth (which the plugin and PouchDB send
// with every request) costs one key derivation per user and not one per
// request (CouchDB keeps a similar cache). One password per user is
// remembered: the last one verified.
const verifiedTTL = 5 * time.Minute

// passwordHash is a PBKDF2 password hash in CouchDB's form.
type passwordHash struct {
	prf  func() hash.Hash
	key  []byte // derived key
	salt []byte // used as given (CouchDB's salt is a hex string used as bytes)
	iter int
	text string // the "-pbkdf2…" string
}

var prfs = map[string]func() hash.Hash{
	"sha": sha1.New, "sha224": sha256.New224, "sha256": sha256.New,
	"sha384": sha512.New384, "sha512": sha512.New,
}

// parseHash parses "-pbkdf2:<prf>-<key hex>,<salt>,<iterations>" or the
// SHA-1 form "-pbkdf2-<key hex>,<salt>,<iterations>".
func parseHash(s string) (passwordHash, error) {
	var prfName, rest string
	switch {
	case strings.HasPrefix(s, "-pbkdf2-"):
		prfName, rest = "sha", s[len("-pbkdf2-"):]
	case strings.HasPrefix(s, "-pbkdf2:"):
		var ok bool
		prfName, rest, ok = strings.Cut(s[len("-pbkdf2:"):], "-")
		if !ok {
			return passwordHash{}, errors.New("malformed password hash")
		}
	default:
		return passwordHash{}, errors.New("not a -pbkdf2 password hash")
	}
	prf, ok := prfs[prfName]
	if !ok {
		return passwordHash{}, fmt.Errorf("password hash: unknown PRF %q", prfName)
	}
	parts := strings.Split(rest, ",")
	if len(parts) != 3 {
		return passwordHash{}, errors.New("malformed password hash: want <key>,<salt>,<iterations>")
	}
	key, err := hex.DecodeString(parts[0])
	if err != nil || len(key) == 0 {
		return passwordHash{}, errors.New("malformed password hash: the derived key is not hex")
	}
	iter, err := strconv.Atoi(parts[2])
	if err != nil || iter < 1 || iter > 100_000_000 || parts[1] == "" {
		return passwordHash{}, errors.New("malformed password hash: bad salt or iteration count")
	}
	return passwordHash{prf: prf, key: key, salt: []byte(parts[1]), iter: iter, text: s}, nil
}

// hashPassword hashes a plaintext password as CouchDB 3.5 does: PBKDF2
// with SHA-256 and a 32-hex-digit salt.
func hashPassword(password, salt string, iter int) (passwordHash, error) {
	key, err := pbkdf2.Key(sha256.New, password, []byte(salt), iter, sha256.Size)
	if err != nil {
		return passwordHash{}, err
	}
	text := "-pbkdf2:sha256-" + hex.EncodeToString(key) + "," + salt + "," + strconv.Itoa(iter)
	return passwordHash{prf: sha256.New, key: key, salt: []byte(salt), iter: iter, text: text}, nil
}

func (h passwordHash) verify(password string) bool {
	key, err := pbkdf2.Key(h.prf, password, h.salt, h.iter, len(h.key))
	return err == nil && subtle.ConstantTimeCompare(key, h.key) == 1
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return b
}

// account is a configured user.
type account struct {
	name  string
	admin bool
	dbs   map[string]bool
	hash  passwordHash
	// fingerprint binds session cookies to the password: a changed
	// password invalidates them.
	fingerprint [32]byte
}

func (a *account) roles() []string {
	if a != nil && a.admin {
		return []string{"_admin"}
	}
	return []string{}
}

// authenticator checks passwords and session cookies.
type authenticator struct {
	users   map[string]*account
	dummy   passwordHash // checked for unknown users, so timing does not tell names
	secret  []byte
	timeout time.Duration
	now     func() time.Time
	slots   chan struct{} // bounds concurrent key derivations
	limits  *limiter
	// crossSite reports whether a request comes from a browser origin
	// allowed by CORS other than the server's own (its session cookie
	// then needs SameSite=None); nil: never.
	crossSite func(*http.Request) bool

	mu       sync.Mutex
	cacheKey []byte
	verified map[string]verifiedEntry // by user name
	flights  map[[32]byte]*flight     // checks in progress by cacheID
	gates    map[string]*gate         // by client address
}

// verifiedEntry is a user's last verified password: an HMAC of name and
// password under a key of this process, never the password.
type verifiedEntry struct {
	mac     [32]byte
	expires time.Time
}

func newAuthenticator(cfg Config) (*authenticator, error) {
	a := &authenticator{
		users:    map[string]*account{},
		secret:   cfg.CookieSecret,
		timeout:  cfg.cookieTimeout(),
		now:      time.Now,
		slots:    make(chan struct{}, max(1, runtime.GOMAXPROCS(0))),
		limits:   newLimiter(cfg.Login),
		cacheKey: randomBytes(32),
		verified: map[string]verifiedEntry{},
		flights:  map[[32]byte]*flight{},
		gates:    map[string]*gate{},
	}
	if a.secret == nil {
		a.secret = randomBytes(32)
	}
	iter := cfg.passwordIterations()
	for _, u := range cfg.Users {
		var h passwordHash
		var err error
		if strings.HasPrefix(u.Password, "-pbkdf2") {
			h, err = parseHash(u.Password)
		} else {
			// The salt is derived from the cookie secret, so a fixed secret
			// gives the same hash, and session cookies (bound to it) survive
			// a restart.
			m := hmac.New(sha256.New, a.secret)
			m.Write([]byte("livesync-relay password salt\x00" + u.Name))
			h, err = hashPassword(u.Password, hex.EncodeToString(m.Sum(nil)[:16]), iter)
		}
		if err != nil {
			return nil, fmt.Errorf("couchapi: user %q: %v", u.Name, err)
		}
		acc := &account{name: u.Name, admin: u.Admin, dbs: map[string]bool{}, hash: h,
			fingerprint: sha256.Sum256([]byte(h.text))}
		for _, db := range u.Databases {
			acc.dbs[db] = true
		}
		a.users[u.Name] = acc
	}
	dummy, err := hashPassword(string(randomBytes(8)), hex.EncodeToString(randomBytes(16)), iter)
	if err != nil {
		return nil, err
	}
	a.dummy = dummy
	return a, nil
}

func (a *authenticator) cacheID(name, password string) [32]byte {
	m := hmac.New(sha256.New, a.cacheKey)
	m.Write([]byte(name))
	m.Write([]byte{0})
	m.Write([]byte(password))
	var id [32]byte
	copy(id[:], m.Sum(nil))
	return id
}

func (a *authenticator) cookieMAC(acc *account, payload string) []byte {
	m := hmac.New(sha256.New, a.secret)
	m.Write([]byte(payload))
	m.Write([]byte{0})
	m.Write(acc.fingerprint[:])
	return m.Sum(nil)
}

// newCookie returns a session cookie value for acc issued at now:
// base64url("name:issued-hex:" + HMAC), like CouchDB's.
func (a *authenticator) newCookie(acc *account, now time.Time) string {
	payload := acc.name + ":" + strconv.FormatInt(now.Unix(), 16)
	return base64.RawURLEncoding.EncodeToString(append([]byte(payload+":"), a.cookieMAC(acc, payload)...))
}

// parseCookie returns the account of a valid, unexpired session cookie
// and when it was issued. The value must be exactly as issued: unpadded
// base64url with no stray bits, so one session has one spelling.
func (a *authenticator) parseCookie(v string, now time.Time) (*account, time.Time, bool) {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(v)
	if err != nil {
		return nil, time.Time{}, false
	}
	name, rest, ok := strings.Cut(string(raw), ":")
	if !ok {
		return nil, time.Time{}, false
	}
	ts, mac, ok := strings.Cut(rest, ":")
	if !ok {
		return nil, time.Time{}, false
	}
	acc := a.users[name]
	if acc == nil {
		return nil, time.Time{}, false
	}
	if !hmac.Equal([]byte(mac), a.cookieMAC(acc, name+":"+ts)) {
		return nil, time.Time{}, false
	}
	sec, err := strconv.ParseInt(ts, 16, 64)
	if err != nil {
		return nil, time.Time{}, false
	}
	issued := time.Unix(sec, 0)
	if issued.After(now.Add(time.Minute)) || !now.Before(issued.Add(a.timeout)) {
		return nil, time.Time{}, false
	}
	return acc, issued, true
}

// setCookie sends a session cookie for acc.
func (a *authenticator) setCookie(w http.ResponseWriter, r *http.Request, acc *account, now time.Time) {
	c := &http.Cookie{Name: sessionCookie, Value: a.newCookie(acc, now), Path: "/", HttpOnly: true,
		MaxAge: int(a.timeout / time.Second), Expires: now.Add(a.timeout)}
	a.sameSite(c, r)
	w.Header().Add("Set-Cookie", c.String())
}

// clearCookie ends the session in the browser.
func (a *authenticator) clearCookie(w http.ResponseWriter, r *http.Request) {
	c := &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, MaxAge: -1}
	a.sameSite(c, r)
	w.Header().Add("Set-Cookie", c.String())
}

// sameSite sets a session cookie's SameSite and Secure attributes.
// SameSite=Lax keeps browsers from sending it with requests other sites
// start (cross-site forms and fetches); the JSON-only writes refuse
// those anyway. A login from a browser origin that CORSOrigins allows,
// other than the server's own (app://obsidian.md, capacitor://localhost,
// http://localhost, the plugin's), over the server's own TLS gets
// SameSite=None; Secure instead, so that the cookie reaches the server
// from that origin: browsers send a Lax cookie only to the site that
// shows the page, and take a None cookie only with Secure, only over
// HTTPS. Secure is set on every cookie sent over TLS.
func (a *authenticator) sameSite(c *http.Cookie, r *http.Request) {
	c.SameSite = http.SameSiteLaxMode
	c.Secure = r.TLS != nil
	if c.Secure && a.crossSite != nil && a.crossSite(r) {
		c.SameSite = http.SameSiteNoneMode
	}
}

// identity is who a request comes from: acc nil is anonymous.
type identity struct {
	acc *account
	via string // "basic", "cookie" or ""
}

// identify authenticates a request by Basic credentials, else by its
// session cookie (refreshed once a tenth of its lifetime has passed, as
// CouchDB does; never with a nil w). Wrong Basic credentials are an
// error (401, or 429 once the client's or the user's failure budget is
// spent: they count as failed logins); an invalid or expired cookie is
// anonymous.
func (a *authenticator) identify(w http.ResponseWriter, r *http.Request) (identity, *apiError) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, cred, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Basic") {
			return identity{}, errorf(http.StatusUnauthorized, "unauthorized", "Only Basic and cookie authentication are supported.")
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
		if err != nil {
			return identity{}, errorf(http.StatusUnauthorized, "unauthorized", "Malformed Basic authorization header.")
		}
		name, password, ok := strings.Cut(string(raw), ":")
		if !ok {
			return identity{}, errorf(http.StatusUnauthorized, "unauthorized", "Malformed Basic authorization header.")
		}
		acc, ae := a.check(r.Context(), clientAddress(r), name, password)
		if ae != nil {
			return identity{}, ae
		}
		return identity{acc: acc, via: "basic"}, nil
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return identity{}, nil
	}
	now := a.now()
	acc, issued, ok := a.parseCookie(c.Value, now)
	if !ok {
		return identity{}, nil
	}
	if w != nil && now.Sub(issued) > a.timeout/10 {
		a.setCookie(w, r, acc, now)
	}
	return identity{acc: acc, via: "cookie"}, nil
}

// Authenticate reports who sent r, by its Basic credentials or else its
// AuthSession cookie, with the same rules and password cache as the
// server's routes: ok is false without credentials, with wrong ones, or
// with an invalid or expired cookie; admin is true for admin users. It
// writes nothing (a cookie due for refresh is not refreshed) and may
// cost one key derivation when Basic credentials are not cached yet.
// It lets routes served next to the Server (metrics, status pages) share
// its users without a second Server.
func (s *Server) Authenticate(r *http.Request) (user string, admin bool, ok bool) {
	id, ae := s.auth.identify(nil, r)
	if ae != nil || id.acc == nil {
		return "", false, false
	}
	return id.acc.name, id.acc.admin, true
}
