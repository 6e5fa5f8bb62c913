package tests

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A guesser must not lock a named user out: 72 wrong passwords for admin
// from 6 source addresses use up the per-user budget (30), and a correct
// login from a fresh address must still succeed, on POST /_session and on
// Basic auth. The guessers' addresses are refused once the user's budget
// is spent, and the right password from another address is accepted.
func TestRelayLoginGuessersDoNotLockOut(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs 127.0.0.x source addresses (Linux loopback)")
	}
	const pw = "lockout-password"
	p := hostileRelay(t, pw, "")
	var wg sync.WaitGroup
	var unauthorized, limited atomic.Int64
	start := time.Now()
	for g := range 6 {
		wg.Go(func() {
			c := clientFrom(fmt.Sprintf("127.0.0.%d", 10+g))
			for i := range 12 {
				req, _ := http.NewRequest(http.MethodGet, p.url+"/_all_dbs", nil)
				req.SetBasicAuth("admin", fmt.Sprintf("guess-%d-%d", g, i))
				resp, err := c.Do(req)
				if err != nil {
					t.Errorf("guess: %v", err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusUnauthorized:
					unauthorized.Add(1)
				case http.StatusTooManyRequests:
					limited.Add(1)
				default:
					t.Errorf("a guess got %d", resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	// The budget gives one check back every 6 s: on a loaded machine the
	// guessing can take long enough for a refill or two.
	budget := 30 + int64(time.Since(start)/(6*time.Second))
	t.Logf("72 guesses from 127.0.0.10-15 in %v: %d answered 401, %d answered 429", time.Since(start).Round(time.Millisecond), unauthorized.Load(), limited.Load())
	if unauthorized.Load() > budget || limited.Load() < 72-budget {
		t.Fatalf("the per-user budget (30, plus one per 6 s elapsed: %d) did not bound the guesses: %d checked, %d refused", budget, unauthorized.Load(), limited.Load())
	}
	// A guesser's address stays refused.
	req, _ := http.NewRequest(http.MethodGet, p.url+"/_all_dbs", nil)
	req.SetBasicAuth("admin", "guess-again")
	resp, err := clientFrom("127.0.0.10").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a guesser's next guess: %d, want 429", resp.StatusCode)
	}

	// The admin logs in from a fresh address: by POST /_session (the
	// first, which derives the key), then by Basic auth.
	c := clientFrom("127.0.0.2")
	form := url.Values{"name": {"admin"}, "password": {pw}}.Encode()
	resp, err = c.Post(p.url+"/_session", "application/x-www-form-urlencoded", strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the admin's login from a fresh address after the guessing: %d %s, want 200", resp.StatusCode, b)
	}
	req, _ = http.NewRequest(http.MethodGet, p.url+"/_all_dbs", nil)
	req.SetBasicAuth("admin", pw)
	if resp, err = c.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the admin's Basic auth after the guessing: %d, want 200", resp.StatusCode)
	}
}
