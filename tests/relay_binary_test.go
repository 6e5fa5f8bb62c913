package tests

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The helpers that build the livesync-relay binary, start it as a user
// does and read what it prints (its URL and first-start credentials),
// shared by the relay main, acceptance and upstream tests.

// buildRelay builds cmd/livesync-relay (once per test binary), or
// returns the binary LIVESYNC_TEST_RELAY_BIN names (a release build to
// accept).
func buildRelay(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("LIVESYNC_TEST_RELAY_BIN"); bin != "" {
		return bin
	}
	return goBuildRelay(t)
}

// goBuildRelay builds cmd/livesync-relay with go build (once per test
// binary: goBuildOnce), whatever LIVESYNC_TEST_RELAY_BIN says.
func goBuildRelay(t *testing.T) string {
	t.Helper()
	return goBuildOnce(t, "../cmd/livesync-relay")
}

// relayCredentials reads the URL and the generated admin credentials the
// relay printed at its first start.
func relayCredentials(t *testing.T, p *relayProcess) couchEnv {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s+user:\s+(\S+)\n\s+password:\s+(\S+)$`).FindStringSubmatch(p.output())
	if m == nil {
		t.Fatalf("no credentials printed:\n%s", p.output())
	}
	return couchEnv{url: p.url, user: m[1], password: m[2]}
}

// hexToken returns a random 128-bit hex string.
func hexToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// relayProcess is a running livesync-relay binary.
type relayProcess struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	out  strings.Builder
	more chan struct{} // receives after each line
	done chan int
}

func (p *relayProcess) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitFor waits until the output contains s.
func (p *relayProcess) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for !strings.Contains(p.output(), s) {
		select {
		case _, ok := <-p.more:
			if !ok && !strings.Contains(p.output(), s) {
				t.Fatalf("the relay exited before printing %q:\n%s", s, p.output())
			}
		case <-deadline:
			t.Fatalf("%q never printed:\n%s", s, p.output())
		}
	}
}

// signal sends sig and returns the exit code.
func (p *relayProcess) signal(sig os.Signal) int {
	p.cmd.Process.Signal(sig)
	select {
	case code := <-p.done:
		return code
	case <-time.After(60 * time.Second):
		p.cmd.Process.Kill()
		return -1
	}
}

// startRelayProcess starts bin in wd with no configuration and a minimal
// environment, and waits for its banner.
func startRelayProcess(t *testing.T, bin, wd string) *relayProcess {
	t.Helper()
	return startRelayOpts(t, bin, wd, relayStart{args: []string{"--listen", "127.0.0.1:0"}})
}

// startRelayArgs is startRelayProcess with arguments and environment: it
// starts bin in wd and waits for its banner.
func startRelayArgs(t *testing.T, bin, wd string, env []string, args ...string) *relayProcess {
	t.Helper()
	return startRelayOpts(t, bin, wd, relayStart{env: env, args: args})
}

// relayStart says how startRelayOpts runs the relay.
type relayStart struct {
	env  []string // added to HOME and TMPDIR, the only variables passed on
	args []string
	// maxLine is the longest output line read (bufio.Scanner's limit);
	// 0 means bufio.MaxScanTokenSize.
	maxLine int
	// graceful makes the cleanup send SIGTERM and wait up to 30 s before
	// killing; otherwise the cleanup kills at once.
	graceful bool
}

// startRelayOpts starts bin in wd as o says (with nothing else of this
// process's environment) and waits for its banner.
func startRelayOpts(t *testing.T, bin, wd string, o relayStart) *relayProcess {
	t.Helper()
	cmd := exec.Command(bin, o.args...)
	cmd.Dir = wd
	cmd.Env = append([]string{"HOME=" + wd, "TMPDIR=" + os.TempDir()}, o.env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &relayProcess{cmd: cmd, more: make(chan struct{}, 1), done: make(chan int, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		if o.maxLine > 0 {
			sc.Buffer(make([]byte, 64<<10), o.maxLine)
		}
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.more <- struct{}{}:
			default:
			}
		}
		io.Copy(io.Discard, stderr)
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		p.done <- code
		close(p.more)
	}()
	if o.graceful {
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
			}
		})
	} else {
		t.Cleanup(func() { cmd.Process.Kill() })
	}
	p.waitFor(t, "Stop with Ctrl-C")
	m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(p.output())
	if m == nil {
		t.Fatalf("no URL printed:\n%s", p.output())
	}
	p.url = m[1]
	return p
}
