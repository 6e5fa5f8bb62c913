//go:build linux

package p2p

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
)

// The namespace test's topology: peer A and peer B each sit on their own
// link to the relay R, which owns both links' router addresses and does
// not forward packets, so nothing from A reaches B except through R's
// circuit relay service.
const (
	nsAddrA        = "10.77.1.2"
	nsAddrRforA    = "10.77.1.1"
	nsAddrRforB    = "10.77.2.1"
	nsAddrB        = "10.77.2.2"
	nsRelayPort    = "4001"
	nsRoleEnv      = "LIVESYNC_P2P_NETNS_ROLE"
	nsDirEnv       = "LIVESYNC_P2P_NETNS_DIR"
	nsReadyPrefix  = "ready "
	nsResultPrefix = "result "
)

// netnsChunks are what B serves and A fetches.
func netnsChunks() []engine.Chunk {
	return []engine.Chunk{
		{ID: "h:ns-one", Data: "first chunk, through the relay"},
		{ID: "h:ns-two", Data: strings.Repeat("a longer chunk ", 4096)},
		{ID: "h:ns-three", Data: "third"},
	}
}

// netnsResult is what the client role reports.
type netnsResult struct {
	DirectErr string   `json:"direct_err"` // the direct dial's error; empty if it connected
	Found     []string `json:"found"`      // data of the fetched chunks, in request order
	Missing   int      `json:"missing"`
	FetchErr  string   `json:"fetch_err"`
	Remote    []string `json:"remote"` // remote multiaddrs of A's connections to B
}

// A peer that can reach another only through the relay's circuit
// connects through it: three network namespaces (A, relay, B) joined by
// veth pairs, the relay not forwarding; each role runs this test binary
// inside its namespace. B keeps a slot on the relay and serves chunks to
// A; A, given B's announced addresses, cannot dial B directly, fetches the
// chunks, and its connection to B is a circuit through the relay. Both
// peers have hole punching on: without NAT between them there is nothing
// to punch (no public address to try), so the relayed connection must
// simply survive it.
func TestCircuitNamespaces(t *testing.T) {
	ns := newNetnsTopology(t)
	dir := t.TempDir()
	ids := make(map[string]peer.ID)
	for _, role := range []string{"relay", "server", "client"} {
		ids[role] = writeRoleKey(t, dir, role)
	}
	writeLines(t, filepath.Join(dir, "ids"), ids["relay"].String(), ids["server"].String(), ids["client"].String())

	relay := ns.start(t, ns.r, "relay", dir)
	relay.waitReady(t)
	server := ns.start(t, ns.b, "server", dir)
	serverAddrs := server.waitReady(t)
	if len(circuitOnly(t, serverAddrs)) == 0 {
		t.Fatalf("B announced no circuit address: %q", serverAddrs)
	}
	writeLines(t, filepath.Join(dir, "server.addrs"), serverAddrs...)

	out, err := ns.run(t, ns.a, "client", dir)
	if err != nil {
		t.Fatalf("client role: %v\n%s", err, out)
	}
	var res netnsResult
	if err := json.Unmarshal(resultLine(out), &res); err != nil {
		t.Fatalf("client role's result: %v\n%s", err, out)
	}
	t.Logf("direct dial from A to B: %s", res.DirectErr)
	t.Logf("A's connections to B: %q", res.Remote)
	if res.DirectErr == "" {
		t.Fatal("A dialled B directly, but the relay must not forward")
	}
	if res.FetchErr != "" {
		t.Fatalf("fetch through the relay: %s", res.FetchErr)
	}
	want := netnsChunks()
	if res.Missing != 0 || len(res.Found) != len(want) {
		t.Fatalf("fetched %d chunks, %d missing; want %d", len(res.Found), res.Missing, len(want))
	}
	for i, c := range want {
		if res.Found[i] != c.Data {
			t.Fatalf("chunk %s came back different", c.ID)
		}
	}
	if len(res.Remote) == 0 {
		t.Fatal("A had no connection to B after the fetch")
	}
	for _, a := range res.Remote {
		if !strings.Contains(a, "/p2p-circuit") {
			t.Errorf("A's connection to B is over %s, want a circuit through the relay", a)
		}
	}
}

// netnsTopology is three namespaces made for one test run.
type netnsTopology struct {
	a, r, b string
	exe     string
}

// netnsUnavailable skips the test where namespaces cannot be made, but
// fails it under CI (which runs as root), so CI cannot skip it silently;
// LIVESYNC_TEST_NETNS=skip lets a CI without root skip it on purpose.
func netnsUnavailable(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") != "" && os.Getenv("LIVESYNC_TEST_NETNS") != "skip" {
		t.Fatalf("%s; CI must run the namespace circuit test (as root), or set LIVESYNC_TEST_NETNS=skip to skip it on purpose", why)
	}
	t.Skip(why)
}

// newNetnsTopology creates the namespaces and links, removed when the
// test ends. Where namespaces cannot be made (not root, or `ip netns add`
// refused) the test is skipped with the reason.
func newNetnsTopology(t *testing.T) *netnsTopology {
	if os.Geteuid() != 0 {
		netnsUnavailable(t, fmt.Sprintf("network namespaces need root; running as uid %d", os.Geteuid()))
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	n := &netnsTopology{a: "lsg" + tag + "a", r: "lsg" + tag + "r", b: "lsg" + tag + "b", exe: exe}
	for i, name := range []string{n.a, n.r, n.b} {
		out, err := exec.Command("ip", "netns", "add", name).CombinedOutput()
		if err != nil && i == 0 {
			netnsUnavailable(t, fmt.Sprintf("network namespaces are not available here: ip netns add: %v: %s", err, strings.TrimSpace(string(out))))
		}
		if err != nil {
			t.Fatalf("ip netns add %s: %v: %s", name, err, out)
		}
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	}
	// Interface names are at most 15 bytes.
	steps := [][]string{
		{"link", "add", "va" + tag, "type", "veth", "peer", "name", "ra" + tag},
		{"link", "set", "va" + tag, "netns", n.a},
		{"link", "set", "ra" + tag, "netns", n.r},
		{"link", "add", "vb" + tag, "type", "veth", "peer", "name", "rb" + tag},
		{"link", "set", "vb" + tag, "netns", n.b},
		{"link", "set", "rb" + tag, "netns", n.r},
		{"-n", n.a, "addr", "add", nsAddrA + "/24", "dev", "va" + tag},
		{"-n", n.r, "addr", "add", nsAddrRforA + "/24", "dev", "ra" + tag},
		{"-n", n.r, "addr", "add", nsAddrRforB + "/24", "dev", "rb" + tag},
		{"-n", n.b, "addr", "add", nsAddrB + "/24", "dev", "vb" + tag},
	}
	for _, name := range []string{n.a, n.r, n.b} {
		steps = append(steps, []string{"-n", name, "link", "set", "lo", "up"})
	}
	steps = append(steps,
		[]string{"-n", n.a, "link", "set", "va" + tag, "up"},
		[]string{"-n", n.r, "link", "set", "ra" + tag, "up"},
		[]string{"-n", n.r, "link", "set", "rb" + tag, "up"},
		[]string{"-n", n.b, "link", "set", "vb" + tag, "up"},
		// R is each peer's router, so packets for the other side reach
		// it, and are dropped there: it does not forward.
		[]string{"-n", n.a, "route", "add", "default", "via", nsAddrRforA},
		[]string{"-n", n.b, "route", "add", "default", "via", nsAddrRforB},
	)
	for _, args := range steps {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	fwd, err := exec.Command("ip", "netns", "exec", n.r, "cat", "/proc/sys/net/ipv4/ip_forward").Output()
	if err != nil || strings.TrimSpace(string(fwd)) != "0" {
		t.Fatalf("the relay's namespace forwards packets (ip_forward %q, %v)", fwd, err)
	}
	return n
}

// roleProc is a role running in the background in its namespace.
type roleProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	out   *strings.Builder
}

// command runs this test binary's TestHelperProcessNetns in namespace ns.
func (n *netnsTopology) command(ctx context.Context, ns, role, dir string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, n.exe,
		"-test.run=^TestHelperProcessNetns$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), nsRoleEnv+"="+role, nsDirEnv+"="+dir)
	return cmd
}

// start runs a long-lived role; it ends when its standard input closes,
// at the test's end.
func (n *netnsTopology) start(t *testing.T, ns, role, dir string) *roleProc {
	t.Helper()
	cmd := n.command(context.Background(), ns, role, dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &roleProc{cmd: cmd, stdin: stdin, lines: make(chan string, 64), out: new(strings.Builder)}
	cmd.Stderr = p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return p
}

// waitReady waits for the role's "ready" line and returns the addresses
// on it.
func (p *roleProc) waitReady(t *testing.T) []string {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("role exited before it was ready: %s", p.out.String())
			}
			if rest, found := strings.CutPrefix(line, nsReadyPrefix); found {
				return strings.Fields(rest)
			}
		case <-timeout:
			t.Fatal("role not ready after a minute")
		}
	}
}

// run runs a one-shot role and returns its standard output.
func (n *netnsTopology) run(t *testing.T, ns, role, dir string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := n.command(ctx, ns, role, dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return append(out, stderr.String()...), err
	}
	return out, nil
}

// resultLine returns the client role's result from its output.
func resultLine(out []byte) []byte {
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, nsResultPrefix); ok {
			return []byte(rest)
		}
	}
	return nil
}

// writeRoleKey creates the role's identity key in dir and returns its
// peer id.
func writeRoleKey(t *testing.T, dir, role string) peer.ID {
	t.Helper()
	key, err := LoadOrCreateIdentity(filepath.Join(dir, role+".key"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func writeLines(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestHelperProcessNetns is not a test: it is the body of one role of
// TestCircuitNamespaces, run by it inside a namespace. Run directly, it
// does nothing.
func TestHelperProcessNetns(t *testing.T) {
	role := os.Getenv(nsRoleEnv)
	if role == "" {
		return
	}
	dir := os.Getenv(nsDirEnv)
	var err error
	switch role {
	case "relay":
		err = netnsRelay(dir)
	case "server":
		err = netnsServer(dir)
	case "client":
		err = netnsClient(dir)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		t.Fatalf("%s: %v", role, err)
	}
}

// roleIdentity reads a role's key and the three peer ids.
func roleIdentity(dir, role string) (crypto.PrivKey, []peer.ID, error) {
	key, err := LoadOrCreateIdentity(filepath.Join(dir, role+".key"))
	if err != nil {
		return nil, nil, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, "ids"))
	if err != nil {
		return nil, nil, err
	}
	var ids []peer.ID
	for _, s := range strings.Fields(string(raw)) {
		id, err := peer.Decode(s)
		if err != nil {
			return nil, nil, err
		}
		ids = append(ids, id)
	}
	if len(ids) != 3 {
		return nil, nil, fmt.Errorf("%d peer ids, want relay, server and client", len(ids))
	}
	return key, ids, nil
}

// netnsRelay is R: a relay on both links, until its input closes.
func netnsRelay(dir string) error {
	key, _, err := roleIdentity(dir, "relay")
	if err != nil {
		return err
	}
	h, err := NewHost(context.Background(), Config{
		Identity:     key,
		ListenAddrs:  []string{"/ip4/0.0.0.0/tcp/" + nsRelayPort, "/ip4/0.0.0.0/udp/" + nsRelayPort + "/quic-v1"},
		RelayService: true,
	})
	if err != nil {
		return err
	}
	defer h.Close()
	fmt.Println(nsReadyPrefix + strings.Join(Addrs(h), " "))
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// netnsServer is B: a peer whose only route out is R, keeping a slot on
// R and serving chunks to A, until its input closes. Ready once its
// circuit address is known; the line carries all of B's addresses.
func netnsServer(dir string) error {
	key, ids, err := roleIdentity(dir, "server")
	if err != nil {
		return err
	}
	relay := "/p2p/" + ids[0].String()
	h, err := NewHost(context.Background(), Config{
		Identity:     key,
		ListenAddrs:  []string{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"},
		StaticRelays: []string{"/ip4/" + nsAddrRforB + "/tcp/" + nsRelayPort + relay, "/ip4/" + nsAddrRforB + "/udp/" + nsRelayPort + "/quic-v1" + relay},
		HolePunching: true,
	})
	if err != nil {
		return err
	}
	defer h.Close()
	allow := NewAllowList()
	allow.Allow(ids[2], "peer A")
	defer ServeChunks(h, ServerConfig{Store: enginetest.NewMemChunks(netnsChunks()...), Allow: allow})()
	deadline := time.Now().Add(45 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(strings.Join(Addrs(h), " "), "/p2p-circuit") {
		if time.Now().After(deadline) {
			return fmt.Errorf("no reservation on the relay; addresses %q", Addrs(h))
		}
		<-tick.C
	}
	fmt.Println(nsReadyPrefix + strings.Join(Addrs(h), " "))
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// netnsClient is A: it tries B's direct addresses (which must fail), then
// fetches the chunks given all of B's announced addresses, and prints a
// netnsResult.
func netnsClient(dir string) error {
	key, ids, err := roleIdentity(dir, "client")
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(dir, "server.addrs"))
	if err != nil {
		return err
	}
	var all, direct []ma.Multiaddr
	for _, s := range strings.Fields(string(raw)) {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return err
		}
		all = append(all, a)
		if !isCircuit(a) {
			direct = append(direct, a)
		}
	}
	ctx := context.Background()
	h, err := NewHost(ctx, Config{Identity: key, ListenAddrs: []string{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"}, HolePunching: true})
	if err != nil {
		return err
	}
	defer h.Close()
	var res netnsResult
	res.DirectErr = "no direct address announced"
	if len(direct) > 0 {
		dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := h.Connect(dctx, peer.AddrInfo{ID: ids[1], Addrs: direct})
		cancel()
		res.DirectErr = ""
		if err != nil {
			res.DirectErr = err.Error()
		}
		h.Peerstore().ClearAddrs(ids[1])
	}
	info, err := peer.AddrInfosFromP2pAddrs(all...)
	if err != nil || len(info) != 1 {
		return errors.Join(errors.New("B's addresses name more than one peer"), err)
	}
	want := netnsChunks()
	var idList []engine.ChunkID
	for _, c := range want {
		idList = append(idList, c.ID)
	}
	got, err := NewChunkClient(h, info[0], 60*time.Second).FetchChunks(ctx, idList)
	if err != nil {
		res.FetchErr = err.Error()
	}
	for _, c := range got.Found {
		res.Found = append(res.Found, c.Data)
	}
	res.Missing = len(got.Missing)
	for _, c := range h.Network().ConnsToPeer(ids[1]) {
		res.Remote = append(res.Remote, c.RemoteMultiaddr().String())
	}
	line, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Println(nsResultPrefix + string(line))
	return nil
}
