//go:build !js

// Command p2pbench compares a cold pull of one end-to-end encrypted vault
// peer to peer (adapters/p2p on loopback) with the same pull through the
// relay's CouchDB endpoint (cmd/livesync-relay, adapters/couchdb), in
// one run (tests/bench/p2p/run.sh).
//
//	p2pbench -relay BIN [-notes 10000] [-size 1024] [-runs 3] [-cpuprofile FILE]
//
// It writes -notes notes of about -size bytes into a memory vault, then
// for each row pulls them -runs times into a fresh vault (new store, new
// replication id) and reports the median:
//
//	p2p-vault  a peer serving its replica (p2p.ServedVault: plaintext
//	           replica encoded to the remote form as it is read)
//	p2p-store  a peer serving a relay-style database (the remote form as
//	           stored, a hold-back over a memory store), pushed over p2p first
//	couchdb    the relay binary's CouchDB endpoint, pushed over HTTP first
//
// docs/s is documents written by the pull over its duration (the attach
// and handshake excluded). Payload bytes: for p2p the frame payloads
// both ways (p2p.Meter, both protocols), for CouchDB the HTTP bodies both
// ways. Wire bytes: every byte of the TCP connections both ways (for p2p
// through a counting loopback proxy, so Noise, yamux and multistream are
// included; for CouchDB the HTTP headers are).
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/engine/holdback"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault"
)

const group = "bench"

// cpuProfile names the file of the p2p-vault pulls' CPU profile ("": none).
var cpuProfile string

// passphrase is the benchmark vault's (throw-away) E2EE passphrase.
const passphrase = "benchmark passphrase, not a secret"

type row struct {
	Name     string  `json:"name"`
	Docs     int     `json:"docs"`
	Ms       float64 `json:"ms"`
	DocsPerS float64 `json:"docsPerSec"`
	Bytes    uint64  `json:"bytes"`     // payload bytes both ways
	WireB    uint64  `json:"wireBytes"` // TCP bytes both ways (CouchDB only)
}

func main() {
	relayBin := flag.String("relay", "", "the livesync-relay binary (go build ./cmd/livesync-relay)")
	notes := flag.Int("notes", 10000, "notes in the vault")
	size := flag.Int("size", 1024, "bytes per note")
	runs := flag.Int("runs", 3, "pulls per row (the median is reported)")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the p2p-vault pulls (server and client: one process)")
	flag.Parse()
	if *relayBin == "" {
		fail(errors.New("usage: p2pbench -relay BIN [-notes N] [-size B] [-runs R]"))
	}
	if err := run(*relayBin, *notes, *size, *runs); err != nil {
		fail(err)
	}
}

func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "p2pbench:", err)
		os.Exit(1)
	}
}

func settings() livesync.Settings {
	s := vault.DefaultSettings(false)
	s.Encrypt = true
	s.Passphrase = passphrase
	return s
}

func attachOptions() vault.AttachOptions {
	return vault.AttachOptions{Create: true, Passphrase: func() (string, error) { return passphrase, nil }}
}

func run(relayBin string, notes, size, runs int) error {
	ctx := context.Background()
	s := settings()
	src, err := sourceVault(ctx, s, notes, size)
	if err != nil {
		return err
	}
	defer src.Close()
	var rows [][]row
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	vaultRows, err := p2pRows(ctx, s, "p2p-vault", p2p.ServedVault(src, group, s), runs)
	pprof.StopCPUProfile()
	if err != nil {
		return fmt.Errorf("p2p from a vault peer: %w", err)
	}
	rows = append(rows, vaultRows)
	storeRows, err := p2pStoreRows(ctx, s, src, runs)
	if err != nil {
		return fmt.Errorf("p2p from a stored peer: %w", err)
	}
	rows = append(rows, storeRows)
	couchRows, err := couchRows(ctx, s, src, relayBin, runs)
	if err != nil {
		return fmt.Errorf("CouchDB through the relay: %w", err)
	}
	rows = append(rows, couchRows)
	report(rows, notes, size)
	return nil
}

// sourceVault writes n notes of about size bytes of text into a memory
// vault.
func sourceVault(ctx context.Context, s livesync.Settings, n, size int) (*vault.Vault, error) {
	st, err := store.NewMemory(store.Options{Name: "source"})
	if err != nil {
		return nil, err
	}
	v, err := vault.Open(ctx, st, vault.Options{Settings: &s})
	if err != nil {
		return nil, err
	}
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"}
	for i := range n {
		var b strings.Builder
		fmt.Fprintf(&b, "# note %d\n", i)
		for b.Len() < size {
			k, _ := rand.Int(rand.Reader, big.NewInt(int64(len(words))))
			b.WriteString(words[k.Int64()])
			if b.Len()%64 < 6 {
				b.WriteByte('\n')
			} else {
				b.WriteByte(' ')
			}
		}
		if _, err := v.Write(ctx, fmt.Sprintf("notes/%05d.md", i), []byte(b.String()[:size]), vault.WriteOptions{}); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// freshVault is an empty replica with the vault's settings.
func freshVault(ctx context.Context, s livesync.Settings) (*vault.Vault, store.Store, error) {
	st, err := store.NewMemory(store.Options{Name: "fresh"})
	if err != nil {
		return nil, nil, err
	}
	v, err := vault.Open(ctx, st, vault.Options{Settings: &s})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return v, st, nil
}

// servePeer serves served on a new loopback host to approved peers.
func servePeer(ctx context.Context, served *p2p.Served) (host.Host, *p2p.AllowList, *p2p.Meter, func(), error) {
	h, err := p2p.NewHost(ctx, p2p.Config{})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	allow, meter := p2p.NewAllowList(), p2p.NewMeter()
	stop := p2p.Serve(h, p2p.ServeConfig{DB: *served, Allow: allow, Meter: meter})
	return h, allow, meter, func() { stop(); h.Close() }, nil
}

// clientHost is a new host with a new identity, approved by allow.
func clientHost(ctx context.Context, allow *p2p.AllowList) (host.Host, error) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, err
	}
	h, err := p2p.NewHost(ctx, p2p.Config{Identity: key})
	if err != nil {
		return nil, err
	}
	allow.Allow(h.ID(), "bench client")
	return h, nil
}

// p2pRows pulls the served database runs times, each into a fresh vault
// through a fresh client host.
func p2pRows(ctx context.Context, s livesync.Settings, name string, served *p2p.Served, runs int) ([]row, error) {
	sh, allow, meter, stop, err := servePeer(ctx, served)
	if err != nil {
		return nil, err
	}
	defer stop()
	var out []row
	for range runs {
		r, err := p2pPull(ctx, s, name, sh, allow, meter)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "%s: %d docs in %.0f ms, %.0f docs/s, %d bytes\n", r.Name, r.Docs, r.Ms, r.DocsPerS, r.Bytes)
		out = append(out, r)
	}
	return out, nil
}

func p2pPull(ctx context.Context, s livesync.Settings, name string, sh host.Host, allow *p2p.AllowList, meter *p2p.Meter) (row, error) {
	ch, err := clientHost(ctx, allow)
	if err != nil {
		return row{}, err
	}
	defer ch.Close()
	v, st, err := freshVault(ctx, s)
	if err != nil {
		return row{}, err
	}
	defer st.Close()
	defer v.Close()
	// The client reaches the server through a counting TCP proxy: Noise
	// authenticates the peer id, not the address.
	c := &counter{}
	info, stopProxy, err := tcpProxy(sh, c)
	if err != nil {
		return row{}, err
	}
	defer stopProxy()
	l, err := v.Attach(ctx, p2p.NewRemote(ch, info, p2p.RemoteOptions{Group: group}), attachOptions())
	if err != nil {
		return row{}, err
	}
	before, wire0 := meter.Snapshot()[ch.ID()], c.wire.Load()
	start := time.Now()
	res, err := v.Pull(ctx, l, vault.SyncOptions{})
	el := time.Since(start)
	if err != nil {
		return row{}, err
	}
	after := meter.Snapshot()[ch.ID()]
	bytes := after.BytesIn + after.BytesOut - before.BytesIn - before.BytesOut
	return row{Name: name, Docs: res.Pull.DocsWritten, Ms: ms(el), DocsPerS: float64(res.Pull.DocsWritten) / el.Seconds(),
		Bytes: bytes, WireB: c.wire.Load() - wire0}, nil
}

// tcpProxy forwards a loopback port to sh's TCP address, counting every
// byte both ways in c, and returns sh's peer id at the proxy's address.
func tcpProxy(sh host.Host, c *counter) (peer.AddrInfo, func(), error) {
	var target string
	for _, a := range sh.Addrs() {
		if ip, err := a.ValueForProtocol(4); err == nil { // /ip4
			if port, err := a.ValueForProtocol(6); err == nil { // /tcp
				target = net.JoinHostPort(ip, port)
				break
			}
		}
	}
	if target == "" {
		return peer.AddrInfo{}, nil, errors.New("the serving host has no TCP address")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return peer.AddrInfo{}, nil, err
	}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				out, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer out.Close()
				done := make(chan struct{})
				go func() {
					io.Copy(countConn{out, c}, in)
					out.(*net.TCPConn).CloseWrite()
					close(done)
				}()
				io.Copy(in, countConn{out, c})
				<-done
			}()
		}
	}()
	info, err := peer.AddrInfoFromString(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d/p2p/%s", ln.Addr().(*net.TCPAddr).Port, sh.ID()))
	if err != nil {
		ln.Close()
		return peer.AddrInfo{}, nil, err
	}
	return *info, func() { ln.Close() }, nil
}

// p2pStoreRows pushes the vault over p2p to a peer that serves a
// relay-style database (the remote form as stored), then pulls it.
func p2pStoreRows(ctx context.Context, s livesync.Settings, src *vault.Vault, runs int) ([]row, error) {
	inner, err := store.NewMemory(store.Options{Name: "stored"})
	if err != nil {
		return nil, err
	}
	hb, err := holdback.New(holdback.Config{}, holdback.Deps{Inner: inner})
	if err != nil {
		return nil, err
	}
	defer hb.Close()
	served := &p2p.Served{Endpoint: hb, Chunks: hb, Records: p2p.StoreRecords(hb, "")}
	sh, allow, _, stop, err := servePeer(ctx, served)
	if err != nil {
		return nil, err
	}
	ch, err := clientHost(ctx, allow)
	if err != nil {
		stop()
		return nil, err
	}
	l, err := src.Attach(ctx, p2p.NewRemote(ch, peer.AddrInfo{ID: sh.ID(), Addrs: sh.Addrs()}, p2p.RemoteOptions{Group: group}), attachOptions())
	if err == nil {
		start := time.Now()
		var res vault.SyncResult
		res, err = src.Push(ctx, l, vault.SyncOptions{})
		fmt.Fprintf(os.Stderr, "p2p push to a stored peer: %d docs in %.0f ms\n", res.Push.DocsWritten, ms(time.Since(start)))
		src.Detach(l)
	}
	ch.Close()
	stop()
	if err != nil {
		return nil, err
	}
	return p2pRows(ctx, s, "p2p-store", served, runs)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// counter counts the bytes of HTTP bodies and of TCP connections.
type counter struct {
	body, wire atomic.Uint64
}

type countConn struct {
	net.Conn
	c *counter
}

func (c countConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.c.wire.Add(uint64(n))
	return n, err
}

func (c countConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.c.wire.Add(uint64(n))
	return n, err
}

type countBody struct {
	io.ReadCloser
	c *counter
}

func (b countBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.c.body.Add(uint64(n))
	return n, err
}

type countTransport struct {
	next http.RoundTripper
	c    *counter
}

func (t countTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req = req.Clone(req.Context())
		req.Body = countBody{req.Body, t.c}
	}
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp.Body != nil {
		resp.Body = countBody{resp.Body, t.c}
	}
	return resp, err
}

func (c *counter) client() *http.Client {
	d := &net.Dialer{}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countConn{conn, c}, nil
		},
		MaxIdleConnsPerHost: 32,
	}
	return &http.Client{Transport: countTransport{tr, c}}
}

// couchRows starts the relay binary, pushes the vault to its database,
// then pulls it runs times into fresh vaults, counting bytes.
func couchRows(ctx context.Context, s livesync.Settings, src *vault.Vault, bin string, runs int) ([]row, error) {
	url, password, stop, err := startRelay(bin)
	if err != nil {
		return nil, err
	}
	defer stop()
	remote := func(c *counter) (*couchdb.Remote, error) {
		cfg := couchdb.Config{URL: url, Database: "bench", User: "admin", Password: password}
		if c != nil {
			cfg.HTTPClient = c.client()
		}
		return couchdb.NewRemote(cfg, couchdb.RemoteOptions{})
	}
	r, err := remote(nil)
	if err != nil {
		return nil, err
	}
	l, err := src.Attach(ctx, r, attachOptions())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res, err := src.Push(ctx, l, vault.SyncOptions{})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "CouchDB push to the relay: %d docs in %.0f ms\n", res.Push.DocsWritten, ms(time.Since(start)))
	src.Detach(l)
	r.Close()
	var out []row
	for range runs {
		rw, err := couchPull(ctx, s, remote)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "%s: %d docs in %.0f ms, %.0f docs/s, %d body bytes, %d wire bytes\n", rw.Name, rw.Docs, rw.Ms, rw.DocsPerS, rw.Bytes, rw.WireB)
		out = append(out, rw)
	}
	return out, nil
}

func couchPull(ctx context.Context, s livesync.Settings, remote func(*counter) (*couchdb.Remote, error)) (row, error) {
	c := &counter{}
	r, err := remote(c)
	if err != nil {
		return row{}, err
	}
	defer r.Close()
	v, st, err := freshVault(ctx, s)
	if err != nil {
		return row{}, err
	}
	defer st.Close()
	defer v.Close()
	l, err := v.Attach(ctx, r, attachOptions())
	if err != nil {
		return row{}, err
	}
	body0, wire0 := c.body.Load(), c.wire.Load()
	start := time.Now()
	res, err := v.Pull(ctx, l, vault.SyncOptions{})
	el := time.Since(start)
	if err != nil {
		return row{}, err
	}
	return row{Name: "couchdb", Docs: res.Pull.DocsWritten, Ms: ms(el), DocsPerS: float64(res.Pull.DocsWritten) / el.Seconds(),
		Bytes: c.body.Load() - body0, WireB: c.wire.Load() - wire0}, nil
}

// startRelay runs the relay binary on a free loopback port with a
// temporary data folder and one database, "bench", and returns its URL,
// the admin password and how to stop it.
func startRelay(bin string) (url, password string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "p2pbench-relay-")
	if err != nil {
		return "", "", nil, err
	}
	password = rand.Text()
	conf := fmt.Sprintf("data_dir = %q\n\n[log]\nlevel = \"warn\"\n\n[[users]]\nname = \"admin\"\npassword_env = \"P2PBENCH_ADMIN_PASSWORD\"\nadmin = true\n\n[[databases]]\nname = \"bench\"\n",
		filepath.Join(dir, "data"))
	cfgPath := filepath.Join(dir, "relay.toml")
	if err := os.WriteFile(cfgPath, []byte(conf), 0o600); err != nil {
		return "", "", nil, err
	}
	port, err := freePort()
	if err != nil {
		return "", "", nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin, "--config", cfgPath, "--listen", addr)
	cmd.Env = []string{"HOME=" + dir, "TMPDIR=" + os.TempDir(), "P2PBENCH_ADMIN_PASSWORD=" + password}
	cmd.Stderr = io.Discard
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		return "", "", nil, err
	}
	stop = func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.RemoveAll(dir)
	}
	url = "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url, password, stop, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			return "", "", nil, fmt.Errorf("the relay did not answer /healthz at %s", url)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// report prints each row's runs as JSON lines and a table of medians.
func report(rows [][]row, notes, size int) {
	enc := json.NewEncoder(os.Stdout)
	for _, rs := range rows {
		for _, r := range rs {
			enc.Encode(r)
		}
	}
	fmt.Printf("\ncold pull of %d notes of %d B (E2EE), medians of %d runs\n", notes, size, len(rows[0]))
	fmt.Println("| path | docs | docs/s (runs) | median docs/s | payload MB | wire MB |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, rs := range rows {
		rates := make([]string, len(rs))
		for i, r := range rs {
			rates[i] = fmt.Sprintf("%.0f", r.DocsPerS)
		}
		m := median(rs)
		wire := "n/a"
		if m.WireB > 0 {
			wire = fmt.Sprintf("%.2f", float64(m.WireB)/1e6)
		}
		fmt.Printf("| %s | %d | %s | %.0f | %.2f | %s |\n", m.Name, m.Docs, strings.Join(rates, ", "), m.DocsPerS, float64(m.Bytes)/1e6, wire)
	}
}

// median is the run with the median rate.
func median(rs []row) row {
	s := append([]row(nil), rs...)
	sort.Slice(s, func(i, j int) bool { return s[i].DocsPerS < s[j].DocsPerS })
	return s[len(s)/2]
}
