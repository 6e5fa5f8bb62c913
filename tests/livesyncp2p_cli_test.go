//go:build !js

package tests

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/p2p/nostrrelay"
)

// TestLiveSyncP2PCLI runs the livesync command's LiveSync P2P commands
// (p2p-peers, p2p-sync, p2p-host: the plugin's own P2P protocol) as two
// devices would, on loopback (LIVESYNC_P2P_LOOPBACK_ONLY=1: host ICE
// candidates on loopback, no STUN) with an in-process Nostr relay that
// forwards Trystero's ephemeral signalling. A pulls the plugin's
// end-to-end encrypted vault dump from the CouchDB test server and hosts
// it; B, a fresh replica, p2p-syncs with A by device name and ends with
// the vault; then B hosts, A p2p-syncs with B, and each ends with the
// other's new note. A wrong room passphrase, a device no auto-accept
// pattern names and a wrong vault passphrase fail with their messages and
// exit codes, and no secret is printed.
func TestLiveSyncP2PCLI(t *testing.T) {
	t.Parallel()
	couch := couchServer(t)
	relay := httptest.NewServer(nostrrelay.New(nostrrelay.Config{ForwardEphemeral: true, EventsPerMinute: 2000}))
	t.Cleanup(relay.Close)
	nostrURL := "ws" + strings.TrimPrefix(relay.URL, "http")
	c := &cliRunner{bin: buildCLI(t), home: t.TempDir(), couch: couch}
	v := readVectorVault(t, "e2ee")
	db := loadVaultDump(t, couchServer, v.vaultDump)
	inputs := dumpInputs(t, v.vaultDump)
	const roomPass = "room secret 7"
	env := map[string]string{"LIVESYNC_P2P_ROOM_PASSPHRASE": roomPass, "LIVESYNC_PASSPHRASE": v.FixedValues.Passphrase,
		"LIVESYNC_P2P_LOOPBACK_ONLY": "1"}
	secrets := []string{roomPass, v.FixedValues.Passphrase}
	room := []string{"--group", "notes-group", "--relay", nostrURL}
	write := func(dir, name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := t.TempDir(), t.TempDir()
	c.ok(t, a, env, "pull", c.url(db.Name()), "--quiet")
	c.ok(t, a, env, "put", "notes/from-a.md", write(a, "in", "written on A\n"))

	// A hosts; B, a fresh replica, syncs with it by device name.
	host := startHost(t, c, a, env, append([]string{"p2p-host", "--device", "desktop-a", "--auto-accept", "laptop-b"}, room...)...)
	host.waitFor(t, "serving the local replica")
	start := time.Now()
	r := c.run(t, b, env, append([]string{"p2p-sync", "desktop-a", "--device", "laptop-b", "--wait", "40s"}, room...)...)
	t.Logf("p2p-sync of a fresh replica with the plugin's vault (%d files): %s (joining, meeting, replicating both ways)", len(inputs), time.Since(start).Round(time.Millisecond))
	if r.code != 0 || !strings.Contains(r.stdout, "synced with peer desktop-a (") || !strings.Contains(r.stdout, "the peer pulled back") ||
		strings.Contains(r.stderr, "settings differ") {
		t.Fatalf("p2p-sync from B: exit %d\nstdout: %s\nstderr: %s\nhost: %s", r.code, r.stdout, r.stderr, host.output())
	}
	c.noSecrets(t, r, secrets...)
	want := map[string]string{"notes/from-a.md": "written on A\n"}
	for p, data := range inputs {
		want[p] = string(data)
	}
	checkCat(t, c, b, env, want)
	host.waitFor(t, "peer arrived, served", "laptop-b")
	// SIGTERM (a service manager's stop) ends the host with exit 0 too.
	if err := host.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-host.done
	if err := host.cmd.Wait(); err != nil {
		t.Errorf("the host ended with %v after SIGTERM, want exit 0; stderr:\n%s", err, host.output())
	}
	checkNoSecret(t, host.output(), secrets)

	// B hosts and writes a note; A writes one and syncs with B.
	c.ok(t, b, env, "put", "notes/from-b.md", write(b, "in", "written on B\n"))
	c.ok(t, a, env, "put", "notes/from-a2.md", write(a, "in", "A's second note\n"))
	// B's room settings come from the plugin's settings (data.json).
	plugin, err := json.Marshal(map[string]any{"P2P_Enabled": true, "P2P_roomID": "notes-group", "P2P_passphrase": roomPass,
		"P2P_relays": nostrURL, "P2P_AutoAcceptingPeers": "desktop-a, ~^fresh-", "P2P_DevicePeerName": "laptop-b",
		"P2P_AutoBroadcast": true})
	if err != nil {
		t.Fatal(err)
	}
	host = startHost(t, c, b, env, "p2p-host", "--plugin-settings", write(b, "data.json", string(plugin)))
	host.waitFor(t, "serving the local replica")
	r = c.run(t, a, env, append([]string{"p2p-sync", "laptop-b", "--device", "desktop-a", "--wait", "40s", "--json"}, room...)...)
	var res struct {
		OK         bool     `json:"ok"`
		Device     string   `json:"device"`
		Platform   string   `json:"platform"`
		DocsPulled int      `json:"docs_pulled"`
		PulledBack bool     `json:"pulled_back"`
		Mismatch   []string `json:"tweak_mismatch"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); r.code != 0 || err != nil || !res.OK || res.Device != "laptop-b" ||
		res.Platform != "server" || res.DocsPulled < 2 || !res.PulledBack || len(res.Mismatch) != 0 {
		t.Fatalf("p2p-sync from A: exit %d\nstdout: %s\nstderr: %s\nhost: %s", r.code, r.stdout, r.stderr, host.output())
	}
	checkCat(t, c, a, env, map[string]string{"notes/from-b.md": "written on B\n"})
	host.waitFor(t, "peer finished pulling from this device")
	checkLiveSyncP2PFollow(t, c, a, env, room, write)
	checkLiveSyncP2PRefusals(t, c, host, env, room, secrets)
	checkNoSecret(t, host.stop(t), secrets)
	checkCat(t, c, b, env, map[string]string{"notes/from-a2.md": "A's second note\n", "notes/from-a.md": "written on A\n"})
}

// checkLiveSyncP2PFollow: C, a third device, takes the vault from the
// running host laptop-b (which broadcasts) and hosts it following
// laptop-b; what A then syncs to laptop-b reaches C without C asking.
func checkLiveSyncP2PFollow(t *testing.T, c *cliRunner, a string, env map[string]string, room []string, write func(dir, name, body string) string) {
	t.Helper()
	dir := t.TempDir()
	c.ok(t, dir, env, append([]string{"p2p-sync", "laptop-b", "--device", "fresh-c", "--wait", "40s"}, room...)...)
	follower := startHost(t, c, dir, env, append([]string{"p2p-host", "--device", "fresh-c", "--auto-accept", "laptop-b", "--follow", "laptop-b"}, room...)...)
	follower.waitFor(t, "peer arrived, served", "laptop-b")
	follower.mark() // laptop-b has announced no change since C took the vault
	c.ok(t, a, env, "put", "notes/from-a3.md", write(a, "in", "A's third note\n"))
	c.ok(t, a, env, append([]string{"p2p-sync", "laptop-b", "--device", "desktop-a", "--wait", "40s"}, room...)...)
	follower.waitFor(t, "pulled from peer", "laptop-b")
	follower.stop(t)
	checkCat(t, c, dir, env, map[string]string{"notes/from-a3.md": "A's third note\n", "notes/from-a.md": "written on A\n"})
}

// checkLiveSyncP2PRefusals runs the failures against the running host
// (device laptop-b, auto-accepting desktop-a and ~^fresh-), and lists
// its room.
func checkLiveSyncP2PRefusals(t *testing.T, c *cliRunner, host *hostProc, env map[string]string, room, secrets []string) {
	t.Helper()
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for k, v := range env {
			m[k] = v
		}
		m[k] = v
		return m
	}
	// p2p-peers lists the host with its platform.
	r := c.ok(t, t.TempDir(), env, append([]string{"p2p-peers", "--device", "lister", "--wait", "8s"}, room...)...)
	if !strings.Contains(r.stdout, "PEER") || !strings.Contains(r.stdout, "laptop-b") || !strings.Contains(r.stdout, "server") {
		t.Errorf("p2p-peers: stdout %q, stderr %q", r.stdout, r.stderr)
	}

	// A device no auto-accept pattern names is rejected.
	r = c.run(t, t.TempDir(), env, append([]string{"p2p-sync", "laptop-b", "--device", "stranger", "--wait", "40s"}, room...)...)
	if want := `rejected this device: on that device, add "stranger" to the auto-accepting peers`; r.code != 7 || !strings.Contains(r.stderr, want) {
		t.Errorf("unaccepted device: exit %d, stderr %q; want exit 7 and %q", r.code, r.stderr, want)
	}
	host.waitFor(t, "not served", "stranger")

	// A fresh replica with another vault passphrase replicates nothing.
	r = c.run(t, t.TempDir(), with("LIVESYNC_PASSPHRASE", "not the vault's"), append([]string{"p2p-sync", "laptop-b", "--device", "fresh-d", "--wait", "40s"}, room...)...)
	if want := "vault passphrase is not this vault's"; r.code != 6 || !strings.Contains(r.stderr, want) {
		t.Errorf("wrong vault passphrase: exit %d, stderr %q; want exit 6 and %q", r.code, r.stderr, want)
	}

	// Another room passphrase: trystero's "incorrect room password" on
	// one side or both (the side that answers an offer cannot open it).
	host.mark()
	r = c.run(t, t.TempDir(), with("LIVESYNC_P2P_ROOM_PASSPHRASE", "not the room's"), append([]string{"p2p-sync", "laptop-b", "--device", "fresh-e", "--wait", "12s"}, room...)...)
	switch {
	case r.code == 5 && strings.Contains(r.stderr, "incorrect room password"):
	case r.code == 4 && strings.Contains(r.stderr, "was not found in group notes-group within 12s") && strings.Contains(r.stderr, "room passphrase"):
		host.waitFor(t, "incorrect room password")
	default:
		t.Errorf("wrong room passphrase: exit %d, stderr %q; want exit 5 (incorrect room password) or 4 with the host reporting it", r.code, r.stderr)
	}
	c.noSecrets(t, r, append(secrets, "not the room's")...)
}

// checkCat checks files of the replica in dir.
func checkCat(t *testing.T, c *cliRunner, dir string, env map[string]string, want map[string]string) {
	t.Helper()
	for p, data := range want {
		r := c.run(t, dir, env, "cat", p)
		if r.code != 0 || r.stdout != data {
			t.Errorf("%s: exit %d, %d bytes (want %d); stderr %s", p, r.code, len(r.stdout), len(data), r.stderr)
		}
	}
}

func checkNoSecret(t *testing.T, out string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && strings.Contains(out, s) {
			t.Errorf("the host printed a secret: %q", out)
		}
	}
}
