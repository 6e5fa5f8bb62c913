package main

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/adapters/p2p/discovery"
)

// Peer-to-peer: the devices of a sync group find each other through Nostr
// relays (announcements sealed with the group's passphrase) and replicate
// directly over libp2p, each serving its replica to the peers it
// approved. A device's identity (its peer id) is the key file
// p2p-identity.key beside the replica, its approved and pending peers the
// peer book p2p-peers.json beside it; "livesync p2p approve" and "revoke"
// edit that file, which a running "livesync p2p host" re-reads.

// defaultP2PWait is how long a command waits for peers to announce
// themselves.
const defaultP2PWait = 10 * time.Second

// p2pPassphraseEnv is the environment variable of the group passphrase.
const p2pPassphraseEnv = "LIVESYNC_P2P_PASSPHRASE"

// p2pConfig is the configuration's [p2p] table.
type p2pConfig struct {
	// Group is the sync group of the p2p commands when --group is not
	// given.
	Group string `toml:"group"`
	// NostrRelays are the ws:// or wss:// URLs of the Nostr relays the
	// group announces itself on.
	NostrRelays []string `toml:"nostr_relays"`
	// Listen are the multiaddrs to listen on (default: loopback only).
	Listen []string `toml:"listen"`
	// RelayPeers are circuit relays (multiaddrs with /p2p/ID) to reserve
	// a slot on, for a device behind NAT.
	RelayPeers []string `toml:"relay_peers"`
	// PassphraseFile holds the group passphrase (default: the vault
	// passphrase).
	PassphraseFile string `toml:"passphrase_file"`
}

// check validates the table; the error completes "[p2p] ...".
func (c p2pConfig) check() error {
	if c.Group != "" {
		if err := checkGroupName(c.Group); err != nil {
			return fmt.Errorf("group: %w", err)
		}
	}
	for _, u := range c.NostrRelays {
		if err := checkNostrURL(u); err != nil {
			return fmt.Errorf("nostr_relays: %w", err)
		}
	}
	for _, a := range c.RelayPeers {
		if err := checkRelayPeer(a); err != nil {
			return fmt.Errorf("relay_peers: %w", err)
		}
	}
	return nil
}

// checkGroupName refuses a group name that cannot be the host of a
// p2p:// URL.
func checkGroupName(g string) error {
	switch {
	case g == "":
		return errors.New("the group name is empty")
	case strings.ContainsAny(g, "/?#@: \t\r\n"):
		return fmt.Errorf("the group name %q holds one of / ? # @ : or a space", g)
	}
	return nil
}

// parseP2PURL returns the group of a p2p://GROUP URL.
func parseP2PURL(raw string) (string, error) {
	i := strings.Index(raw, "://")
	if i < 0 {
		return "", usageError{fmt.Sprintf("%q is not a p2p://GROUP URL", raw)}
	}
	g := strings.TrimSuffix(raw[i+3:], "/")
	if err := checkGroupName(g); err != nil {
		return "", usageError{fmt.Sprintf("p2p://GROUP: %v", err)}
	}
	return g, nil
}

// checkNostrURL refuses what is not a ws:// or wss:// URL.
func checkNostrURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return fmt.Errorf("%q is not a ws:// or wss:// URL of a Nostr relay", raw)
	}
	return nil
}

// checkRelayPeer refuses what is not a multiaddr ending in /p2p/ID.
func checkRelayPeer(a string) error {
	if _, err := peer.AddrInfoFromString(a); err != nil {
		return fmt.Errorf("%q is not a relay's multiaddr with its /p2p/PEERID (%v)", a, err)
	}
	return nil
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// p2pFlags are the flags of the commands that join a sync group.
type p2pFlags struct {
	group          string
	passphraseEnv  string
	passphraseFile string
	nostr          listFlag
	listen         listFlag
	relayPeers     listFlag
	wait           time.Duration
}

// addP2PFlags adds the group's flags; withGroup adds --group (p2p://GROUP
// names it otherwise).
func addP2PFlags(fs *flag.FlagSet, f *p2pFlags, withGroup bool) {
	if withGroup {
		fs.StringVar(&f.group, "group", "", "the sync group (default: group in the configuration's [p2p] table)")
	}
	fs.StringVar(&f.passphraseEnv, "p2p-passphrase-env", p2pPassphraseEnv, "environment variable holding the group passphrase (else --p2p-passphrase-file, [p2p] passphrase_file, then the vault passphrase)")
	fs.StringVar(&f.passphraseFile, "p2p-passphrase-file", "", "file holding the group passphrase")
	fs.Var(&f.nostr, "nostr", "a Nostr relay (ws:// or wss:// URL) the group announces itself on; repeatable (default: nostr_relays in [p2p])")
	fs.Var(&f.listen, "listen", "a multiaddr to listen on, repeatable (default: loopback only, /ip4/127.0.0.1/tcp/0 and /ip4/127.0.0.1/udp/0/quic-v1; other devices need e.g. /ip4/0.0.0.0/tcp/4001 and /ip4/0.0.0.0/udp/4001/quic-v1)")
	fs.Var(&f.relayPeers, "relay-peer", "a circuit relay's multiaddr with /p2p/PEERID to be reachable through behind NAT; repeatable (default: relay_peers in [p2p])")
	fs.DurationVar(&f.wait, "wait", defaultP2PWait, "how long to wait for the group's peers to announce themselves")
}

// setFlags names the p2p flags the command line set.
func (f *p2pFlags) setFlags(fs *flag.FlagSet) []string {
	var set []string
	for _, n := range []string{"group", "p2p-passphrase-env", "p2p-passphrase-file", "nostr", "listen", "relay-peer", "wait"} {
		if flagSet(fs, n) {
			set = append(set, "--"+n)
		}
	}
	return set
}

// p2pSettings are the resolved settings of one group's session.
type p2pSettings struct {
	group      string
	nostr      []string
	listen     []string
	relayPeers []string
	wait       time.Duration
	device     string // this device's name in announcements
	dir        string // the replica's folder: identity and peer book
}

// p2pSettings resolves the flags against the configuration; group is
// the group named by a p2p:// remote ("" takes --group, else [p2p]
// group). needRelays requires Nostr relays (joining the group).
func (c *command) p2pSettings(f p2pFlags, group string, needRelays bool) (p2pSettings, error) {
	cfg, err := c.config()
	if err != nil {
		return p2pSettings{}, err
	}
	s := p2pSettings{group: group, wait: f.wait, device: deviceName(cfg.DeviceName)}
	if s.group == "" {
		s.group = cmpOr(f.group, cfg.P2P.Group)
	}
	if needRelays && s.group == "" {
		return s, usageError{"no sync group: give --group NAME (or a p2p://GROUP remote), or set group in the configuration's [p2p] table"}
	}
	if s.group != "" {
		if err := checkGroupName(s.group); err != nil {
			return s, usageError{err.Error()}
		}
	}
	s.nostr = pick(f.nostr, cfg.P2P.NostrRelays)
	s.listen = pick(f.listen, cfg.P2P.Listen)
	s.relayPeers = pick(f.relayPeers, cfg.P2P.RelayPeers)
	for _, u := range f.nostr {
		if err := checkNostrURL(u); err != nil {
			return s, usageError{"--nostr: " + err.Error()}
		}
	}
	for _, a := range f.relayPeers {
		if err := checkRelayPeer(a); err != nil {
			return s, usageError{"--relay-peer: " + err.Error()}
		}
	}
	if needRelays && len(s.nostr) == 0 {
		return s, usageError{"no Nostr relay to find the group's peers on: give --nostr wss://relay.example (repeatable), or nostr_relays in the configuration's [p2p] table"}
	}
	if f.wait <= 0 {
		return s, usageError{"--wait must be positive"}
	}
	path, err := c.storePath()
	if err != nil {
		return s, err
	}
	s.dir = filepath.Dir(path)
	return s, nil
}

func pick(flagValues, configValues []string) []string {
	if len(flagValues) > 0 {
		return flagValues
	}
	return configValues
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// deviceName is this device's name: device_name, else
// livesync-cli@HOST.
func deviceName(configured string) string {
	if configured != "" {
		return configured
	}
	name := "livesync-cli"
	if h, err := os.Hostname(); err == nil && h != "" {
		name += "@" + h
	}
	return name
}

// groupPassphrase resolves the group passphrase: the environment
// variable of --p2p-passphrase-env, --p2p-passphrase-file, [p2p]
// passphrase_file, then the vault passphrase (--passphrase-file,
// $LIVESYNC_PASSPHRASE, the remote's passphrase_file), then a prompt.
func (c *command) groupPassphrase(f p2pFlags, spec *remoteSpec) (string, error) {
	cfg, err := c.config()
	if err != nil {
		return "", err
	}
	env := cmpOr(f.passphraseEnv, p2pPassphraseEnv)
	if p := c.getenv(env); p != "" {
		return p, nil
	}
	if f.passphraseFile != "" {
		return readSecretFile(f.passphraseFile, "group passphrase")
	}
	if cfg.P2P.PassphraseFile != "" {
		return readSecretFile(cfg.P2P.PassphraseFile, "group passphrase")
	}
	cf := ""
	if spec != nil {
		cf = spec.cfg.PassphraseFile
	}
	p, err := c.secret(secretSource{what: "passphrase", insecureArg: c.cf.passphraseArg, file: c.cf.passphraseFile,
		envVar: "LIVESYNC_PASSPHRASE", configFile: cf, prompt: "Group passphrase: "})
	if err != nil {
		return "", err
	}
	if p == "" {
		return "", usageError{fmt.Sprintf("the sync group needs its passphrase: set %s (or --p2p-passphrase-file, or passphrase_file in [p2p]); the vault passphrase ($LIVESYNC_PASSPHRASE, --passphrase-file) is used when none is set", env)}
	}
	return p, nil
}

// p2pIdentity loads (or creates) this device's identity beside the
// replica and returns it with its peer id.
func p2pIdentity(dir string) (peer.ID, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", &localError{dir, err}
	}
	key, err := p2p.LoadOrCreateIdentity(filepath.Join(dir, p2p.IdentityFileName))
	if err != nil {
		return "", &localError{filepath.Join(dir, p2p.IdentityFileName), err}
	}
	return p2p.PeerID(key)
}

// openPeerBook opens the peer book beside the replica.
func openPeerBook(dir string) (*p2p.PeerBook, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, &localError{dir, err}
	}
	path := filepath.Join(dir, p2p.PeerBookFileName)
	b, err := p2p.OpenPeerBook(path)
	if err != nil {
		return nil, &localError{path, err}
	}
	return b, nil
}

// p2pSession is this device in one sync group: its libp2p host, its
// peer book and its membership of the group.
type p2pSession struct {
	set   p2pSettings
	host  host.Host
	id    peer.ID
	book  *p2p.PeerBook
	group *p2p.Group
}

// joinGroup starts the host with the replica folder's identity, opens
// the peer book and joins the group, serving served (nil: nothing).
func (c *command) joinGroup(set p2pSettings, passphrase string, served *p2p.Served) (*p2pSession, error) {
	if err := os.MkdirAll(set.dir, 0o700); err != nil {
		return nil, &localError{set.dir, err}
	}
	idPath := filepath.Join(set.dir, p2p.IdentityFileName)
	key, err := p2p.LoadOrCreateIdentity(idPath)
	if err != nil {
		return nil, &localError{idPath, err}
	}
	book, err := openPeerBook(set.dir)
	if err != nil {
		return nil, err
	}
	room, err := discovery.NewRoom(set.group, passphrase)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	h, err := p2p.NewHost(c.ctx, hostConfig(set, key))
	if err != nil {
		return nil, usageError{fmt.Sprintf("cannot start the peer-to-peer host (check --listen and --relay-peer): %v", err)}
	}
	s := &p2pSession{set: set, host: h, id: h.ID(), book: book}
	s.group, err = p2p.JoinGroup(c.ctx, p2p.GroupConfig{Name: set.group, Room: room, Host: h, NostrRelays: set.nostr,
		Device: set.device, Book: book, Serve: served, Logger: c.log})
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("joining group %q: %w", set.group, err)
	}
	return s, nil
}

// Close leaves the group and stops the host.
func (s *p2pSession) Close() error {
	err := s.group.Close()
	return errors.Join(err, s.host.Close())
}

// shortID is the end of a peer id, enough to tell peers apart in
// progress lines.
func shortID(id peer.ID) string {
	s := id.String()
	if len(s) > 8 {
		return "…" + s[len(s)-8:]
	}
	return s
}
