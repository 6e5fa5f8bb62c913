// Command p2pwasmpeer is the native side of tests/browser/p2p-wasm.test.mjs:
// one LiveSync P2P peer (adapters/p2p/trysteronet with engine/livesyncrpc
// attached) serving an engine/vault replica in memory, and the Nostr
// relay it and the page signal through (adapters/p2p/nostrrelay with
// ForwardEphemeral, on loopback). It is a test program, not a product.
//
// It prints one JSON line {"relay", "id"} when ready, then reads one
// JSON command a line from its standard input and answers each with one
// JSON line ({"error"} on failure):
//
//	{"op": "write", "path", "text"}  writes a note into the vault
//	{"op": "read", "path"}           → {"text"}
//	{"op": "list"}                   → {"paths"}
//	{"op": "peers"}                  → {"peers": [{peerId, name, platform}]}
//	{"op": "sync", "peer"}           pulls from the peer (its id), then
//	                                 asks it to pull (legacy/reqSync)
//	{"op": "errors"}                 → {"errors": [{peer, error}]}: the
//	                                 room's join errors so far
//
// -passphrase makes the vault end-to-end encrypted with that passphrase.
// -id low (or high) makes its Trystero id "000…" ("zzz…"), so that it
// leads every pairing (or none): trystero's leader sends the offer.
//
// It exits when its standard input closes.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/livesync-go/livesync-go/adapters/p2p/nostrrelay"
	"github.com/livesync-go/livesync-go/adapters/p2p/trysteronet"
	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/rpcroom"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/trystero"
	"github.com/livesync-go/livesync-go/engine/vault"
)

func main() {
	room := flag.String("room", "", "the room id (LiveSync's group)")
	pass := flag.String("room-passphrase", "", "the room's passphrase (LiveSync's P2P passphrase)")
	name := flag.String("name", "go-peer", "the advertised device name")
	vaultName := flag.String("vault", "livesync-go", "the vault's name (its database is NAME-livesync-v2)")
	vaultPass := flag.String("passphrase", "", "the vault's E2EE passphrase; empty: a plain vault")
	id := flag.String("id", "", `"low" or "high": an id that sorts before (after) any other; "" a random one`)
	verbose := flag.Bool("v", false, "log debug records to stderr")
	flag.Parse()
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	var rnd io.Reader = rand.Reader
	switch *id {
	case "low":
		rnd = &fixedFirst{b: 0}
	case "high":
		rnd = &fixedFirst{b: 61} // trystero's id alphabet ends with z
	case "":
	default:
		fmt.Fprintln(os.Stderr, "p2pwasmpeer: -id must be low or high")
		os.Exit(2)
	}
	if err := run(*room, *pass, *name, *vaultName, *vaultPass, rnd, logger); err != nil {
		fmt.Fprintln(os.Stderr, "p2pwasmpeer:", err)
		os.Exit(1)
	}
}

type peer struct {
	v      *vault.Vault
	hosted *livesyncrpc.Hosted

	mu     sync.Mutex
	errors []map[string]string
}

// fixedFirst reads as byte b for the first 64 bytes (the ones trystero's
// id is drawn from), then as crypto/rand: the handshake challenges and
// the IVs stay random.
type fixedFirst struct {
	b    byte
	done int
}

func (f *fixedFirst) Read(p []byte) (int, error) {
	if f.done >= 64 {
		return rand.Read(p)
	}
	n := min(len(p), 64-f.done)
	for i := range n {
		p[i] = f.b
	}
	f.done += n
	return n, nil
}

func run(roomID, pass, name, vaultName, vaultPass string, rnd io.Reader, logger *slog.Logger) error {
	if roomID == "" {
		return errors.New("-room is required")
	}
	relay := nostrrelay.New(nostrrelay.Config{ForwardEphemeral: true, EventsPerMinute: 6000, Logger: logger})
	defer relay.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(ln, relay) }()
	relayURL := "ws://" + ln.Addr().String()

	ctx := context.Background()
	st, err := store.NewMemory(store.Options{Name: "p2pwasmpeer"})
	if err != nil {
		return err
	}
	defer st.Close()
	settings := vault.DefaultSettings(false)
	settings.Encrypt = vaultPass != ""
	v, err := vault.Open(ctx, st, vault.Options{Settings: &settings, Passphrase: vaultPass, Device: negotiate.DeviceInfo{DeviceName: name}})
	if err != nil {
		return err
	}
	defer v.Close()
	tweaks, err := v.TweakValues()
	if err != nil {
		return err
	}
	cfg := trysteronet.Config{RoomID: roomID, Relays: []string{relayURL}, STUN: []string{}, LoopbackOnly: true, Rand: rnd, Logger: logger}
	if pass != "" {
		cfg.Password = trystero.RoomPassword(pass)
	}
	room, err := trysteronet.New(cfg)
	if err != nil {
		return err
	}
	defer room.Close()
	hosted, err := livesyncrpc.Attach(room, livesyncrpc.Config{DB: st, DBName: livesyncrpc.DBName(vaultName), DeviceName: name,
		Tweaks: tweaks, Passphrase: vaultPass, AutoAccept: ".*"}, rpcroom.Config{})
	if err != nil {
		return err
	}
	defer hosted.Close()
	p := &peer{v: v, hosted: hosted}
	room.OnJoinError(func(peer string, err error) {
		p.mu.Lock()
		p.errors = append(p.errors, map[string]string{"peer": peer, "error": err.Error()})
		p.mu.Unlock()
	})
	if err := room.Start(ctx); err != nil {
		return err
	}
	ready, _ := json.Marshal(map[string]string{"relay": relayURL, "id": room.SelfID()})
	fmt.Println(string(ready))
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	for in.Scan() {
		out, err := p.do(ctx, in.Bytes())
		if err != nil {
			out = map[string]any{"error": err.Error()}
		}
		b, _ := json.Marshal(out)
		fmt.Println(string(b))
	}
	return nil
}

func (p *peer) do(ctx context.Context, line []byte) (map[string]any, error) {
	var c struct{ Op, Path, Text, Peer string }
	if err := json.Unmarshal(line, &c); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	switch c.Op {
	case "write":
		_, err := p.v.Write(ctx, c.Path, []byte(c.Text), vault.WriteOptions{})
		return map[string]any{}, err
	case "read":
		b, err := p.v.Read(ctx, c.Path)
		return map[string]any{"text": string(b)}, err
	case "list":
		files, err := p.v.List(ctx, "", vault.ListOptions{})
		paths := []string{}
		for _, f := range files {
			paths = append(paths, f.Meta.Path)
		}
		return map[string]any{"paths": paths}, err
	case "errors":
		p.mu.Lock()
		defer p.mu.Unlock()
		return map[string]any{"errors": append([]map[string]string{}, p.errors...)}, nil
	case "peers":
		return map[string]any{"peers": p.hosted.Known()}, nil
	case "sync":
		res, err := p.hosted.Sync(ctx, c.Peer, livesyncrpc.PullOptions{})
		return map[string]any{"docs": res.Docs}, err
	}
	return nil, fmt.Errorf("unknown op %q", c.Op)
}
