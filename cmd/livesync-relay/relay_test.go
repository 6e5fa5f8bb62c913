package main

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// The relay creates one admin account: credentials from the environment,
// or generated and printed once.
func TestFirstStartPrintsThePasswordOnce(t *testing.T) {
	dir := t.TempDir()
	rn := start(t, []string{"--data-dir", dir}, nil)
	rn.user, rn.pass = rn.credentials()
	out := rn.out.String()
	if rn.user != defaultAdminName || len(rn.pass) < 20 {
		t.Fatalf("credentials %q / %d characters", rn.user, len(rn.pass))
	}
	if n := strings.Count(out, rn.pass); n != 1 {
		t.Fatalf("the password appears %d times in the output, want once:\n%s", n, out)
	}
	for _, want := range []string{"URI:            " + rn.url, "Username:       admin", "Database name:  vault", "Remote Configuration"} {
		if !strings.Contains(out, want) {
			t.Errorf("the banner lacks %q:\n%s", want, out)
		}
	}
	var s struct {
		UserCtx struct {
			Name  string   `json:"name"`
			Roles []string `json:"roles"`
		} `json:"userCtx"`
	}
	json.Unmarshal(rn.admin("GET", "/_session", nil, 200), &s)
	if s.UserCtx.Name != "admin" || !slices.Contains(s.UserCtx.Roles, "_admin") {
		t.Fatalf("/_session: %+v", s)
	}
	rn.admin("GET", "/vault", nil, 200) // the default database exists

	fi, err := os.Stat(filepath.Join(dir, usersFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("users.json mode %v, want 0600", fi.Mode().Perm())
	}
	stored, _ := os.ReadFile(filepath.Join(dir, usersFile))
	if strings.Contains(string(stored), rn.pass) || !strings.Contains(string(stored), "-pbkdf2:sha256-") {
		t.Fatalf("users.json must hold only a hash:\n%s", stored)
	}
	if code := rn.stop(); code != exitOK {
		t.Fatalf("exit code %d after a clean shutdown", code)
	}

	// Second start: the same password works, and it is not printed.
	rn2 := start(t, []string{"--data-dir", dir}, nil)
	rn2.user, rn2.pass = rn.user, rn.pass
	out2 := rn2.out.String()
	if strings.Contains(out2, rn.pass) || passwordLine.MatchString(out2) {
		t.Fatalf("a later start printed the password:\n%s", out2)
	}
	if !strings.Contains(out2, "admin password was printed at first start; reset with --reset-admin-password") {
		t.Errorf("a later start should say the password was printed at first start:\n%s", out2)
	}
	rn2.admin("GET", "/_all_dbs", nil, 200)
	rn2.stop()

	// --reset-admin-password prints a new one; the old one stops working.
	rn3 := start(t, []string{"--data-dir", dir, "--reset-admin-password"}, nil)
	rn3.user, rn3.pass = rn3.credentials()
	if rn3.pass == rn.pass || rn3.user != "admin" {
		t.Fatalf("reset gave %q / same password %v", rn3.user, rn3.pass == rn.pass)
	}
	if code, _ := rn3.do("GET", "/_all_dbs", rn.user, rn.pass, nil); code != 401 {
		t.Errorf("the old password after a reset: %d, want 401", code)
	}
	rn3.admin("GET", "/_all_dbs", nil, 200)
}

func TestAdminFromTheEnvironment(t *testing.T) {
	t.Run("password", func(t *testing.T) {
		dir := t.TempDir()
		env := map[string]string{envAdminUser: "ops", envAdminPassword: "correct horse battery staple"}
		rn := start(t, []string{"--data-dir", dir}, env)
		rn.user, rn.pass = "ops", env[envAdminPassword]
		rn.admin("PUT", "/notes", nil, 201)
		if code, _ := rn.do("GET", "/_all_dbs", "admin", rn.pass, nil); code != 401 {
			t.Errorf("user admin with ops's password: %d", code)
		}
		if strings.Contains(rn.out.String(), rn.pass) {
			t.Fatalf("the password from the environment was printed:\n%s", rn.out)
		}
		if !strings.Contains(rn.out.String(), "Admin user: ops, password from $LIVESYNC_RELAY_ADMIN_PASSWORD") {
			t.Errorf("banner:\n%s", rn.out)
		}
		if _, err := os.Stat(filepath.Join(dir, usersFile)); !os.IsNotExist(err) {
			t.Errorf("users.json written for an environment password: %v", err)
		}
	})
	t.Run("password file", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "admin.password")
		os.WriteFile(f, []byte("from-a-file\n"), 0o600)
		rn := start(t, []string{"--data-dir", t.TempDir()}, map[string]string{envAdminPasswordFile: f})
		rn.user, rn.pass = "admin", "from-a-file"
		rn.admin("GET", "/_all_dbs", nil, 200)
	})
	t.Run("both is a usage error", func(t *testing.T) {
		_, code := launch(t, []string{"--data-dir", t.TempDir()}, map[string]string{envAdminPassword: "x", envAdminPasswordFile: "/nonexistent"})
		if code != exitUsage {
			t.Fatalf("exit %d, want %d", code, exitUsage)
		}
	})
	t.Run("reset with an environment password is a usage error", func(t *testing.T) {
		_, code := launch(t, []string{"--data-dir", t.TempDir(), "--reset-admin-password"}, map[string]string{envAdminPassword: "x"})
		if code != exitUsage {
			t.Fatalf("exit %d, want %d", code, exitUsage)
		}
	})
	t.Run("another name than the stored admin", func(t *testing.T) {
		dir := t.TempDir()
		start(t, []string{"--data-dir", dir}, nil).stop()
		_, code := launch(t, []string{"--data-dir", dir}, map[string]string{envAdminUser: "someone"})
		if code != exitUsage {
			t.Fatalf("exit %d, want %d", code, exitUsage)
		}
	})
}

// "default listen 127.0.0.1:5984 (if busy, say so clearly and exit
// non-zero)".
func TestListenAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := filepath.Join(t.TempDir(), "data")
	ctx := t.Context()
	out := &syncBuffer{}
	code := run(ctx, []string{"--listen", ln.Addr().String(), "--data-dir", dir}, envOf(nil), out, nil)
	if code != exitFailure {
		t.Fatalf("exit %d, want %d", code, exitFailure)
	}
	if !strings.Contains(out.String(), "address already in use") || !strings.Contains(out.String(), "--listen") {
		t.Fatalf("unclear message: %s", out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the data folder was created although the relay could not listen: %v", err)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--no-such-flag"},
		{"extra"},
		{"--listen", "nonsense"},
		{"--log-format", "xml"},
		{"--log-level", "loud"},
		{"--config", "/nonexistent/relay.toml"},
	} {
		out := &syncBuffer{}
		if code := run(t.Context(), args, envOf(nil), out, nil); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, out)
		}
	}
	out := &syncBuffer{}
	if code := run(t.Context(), []string{"-h"}, envOf(nil), out, nil); code != exitOK || !strings.Contains(out.String(), "usage: livesync-relay") {
		t.Errorf("-h: %d %s", code, out)
	}
}

func TestHealthz(t *testing.T) {
	rn := start(t, []string{"--data-dir", t.TempDir()}, nil)
	code, b := rn.do("GET", "/healthz", "", "", nil)
	if code != 200 || !strings.Contains(string(b), `"ok"`) {
		t.Fatalf("/healthz: %d %s", code, b)
	}
	if code, _ := rn.do("POST", "/healthz", "", "", nil); code != 405 {
		t.Errorf("POST /healthz: %d", code)
	}
}

// A stopped relay leaves no goroutine behind (the hold-back's saver and
// purgatory driver, feeds, the HTTP server).
func TestNoGoroutineLeftAfterStop(t *testing.T) {
	http.DefaultClient.CloseIdleConnections()
	before := runtime.NumGoroutine()
	rn := startAdmin(t, t.TempDir())
	meta, chunks := note(t, plainCodec(t), "Leak.md", "checked\n")
	rn.pushDocs("vault", meta)
	rn.pushDocs("vault", chunks...)
	rn.status()
	rn.admin("GET", "/metrics", nil, 200)
	if code := rn.stop(); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	http.DefaultClient.CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
	}
}
