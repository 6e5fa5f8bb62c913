package couchapi

import (
	"context"
	"crypto/subtle"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// Defaults of LoginLimits.
const (
	// DefaultFailuresPerAddress is LoginLimits.FailuresPerAddress when
	// zero: a client address may fail 10 logins in a row.
	DefaultFailuresPerAddress = 10
	// DefaultFailuresPerUser is LoginLimits.FailuresPerUser when zero:
	// 30 failed logins in a row as one user, from anywhere.
	DefaultFailuresPerUser = 30
	// DefaultFailureInterval is LoginLimits.FailureInterval when zero:
	// one failure is forgiven every 6 s, so a locked-out address may try
	// again about 10 times a minute.
	DefaultFailureInterval = 6 * time.Second
)

// LoginLimits bound password guessing. Each client address and each
// user name has a budget of failed logins (a token bucket): a failed
// login, by POST /_session or by wrong Basic credentials on any request,
// spends one; one comes back every FailureInterval. A login checked while
// its address's budget is empty is answered 429 with Retry-After, before
// any key derivation. While a user's budget is empty, only addresses that
// failed as that user within the time it takes to refill are refused so;
// others, and addresses that logged in as the user in the last 30 days,
// are still checked within their own budget, so that guessers cannot
// lock the user out. Credentials verified in the last few minutes skip the
// budgets and the key derivation altogether (a cache compared in constant
// time), so a user whose device is syncing is not locked out by someone
// guessing their password. The zero value means the defaults; a negative
// field turns that limit off.
type LoginLimits struct {
	// FailuresPerAddress is the budget of one client address (an IPv4
	// address or an IPv6 /64). 0 means DefaultFailuresPerAddress.
	// Behind a reverse proxy every client has the proxy's address, so the
	// budget is shared by all of them.
	FailuresPerAddress int
	// FailuresPerUser is the budget of one configured user name (unknown
	// names have none: the address budget covers them). 0 means
	// DefaultFailuresPerUser.
	FailuresPerUser int
	// FailureInterval is how often one failure is given back to a
	// budget. 0 means DefaultFailureInterval.
	FailureInterval time.Duration
}

func (l LoginLimits) validate() error {
	if l.FailureInterval < 0 {
		return fmt.Errorf("couchapi: Login.FailureInterval is negative")
	}
	return nil
}

func (l LoginLimits) perAddress() int {
	return orDefault(l.FailuresPerAddress, DefaultFailuresPerAddress)
}

func (l LoginLimits) perUser() int { return orDefault(l.FailuresPerUser, DefaultFailuresPerUser) }

func (l LoginLimits) interval() time.Duration {
	return orDefault(l.FailureInterval, DefaultFailureInterval)
}

// maxLimitedAddresses caps the address budgets kept; beyond it, new
// addresses share one budget until old ones have refilled.
const maxLimitedAddresses = 1 << 14

// bucket is a token bucket of failed logins.
type bucket struct {
	tokens float64
	last   time.Time
}

// rememberLogins is how long an address that logged in as a user
// keeps passing that user's budget when it is empty (see limiter).
const rememberLogins = 30 * 24 * time.Hour

// maxRememberedPairs caps each of the limiter's maps of (user, address)
// pairs: the logins remembered and the recent failures.
const maxRememberedPairs = 1 << 14

// pair is a user name and a client address (clientAddress).
type pair struct{ user, addr string }

// limiter holds the failure budgets of addresses and users.
//
// A user's budget bounds the guesses at one password from everywhere,
// but guessers who keep it empty must not lock the user out. So when it
// is empty a check is still made, spending only the address's budget,
// for an address that logged in as that user in the last 30 days
// (loggedIn), or that has not failed as that user since the user's
// budget would have refilled (failedAs): a guesser's address gets one
// guess per refill time (30 × 6 s by default), not one per interval,
// and a user's device, old or new, is never refused for failures made
// elsewhere. When failedAs is full every unknown address counts as
// failed (the old lockout, under a guessing network of that size).
type limiter struct {
	capAddr, capUser float64 // 0: off
	every            time.Duration

	mu       sync.Mutex
	addrs    map[string]*bucket
	users    map[string]*bucket
	loggedIn map[pair]time.Time // last successful login
	failedAs map[pair]time.Time // last failed login
}

func newLimiter(l LoginLimits) *limiter {
	return &limiter{
		capAddr: float64(max(0, l.perAddress())), capUser: float64(max(0, l.perUser())), every: l.interval(),
		addrs: map[string]*bucket{}, users: map[string]*bucket{},
		loggedIn: map[pair]time.Time{}, failedAs: map[pair]time.Time{},
	}
}

// refillTime is how long an empty user budget takes to refill.
func (lm *limiter) refillTime() time.Duration { return time.Duration(lm.capUser * float64(lm.every)) }

// passesEmptyUser reports whether addr may check a password of user
// while the user's budget is empty. The caller holds mu.
func (lm *limiter) passesEmptyUser(addr, user string, now time.Time) bool {
	k := pair{user, addr}
	if t, ok := lm.loggedIn[k]; ok && now.Sub(t) < rememberLogins {
		return true
	}
	if t, ok := lm.failedAs[k]; ok && now.Sub(t) < lm.refillTime() {
		return false
	}
	if len(lm.failedAs) >= maxRememberedPairs {
		prune(lm.failedAs, now, lm.refillTime())
		return len(lm.failedAs) < maxRememberedPairs
	}
	return true
}

// prune deletes the entries of m older than ttl.
func prune(m map[pair]time.Time, now time.Time, ttl time.Duration) {
	for k, t := range m {
		if now.Sub(t) >= ttl {
			delete(m, k)
		}
	}
}

// failed records a wrong password for a configured user from addr.
func (lm *limiter) failed(addr, user string, now time.Time) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if lm.capUser == 0 {
		return
	}
	if len(lm.failedAs) >= maxRememberedPairs {
		prune(lm.failedAs, now, lm.refillTime())
		if len(lm.failedAs) >= maxRememberedPairs {
			return // full: unknown addresses count as failed anyway
		}
	}
	lm.failedAs[pair{user, addr}] = now
}

// succeeded records a correct password for user from addr.
func (lm *limiter) succeeded(addr, user string, now time.Time) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if lm.capUser == 0 {
		return
	}
	k := pair{user, addr}
	delete(lm.failedAs, k)
	if _, ok := lm.loggedIn[k]; !ok && len(lm.loggedIn) >= maxRememberedPairs {
		prune(lm.loggedIn, now, rememberLogins)
		for k := range lm.loggedIn { // still full: forget one
			if len(lm.loggedIn) < maxRememberedPairs {
				break
			}
			delete(lm.loggedIn, k)
		}
	}
	lm.loggedIn[k] = now
}

// refill brings b up to now; a new bucket is full.
func (lm *limiter) refill(b *bucket, capacity float64, now time.Time) {
	if b.last.IsZero() {
		b.tokens = capacity
	} else if d := now.Sub(b.last); d > 0 {
		b.tokens = min(capacity, b.tokens+float64(d)/float64(lm.every))
	}
	b.last = now
}

func (lm *limiter) addrBucket(key string, now time.Time) *bucket {
	if b, ok := lm.addrs[key]; ok {
		return b
	}
	if len(lm.addrs) >= maxLimitedAddresses {
		for k, b := range lm.addrs {
			if lm.refill(b, lm.capAddr, now); b.tokens >= lm.capAddr {
				delete(lm.addrs, k)
			}
		}
		if len(lm.addrs) >= maxLimitedAddresses {
			key = "" // one shared budget for the overflow
			if b, ok := lm.addrs[key]; ok {
				return b
			}
		}
	}
	b := &bucket{}
	lm.addrs[key] = b
	return b
}

// reservation is one login's spent budget, given back if it succeeds.
type reservation struct {
	addr, user *bucket
}

// reserve spends one failure from the address's budget and, for a
// configured user, the user's, before a password is checked. When the
// address's budget is empty, or the user's and the address may not pass
// it (passesEmptyUser), nothing is spent and wait says when to try
// again.
func (lm *limiter) reserve(addr, user string, known bool, now time.Time) (res reservation, wait time.Duration, ok bool) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	var need []*bucket
	var caps []float64
	if lm.capAddr > 0 {
		b := lm.addrBucket(addr, now)
		res.addr = b
		need, caps = append(need, b), append(caps, lm.capAddr)
	}
	if known && lm.capUser > 0 {
		b := lm.users[user]
		if b == nil {
			b = &bucket{}
			lm.users[user] = b
		}
		if lm.refill(b, lm.capUser, now); b.tokens >= 1 || !lm.passesEmptyUser(addr, user, now) {
			res.user = b
			need, caps = append(need, b), append(caps, lm.capUser)
		}
	}
	for i, b := range need {
		lm.refill(b, caps[i], now)
		if b.tokens < 1 {
			wait = max(wait, time.Duration((1-b.tokens)*float64(lm.every)))
		}
	}
	if wait > 0 {
		return reservation{}, wait, false
	}
	for _, b := range need {
		b.tokens--
	}
	return res, 0, true
}

// refund gives a reservation back (the login succeeded or was not tried).
func (lm *limiter) refund(res reservation) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if res.addr != nil {
		res.addr.tokens = min(lm.capAddr, res.addr.tokens+1)
	}
	if res.user != nil {
		res.user.tokens = min(lm.capUser, res.user.tokens+1)
	}
}

// clientAddress is the budget key of a request's client: its IP address,
// or the /64 network of an IPv6 address (one host usually has all of it).
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// gate serialises the key derivations of one client address: a client
// sending many guesses at once holds one derivation slot, not all.
type gate struct {
	ch    chan struct{}
	users int
}

// flight is one password check in progress; identical checks arriving
// meanwhile wait for its result instead of deriving the key again.
type flight struct {
	done   chan struct{}
	acc    *account
	ae     *apiError
	cancel bool // the leader's client went away: followers check again
}

// tooManyLogins is the 429 answer of an exhausted budget.
func tooManyLogins(wait time.Duration) *apiError {
	secs := int64(math.Ceil(wait.Seconds()))
	secs = max(1, secs)
	return &apiError{status: http.StatusTooManyRequests, name: "too_many_requests",
		reason:     "Too many failed logins from this address or for this user; retry in " + strconv.FormatInt(secs, 10) + " s.",
		retryAfter: time.Duration(secs) * time.Second}
}

// errLoginCancelled ends a check whose client went away.
var errLoginCancelled = errorf(http.StatusServiceUnavailable, "service_unavailable", "The request was cancelled.")

// cached reports whether password is the one verified for acc in the
// last verifiedTTL, and keeps it cached for another verifiedTTL.
func (a *authenticator) cached(acc *account, mac [32]byte, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.verified[acc.name]
	if !ok || !now.Before(e.expires) || subtle.ConstantTimeCompare(e.mac[:], mac[:]) != 1 {
		return false
	}
	e.expires = now.Add(verifiedTTL)
	a.verified[acc.name] = e
	return true
}

// check returns the account if name and password match. In order: a
// cached verification (no key derivation, no budget); an identical check
// already running (its result); the failure budgets of the client's
// address and of the user (429 when empty); one derivation at a time per
// address and GOMAXPROCS at once in all. A wrong password is 401.
func (a *authenticator) check(ctx context.Context, addr, name, password string) (*account, *apiError) {
	acc := a.users[name]
	mac := a.cacheID(name, password)
	if acc != nil && a.cached(acc, mac, a.now()) {
		return acc, nil
	}
	for {
		a.mu.Lock()
		if f, ok := a.flights[mac]; ok {
			a.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, errLoginCancelled
			}
			if f.cancel {
				continue
			}
			return f.acc, f.ae
		}
		f := &flight{done: make(chan struct{})}
		a.flights[mac] = f
		a.mu.Unlock()
		f.acc, f.ae = a.verify(ctx, addr, acc, name, password, mac)
		f.cancel = f.ae == errLoginCancelled
		a.mu.Lock()
		delete(a.flights, mac)
		a.mu.Unlock()
		close(f.done)
		return f.acc, f.ae
	}
}

// verify derives the key of one login within the budgets.
func (a *authenticator) verify(ctx context.Context, addr string, acc *account, name, password string, mac [32]byte) (*account, *apiError) {
	res, wait, ok := a.limits.reserve(addr, name, acc != nil, a.now())
	if !ok {
		return nil, tooManyLogins(wait)
	}
	g := a.enter(addr)
	defer a.leave(addr, g)
	select {
	case g.ch <- struct{}{}:
	case <-ctx.Done():
		a.limits.refund(res)
		return nil, errLoginCancelled
	}
	defer func() { <-g.ch }()
	select {
	case a.slots <- struct{}{}:
	case <-ctx.Done():
		a.limits.refund(res)
		return nil, errLoginCancelled
	}
	var good bool
	if acc != nil {
		good = acc.hash.verify(password)
	} else {
		a.dummy.verify(password) // as slow as a real check: timing does not tell names
	}
	<-a.slots
	if !good {
		if acc != nil {
			a.limits.failed(addr, name, a.now())
		}
		return nil, errUnauthorized
	}
	a.limits.refund(res)
	a.limits.succeeded(addr, name, a.now())
	a.mu.Lock()
	a.verified[name] = verifiedEntry{mac: mac, expires: a.now().Add(verifiedTTL)}
	a.mu.Unlock()
	return acc, nil
}

func (a *authenticator) enter(addr string) *gate {
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.gates[addr]
	if g == nil {
		g = &gate{ch: make(chan struct{}, 1)}
		a.gates[addr] = g
	}
	g.users++
	return g
}

func (a *authenticator) leave(addr string, g *gate) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if g.users--; g.users == 0 {
		delete(a.gates, addr)
	}
}
