package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

func TestClassify(t *testing.T) {
	const remote = "http://127.0.0.1:5984/vault"
	at := func(err error) error { return &remoteError{remote: remote, err: err} }
	refused := &engine.Error{Op: "check database", Stage: engine.StageTransport,
		Err: &url.Error{Op: "Head", URL: remote, Err: &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5984}, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}}
	mismatch := &negotiate.TweakMismatchError{Diffs: []negotiate.TweakDiff{{Key: "encrypt", Preferred: []byte("true"), Current: []byte("false"), Impact: negotiate.ImpactBreaking}}}
	for _, tc := range []struct {
		name string
		err  error
		code int
		want []string
	}{
		{"usage", usageError{"bad flag"}, exitUsage, []string{"bad flag"}},
		{"partial", partialError{failed: 2, total: 9}, exitPartial, []string{"2 of 9 files"}},
		{"interrupted", fmt.Errorf("pull: %w", context.Canceled), exitInterrupted, []string{"interrupted"}},
		{"unreachable", at(refused), exitUnreachable, []string{remote, "connection refused by 127.0.0.1:5984"}},
		{"dns", at(&engine.Error{Stage: engine.StageTransport, Err: &net.DNSError{Name: "couch.invalid", Err: "no such host"}}), exitUnreachable, []string{"couch.invalid", "cannot be resolved"}},
		{"5xx", at(&engine.Error{Stage: engine.StageTransport, Err: errors.New("couchdb: HTTP 503")}), exitUnreachable, []string{"HTTP 503"}},
		{"auth", at(&engine.Error{Stage: engine.StageAuth, Err: errors.New("couchdb: HTTP 401 unauthorized: Name or password is incorrect.")}), exitAuth, []string{remote, "HTTP 401", "user name or password"}},
		{"decrypt", at(&engine.Error{Op: "decode remote document", DocID: "h:+abc", Stage: engine.StageDecrypt, Err: engine.ErrDecrypt}), exitPassphrase, []string{remote, "h:+abc", "passphrase is wrong"}},
		{"passphrase probe", at(&passphraseError{remote: remote, docID: "f:1"}), exitPassphrase, []string{"passphrase is wrong"}},
		{"locked", at(fmt.Errorf("couchdb: handshake: sync refused: %w", negotiate.ErrNodeLocked)), exitRefused, []string{remote, "locked", "--rebuild-local", "livesync unlock"}},
		{"cleaned", at(negotiate.ErrNodeCleaned), exitRefused, []string{"cleaned up"}},
		{"incompatible", at(negotiate.ErrIncompatible), exitRefused, []string{"incompatible"}},
		{"tweaks", at(mismatch), exitRefused, []string{"encrypt is true there, false here"}},
		{"no database", at(couchdb.ErrNoDatabase), exitRefused, []string{"does not exist"}},
		{"disk full", &localError{"/v/store.db", &engine.Error{Op: "bulk docs", Stage: engine.StageStorage, Err: &os.PathError{Op: "write", Path: "/v/store.db", Err: syscall.ENOSPC}}}, exitLocal, []string{"/v/store.db", "no space left"}},
		{"store busy", &localError{"/v/store.db", fmt.Errorf("boltstore: open: %w", bolt.ErrTimeout)}, exitLocal, []string{"in use by another livesync process"}},
		{"store damaged", &localError{"/v/store.db", errors.New("invalid database")}, exitLocal, []string{"/v/store.db", "invalid database"}},
		{"other", errors.New("something else"), exitFailed, []string{"something else"}},
	} {
		code, msg := classify(tc.err)
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d (%s)", tc.name, code, tc.code, msg)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q lacks %q", tc.name, msg, w)
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("%s: more than one line: %q", tc.name, msg)
		}
	}
}

// An unreachable remote (a closed port), with the exit code, one line,
// and --json's error object.
func TestUnreachableRemote(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := newSession(t)
	s.env["LIVESYNC_PASSWORD"] = "hunter2"
	code, out, errs := s.run("", "pull", "http://admin@"+addr+"/vault", "--json")
	if code != exitUnreachable || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "connection refused") || strings.Contains(errs, "hunter2") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if !strings.Contains(out, `"exit_code":4`) || !strings.Contains(out, `"ok":false`) {
		t.Errorf("--json error: %q", out)
	}
}

// A server that answers 401 to everything: exit 5.
func TestWrongPasswordExit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"unauthorized","reason":"Name or password is incorrect."}`)
	}))
	defer srv.Close()
	s := newSession(t)
	s.env["LIVESYNC_PASSWORD"] = "hunter2"
	u := strings.Replace(srv.URL, "http://", "http://admin@", 1) + "/vault"
	code, _, errs := s.run("", "pull", u)
	if code != exitAuth || strings.Count(errs, "\n") != 1 || strings.Contains(errs, "hunter2") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	// A user without a password and no terminal to ask on.
	delete(s.env, "LIVESYNC_PASSWORD")
	if code, _, errs := s.run("", "pull", u); code != exitUsage || !strings.Contains(errs, "LIVESYNC_PASSWORD") {
		t.Errorf("no password: exit %d %q", code, errs)
	}
}

func TestUsage2(t *testing.T) {
	for _, args := range [][]string{
		{"pull", "a", "b"}, {"cat"}, {"put"}, {"rm"}, {"status", "x"}, {"ls", "a", "b"},
		{"export", "--out", "x", "--dump", "d.json", "remote"}, {"pull", "--bogus"},
	} {
		if code, _, _ := cli(t, nil, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
	if code, _, errs := cli(t, nil, "pull", "-h"); code != exitOK || !strings.Contains(errs, "-watch") {
		t.Errorf("pull -h: exit %d %q", code, errs)
	}
}

// Ctrl-C (a cancelled context) before a one-shot command ends: exit 130
// and one line.
func TestInterrupted(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() // accepts nothing: the request waits until cancelled
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := newSession(t)
	var out, errb strings.Builder
	env := &cliEnv{ctx: ctx, stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
		getenv: func(string) string { return "" }}
	code := runEnv(env, []string{"pull", "http://" + l.Addr().String() + "/vault", "--store", s.store})
	if code != exitInterrupted || strings.Count(errb.String(), "\n") != 1 || !strings.Contains(errb.String(), "interrupted") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
