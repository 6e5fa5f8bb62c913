//go:build !js

package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/p2p/nostrrelay"
)

// TestCLIP2P runs the livesync command as users of a sync group would,
// on loopback, with an in-process Nostr relay: device A serves its
// encrypted vault (p2p host), B (approved there) syncs with p2p://GROUP
// both ways, then follows the group (sync --watch) and gets live what a
// device D approved meanwhile sends to A, X (not approved) is refused
// with the command to run and
// shows up as pending on A, a device of another group finds nobody, and
// once A revokes B, B is refused too.
func TestCLIP2P(t *testing.T) {
	t.Parallel()
	relay := httptest.NewServer(nostrrelay.New(nostrrelay.Config{}))
	t.Cleanup(relay.Close)
	nostrURL := "ws" + strings.TrimPrefix(relay.URL, "http")
	c := &cliRunner{bin: buildCLI(t), home: t.TempDir()}
	env := map[string]string{"LIVESYNC_P2P_PASSPHRASE": "group secret 1", "LIVESYNC_PASSPHRASE": "vault secret 2"}
	secrets := []string{"group secret 1", "vault secret 2"}
	a, b, x := t.TempDir(), t.TempDir(), t.TempDir()
	write := func(dir, name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c.ok(t, a, env, "put", "--encrypt", "--obfuscate-paths", "notes/from-a.md", write(a, "in", "written on A\n"))
	c.ok(t, a, env, "put", "notes/deep/second.md", write(a, "in2", "second file of A\n"))
	id := func(dir string) string { return strings.TrimSpace(c.ok(t, dir, env, "p2p", "id").stdout) }
	idA, idB, idX := id(a), id(b), id(x)
	if idA == idB || idA != id(a) {
		t.Fatalf("peer ids: A %q (again %q), B %q", idA, id(a), idB)
	}
	c.ok(t, a, env, "p2p", "approve", idB, "--device", "laptop-b")
	c.ok(t, b, env, "p2p", "approve", idA, "--device", "desktop-a")
	c.ok(t, x, env, "p2p", "approve", idA)

	host := startHost(t, c, a, env, "p2p", "host", "--verbose", "--group", "notes", "--nostr", nostrURL)
	host.waitFor(t, "listening on")

	// B pulls A's vault, then sends a file of its own.
	group := []string{"p2p://notes", "--nostr", nostrURL, "--wait", "30s"}
	r := c.run(t, b, env, append([]string{"sync", "--verbose"}, group...)...)
	if r.code != 0 {
		t.Fatalf("sync from B: exit %d\nstderr: %s\nhost: %s", r.code, r.stderr, host.output())
	}
	if !strings.Contains(r.stdout, "synced with peer "+idA+" (desktop-a)") {
		t.Errorf("sync from B: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	c.noSecrets(t, r, secrets...)
	for p, want := range map[string]string{"notes/from-a.md": "written on A\n", "notes/deep/second.md": "second file of A\n"} {
		if got := c.ok(t, b, env, "cat", p).stdout; got != want {
			t.Errorf("B's %s: %q, want %q", p, got, want)
		}
	}
	// B lists the group: itself first, A approved and present.
	r = c.ok(t, b, env, "p2p", "peers", "--json", "--group", "notes", "--nostr", nostrURL, "--wait", "3s")
	var peers struct {
		PeerID string `json:"peer_id"`
		Peers  []struct {
			PeerID           string `json:"peer_id"`
			Device           string `json:"device"`
			Approved, Online bool
		} `json:"peers"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &peers); err != nil || peers.PeerID != idB || len(peers.Peers) != 1 ||
		peers.Peers[0].PeerID != idA || !peers.Peers[0].Approved || !peers.Peers[0].Online || peers.Peers[0].Device != "desktop-a" {
		t.Errorf("p2p peers on B: %s (%v)", r.stdout, err)
	}
	c.ok(t, b, env, "put", "notes/from-b.md", write(b, "in", "written on B\n"))
	c.ok(t, b, env, append([]string{"push"}, group...)...)

	// B follows the group (sync --watch), serving its replica as a host
	// does; what another device D sends to A reaches B live.
	watch := startHost(t, c, b, env, append([]string{"sync", "--watch"}, group...)...)
	watch.waitFor(t, "syncing live with peer "+idA)
	host.waitFor(t, "syncing live with peer "+idB) // a watching replica serves too
	d := t.TempDir()
	idD := id(d)
	c.ok(t, a, env, "p2p", "approve", idD, "--device", "tablet-d")
	c.ok(t, d, env, "p2p", "approve", idA)
	host.waitFor(t, "peer "+idD+" (tablet-d) approved")
	c.ok(t, d, env, append([]string{"pull"}, group...)...)
	watch.mark()
	c.ok(t, d, env, "put", "notes/from-d.md", write(d, "in", "written on D\n"))
	c.ok(t, d, env, append([]string{"push"}, group...)...)
	watch.waitForPulled(2, 15*time.Second) // D's chunk and its note
	watch.stop(t)
	if got := c.ok(t, b, env, "cat", "notes/from-d.md").stdout; got != "written on D\n" {
		t.Errorf("B's notes/from-d.md after the watch: %q", got)
	}

	// X is not approved on A: refused, with the command to run there.
	r = c.run(t, x, env, append([]string{"sync"}, group...)...)
	want := "refused: this device is not approved there; on that device run `livesync p2p approve " + idX + "`"
	if r.code != 7 || !strings.Contains(r.stderr, "peer "+idA) || !strings.Contains(r.stderr, want) {
		t.Errorf("unapproved X: exit %d, stderr %q; want exit 7 and %q", r.code, r.stderr, want)
	}
	if got := c.run(t, x, env, "cat", "notes/from-a.md"); got.code == 0 {
		t.Errorf("X read A's file: %q", got.stdout)
	}
	if r := c.ok(t, a, env, "p2p", "pending"); !strings.Contains(r.stdout, idX) {
		t.Errorf("A's pending peers: %q, want %s", r.stdout, idX)
	}
	host.waitFor(t, "peer "+idX, "is not approved and asks to sync")

	checkNobodyThere(t, c, x, env, nostrURL)

	// A revokes B: the running host closes B out.
	c.ok(t, a, env, "p2p", "revoke", idB)
	host.waitFor(t, "peer "+idB, "revoked; its connections were closed")
	r = c.run(t, b, env, append([]string{"pull"}, group...)...)
	if want := "peer " + idA + " (desktop-a) refused: this device is not approved there"; r.code != 7 || !strings.Contains(r.stderr, want) {
		t.Errorf("revoked B: exit %d, stderr %q; want exit 7 and %q", r.code, r.stderr, want)
	}

	out := host.stop(t)
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("the host printed a secret: %q", out)
		}
	}
	if got := c.ok(t, a, env, "cat", "notes/from-b.md").stdout; got != "written on B\n" {
		t.Errorf("A's notes/from-b.md: %q", got)
	}
}

// hostProc is a livesync process running in the background, its stderr
// collected line by line.
type hostProc struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	from  int // waitFor looks at lines[from:]
	done  chan struct{}
}

// mark has waitFor look only at the lines printed from now on.
func (h *hostProc) mark() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.from = len(h.lines)
}

func startHost(t *testing.T, c *cliRunner, dir string, env map[string]string, args ...string) *hostProc {
	t.Helper()
	h := &hostProc{cmd: exec.Command(c.bin, args...), done: make(chan struct{})}
	h.cmd.Dir = dir
	h.cmd.Env = c.environ(env)
	stderr, err := h.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(h.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			h.mu.Lock()
			h.lines = append(h.lines, sc.Text())
			h.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		if h.cmd.ProcessState == nil {
			h.cmd.Process.Kill()
			h.cmd.Wait()
		}
	})
	return h
}

func (h *hostProc) output() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.lines, "\n")
}

// has reports whether a line of stderr holds every part of want.
func (h *hostProc) has(want []string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, l := range h.lines[h.from:] {
		all := true
		for _, w := range want {
			all = all && strings.Contains(l, w)
		}
		if all {
			return true
		}
	}
	return false
}

// waitForPulled waits until the live lines since mark ("pulled N doc(s)",
// one per bulk write) add up to n documents, or until limit: documents
// may also arrive through the host's pushes to this replica, which print
// nothing here, so a short count is not a failure by itself.
func (h *hostProc) waitForPulled(n int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if h.pulled() >= n {
			return
		}
		select {
		case <-h.done:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// pulled adds up the documents of the "pulled N docs" lines since mark.
func (h *hostProc) pulled() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	total := 0
	for _, l := range h.lines[h.from:] {
		if _, rest, ok := strings.Cut(l, "pulled "); ok {
			var k int
			if _, err := fmt.Sscanf(rest, "%d", &k); err == nil { // "N doc" or "N docs"
				total += k
			}
		}
	}
	return total
}

// waitFor waits (30 s at most) for a line of stderr holding every part
// of want.
func (h *hostProc) waitFor(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !h.has(want) {
		select {
		case <-h.done:
			t.Fatalf("the host ended before printing %q; stderr:\n%s", want, h.output())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 30 s; stderr:\n%s", want, h.output())
		}
	}
}

// stop interrupts the host (Ctrl-C), which must end with exit 0, and
// returns its stderr.
func (h *hostProc) stop(t *testing.T) string {
	t.Helper()
	if err := h.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-h.done
	if err := h.cmd.Wait(); err != nil {
		t.Errorf("the host ended with %v after Ctrl-C, want exit 0; stderr:\n%s", err, h.output())
	}
	return h.output()
}

// TestCLIP2PHunt: a replica whose files are held (a metadata-only pull
// from CouchDB) fetches the missing chunks from a peer that has them,
// with hunt --retry p2p://GROUP.
func TestCLIP2PHunt(t *testing.T) {
	t.Parallel()
	couch := couchServer(t)
	relay := httptest.NewServer(nostrrelay.New(nostrrelay.Config{}))
	t.Cleanup(relay.Close)
	nostrURL := "ws" + strings.TrimPrefix(relay.URL, "http")
	c := &cliRunner{bin: buildCLI(t), home: t.TempDir(), couch: couch}
	v := readVectorVault(t, "plain")
	db := loadVaultDump(t, couchServer, v.vaultDump)
	inputs := dumpInputs(t, v.vaultDump)
	env := map[string]string{"LIVESYNC_P2P_PASSPHRASE": "group secret"}
	full, held := t.TempDir(), t.TempDir()
	c.ok(t, full, env, "pull", c.url(db.Name()), "--quiet")
	c.ok(t, held, env, "pull", c.url(db.Name()), "--metadata-only", "--quiet")
	idFull := strings.TrimSpace(c.ok(t, full, env, "p2p", "id").stdout)
	idHeld := strings.TrimSpace(c.ok(t, held, env, "p2p", "id").stdout)
	c.ok(t, held, env, "p2p", "approve", idFull)
	host := startHost(t, c, full, env, "p2p", "host", "--group", "hunters", "--nostr", nostrURL)
	host.waitFor(t, "listening on")

	// Not approved there yet: refused, with the command to run there.
	hunt := []string{"hunt", "--retry", "p2p://hunters", "--nostr", nostrURL, "--wait", "30s"}
	r := c.run(t, held, env, hunt...)
	if want := "refused: this device is not approved there; on that device run `livesync p2p approve " + idHeld + "`"; r.code != 7 || !strings.Contains(r.stderr, want) {
		t.Errorf("hunt before approval: exit %d, stderr %q; want exit 7 and %q", r.code, r.stderr, want)
	}
	c.ok(t, full, env, "p2p", "approve", idHeld)
	host.waitFor(t, "peer "+idHeld, "approved")

	r = c.ok(t, held, env, hunt...)
	want := len(inputs) - 1 // empty.md has no chunks
	if !strings.Contains(r.stdout, fmt.Sprintf("%d released, 0 still held", want)) {
		t.Errorf("hunt --retry p2p://hunters: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	host.stop(t)
	if got := c.ok(t, held, env, "cat", "notes/large.md").stdout; got != string(inputs["notes/large.md"]) {
		t.Errorf("notes/large.md after the hunt: %d bytes, want %d", len(got), len(inputs["notes/large.md"]))
	}
}

// checkNobodyThere checks that the device in dir finds no peer with
// another group passphrase (another room) or in another group (exit 4).
func checkNobodyThere(t *testing.T, c *cliRunner, x string, env map[string]string, nostrURL string) {
	t.Helper()
	var r cliResult
	// Another group passphrase is another room: nobody there.
	other := map[string]string{"LIVESYNC_P2P_PASSPHRASE": "not the group's"}
	r = c.run(t, x, other, "sync", "p2p://notes", "--nostr", nostrURL, "--wait", "2s")
	if want := "no approved peer of group notes answered within 2s"; r.code != 4 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "share the group passphrase") {
		t.Errorf("another passphrase: exit %d, stderr %q; want exit 4 and %q", r.code, r.stderr, want)
	}

	// Another group (another room) finds nobody.
	r = c.run(t, x, env, "sync", "p2p://elsewhere", "--nostr", nostrURL, "--wait", "2s")
	if want := "no approved peer of group elsewhere answered within 2s"; r.code != 4 || !strings.Contains(r.stderr, want) {
		t.Errorf("another group: exit %d, stderr %q; want exit 4 and %q", r.code, r.stderr, want)
	}

}
