package main

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/adapters/p2p/nostrrelay"
)

// Defaults of the peer-to-peer side.
var (
	// defaultP2PListen are the addresses the relay's libp2p host listens
	// on: every interface, TCP and QUIC on port 4001 (libp2p's usual
	// port), since a relay that joins a group is there to be reached by
	// the group's other devices. Only approved peers are served.
	defaultP2PListen = []string{"/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1"}
)

const (
	// defaultP2PDevice is the device name the relay announces.
	defaultP2PDevice = "livesync-relay"
	// selfNostr in nostr_relays is the relay's own /_nostr endpoint.
	selfNostr = "self"
	// nostrPath is where the relay serves its Nostr relay.
	nostrPath = "/_nostr"
	// maxDeviceName is the longest device name an announcement carries.
	maxDeviceName = 128
)

// groupNameRE is the rule for group names: they name a folder of the
// data directory, a /status key and a metric label.
var groupNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// p2pConfig is the [p2p] table: the relay's libp2p host, one for the
// whole relay (one peer id), shared by the groups of every database.
type p2pConfig struct {
	// Listen are libp2p multiaddrs; empty: defaultP2PListen.
	Listen []string `toml:"listen"`
	// IdentityFile keeps the host's private key; empty: p2p-identity.key
	// in the data directory.
	IdentityFile string `toml:"identity_file"`
	// CircuitRelay makes the host a circuit relay (v2) for peers that
	// cannot reach each other directly; absent: true.
	CircuitRelay *bool `toml:"circuit_relay"`
	// AnnounceAddrs are addresses announced besides the listening ones
	// (a public address behind port forwarding).
	AnnounceAddrs []string `toml:"announce_addrs"`
}

// nostrConfig is the [nostr] table: the Nostr relay the relay serves at
// /_nostr for the groups' discovery. Zero limits are nostrrelay's
// defaults.
type nostrConfig struct {
	// Enabled serves /_nostr; absent: on when a database has a
	// [[databases.p2p]] group or a [[databases.livesync_p2p]] room
	// signalling on it.
	Enabled          *bool `toml:"enabled"`
	MaxEvents        int   `toml:"max_events"`
	MaxEventBytes    int   `toml:"max_event_bytes"`
	EventsPerMinute  int   `toml:"events_per_minute"`
	MaxSubscriptions int   `toml:"max_subscriptions"`
	MaxConnections   int   `toml:"max_connections"`
	// ForwardEphemeral also carries Nostr's ephemeral events (kinds
	// 20000-29999) to live subscribers without storing them: the
	// signalling of LiveSync's own P2P mode (Trystero), so the plugin's
	// devices can use /_nostr as their P2P relay. Absent: on when a
	// [[databases.livesync_p2p]] room signals on /_nostr.
	ForwardEphemeral *bool `toml:"forward_ephemeral"`
}

// p2pGroupConfig is one [[databases.p2p]] table: a sync group the relay
// joins as an always-on peer serving the database.
type p2pGroupConfig struct {
	Group          string         `toml:"group"`
	PassphraseFile string         `toml:"passphrase_file"`
	PassphraseEnv  string         `toml:"passphrase_env"`
	NostrRelays    []string       `toml:"nostr_relays"`
	Device         string         `toml:"device"`
	Approved       []approvedPeer `toml:"approved"`
}

// approvedPeer is one entry of approved: a peer id and its device name.
type approvedPeer struct {
	Peer   string `toml:"peer"`
	Device string `toml:"device"`
}

// hasP2PGroups reports whether any database joins a group.
func (c *fileConfig) hasP2PGroups() bool {
	for _, d := range c.Databases {
		if len(d.P2P) > 0 {
			return true
		}
	}
	return false
}

// nostrEnabled is whether /_nostr is served.
func (c *fileConfig) nostrEnabled() bool {
	if c.Nostr.Enabled != nil {
		return *c.Nostr.Enabled
	}
	return c.hasP2PGroups() || c.lsp2pUsesSelf()
}

// validateP2P checks [p2p], [nostr] and every [[databases.p2p]]; bad
// reports each problem.
func (c *fileConfig) validateP2P(bad func(string, ...any)) {
	for _, a := range c.P2P.Listen {
		if _, err := ma.NewMultiaddr(a); err != nil {
			bad("p2p.listen %q: not a multiaddr (e.g. /ip4/0.0.0.0/tcp/4001 or /ip4/0.0.0.0/udp/4001/quic-v1): %v", a, err)
		}
	}
	for _, a := range c.P2P.AnnounceAddrs {
		if _, err := ma.NewMultiaddr(a); err != nil {
			bad("p2p.announce_addrs %q: not a multiaddr (e.g. /ip4/203.0.113.7/tcp/4001): %v", a, err)
		}
	}
	n := c.Nostr
	for _, k := range []struct {
		key string
		v   int
	}{{"max_events", n.MaxEvents}, {"max_event_bytes", n.MaxEventBytes}, {"events_per_minute", n.EventsPerMinute},
		{"max_subscriptions", n.MaxSubscriptions}, {"max_connections", n.MaxConnections}} {
		if k.v < 0 {
			bad("nostr.%s is negative: give 0 for the default or a positive limit", k.key)
		}
	}
	owner := map[string]string{} // peer id -> "db/group" approving it
	for _, d := range c.Databases {
		names := map[string]bool{}
		for i, g := range d.P2P {
			where := fmt.Sprintf("databases %q: p2p[%d]", d.Name, i)
			if !groupNameRE.MatchString(g.Group) {
				bad("%s: group %q: want 1 to 64 letters, digits, '.', '_' or '-' (the group's name, as the other devices give it)", where, g.Group)
			} else {
				where = fmt.Sprintf("databases %q: p2p group %q", d.Name, g.Group)
				if names[g.Group] {
					bad("%s is listed twice", where)
				}
				names[g.Group] = true
			}
			c.validateGroup(g, where, d.Name+"/"+g.Group, owner, bad)
		}
	}
}

// validateGroup checks one [[databases.p2p]] table. owner records which
// group approves each peer id: the relay tells the groups' streams apart
// by the peer that opens them, so one peer is approved in one group.
func (c *fileConfig) validateGroup(g p2pGroupConfig, where, key string, owner map[string]string, bad func(string, ...any)) {
	switch {
	case g.PassphraseFile == "" && g.PassphraseEnv == "":
		bad("%s: give the group's discovery passphrase with passphrase_file or passphrase_env", where)
	case g.PassphraseFile != "" && g.PassphraseEnv != "":
		bad("%s: give passphrase_file or passphrase_env, not both", where)
	}
	if len(g.Device) > maxDeviceName {
		bad("%s: device is longer than %d bytes", where, maxDeviceName)
	}
	relays := g.NostrRelays
	if len(relays) == 0 {
		if !c.nostrEnabled() {
			bad("%s: nostr_relays is empty and [nostr] enabled = false: list the Nostr relays (ws:// or wss:// URLs) the group announces on", where)
		}
		relays = []string{selfNostr} // the default
	}
	for _, u := range relays {
		if u == selfNostr {
			if !c.nostrEnabled() {
				bad("%s: nostr_relays lists %q but [nostr] enabled = false", where, selfNostr)
			}
			if c.TLS.on() {
				bad("%s: nostr_relays: %q connects over loopback, which the TLS certificate does not name: list the relay's public wss:// URL (e.g. wss://relay.example.com:5984%s) instead", where, selfNostr, nostrPath)
			}
			continue
		}
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "ws" && pu.Scheme != "wss") || pu.Host == "" {
			bad("%s: nostr_relays %q: want a ws:// or wss:// URL, or %q for this relay's own %s", where, u, selfNostr, nostrPath)
		}
	}
	seen := map[string]bool{}
	for j, a := range g.Approved {
		id, err := parsePeerID(a.Peer)
		if err != nil {
			bad("%s: approved[%d]: peer %q is not a libp2p peer id (12D3Koo…, as `livesync p2p id` prints it)", where, j, a.Peer)
			continue
		}
		if len(a.Device) > maxDeviceName {
			bad("%s: approved[%d]: device is longer than %d bytes", where, j, maxDeviceName)
		}
		switch k := id.String(); {
		case seen[k]:
			bad("%s: approved: peer %s is listed twice", where, k)
		case owner[k] != "" && owner[k] != key:
			bad("%s: approved: peer %s is approved in group %s too; a peer can be approved in one group of the relay (a device's replica has its own peer id per vault)", where, k, owner[k])
		}
		seen[id.String()] = true
		owner[id.String()] = key
	}
}

// parsePeerID reads a libp2p peer id, refusing one whose embedded
// public key does not parse.
func parsePeerID(s string) (peer.ID, error) {
	id, err := peer.Decode(s)
	if err != nil {
		return "", err
	}
	if _, err := id.ExtractPublicKey(); err != nil && !errors.Is(err, peer.ErrNoPublicKey) {
		return "", fmt.Errorf("peer id %q: %w", s, err)
	}
	return id, nil
}

// p2pSettings are the peer-to-peer settings with the secrets read.
type p2pSettings struct {
	listen        []string
	identityPath  string // "" until start: the data directory's p2p-identity.key
	circuitRelay  bool
	announceAddrs []string
	nostr         bool
	nostrLimits   nostrrelay.Config
	groups        []p2pGroupSpec
	// livesync are the LiveSync P2P rooms (lsp2p_config.go).
	livesync []lsp2pSpec
}

// p2pGroupSpec is one group to join. passphrase is secret: never logged
// or shown.
type p2pGroupSpec struct {
	db, group  string
	passphrase string
	relays     []string // may hold selfNostr
	device     string
	approved   []approvedSpec
}

type approvedSpec struct {
	id     peer.ID
	device string
}

// resolveP2P reads the groups' passphrases; the configuration was
// validated.
func resolveP2P(fc *fileConfig, getenv func(string) string) (p2pSettings, error) {
	s := p2pSettings{
		listen: fc.P2P.Listen, circuitRelay: fc.P2P.CircuitRelay == nil || *fc.P2P.CircuitRelay,
		announceAddrs: fc.P2P.AnnounceAddrs, nostr: fc.nostrEnabled(),
		nostrLimits: nostrrelay.Config{MaxEvents: fc.Nostr.MaxEvents, MaxEventSize: fc.Nostr.MaxEventBytes,
			EventsPerMinute: fc.Nostr.EventsPerMinute, MaxSubscriptions: fc.Nostr.MaxSubscriptions, MaxConnections: fc.Nostr.MaxConnections,
			ForwardEphemeral: fc.forwardEphemeral()},
	}
	if len(s.listen) == 0 {
		s.listen = defaultP2PListen
	}
	if fc.P2P.IdentityFile != "" {
		s.identityPath = fc.resolvePath(fc.P2P.IdentityFile)
	}
	var err error
	if s.livesync, err = resolveLiveSyncP2P(fc, getenv); err != nil {
		return p2pSettings{}, err
	}
	for _, d := range fc.Databases {
		for _, g := range d.P2P {
			pass, err := secretFrom(fc.resolvePath(g.PassphraseFile), g.PassphraseEnv, getenv, "group passphrase")
			if err != nil {
				return p2pSettings{}, usageError{fmt.Sprintf("database %q: p2p group %q: %v", d.Name, g.Group, err)}
			}
			gs := p2pGroupSpec{db: d.Name, group: g.Group, passphrase: pass, relays: g.NostrRelays, device: g.Device}
			if len(gs.relays) == 0 {
				gs.relays = []string{selfNostr}
			}
			if gs.device == "" {
				gs.device = defaultP2PDevice
			}
			for _, a := range g.Approved {
				id, err := parsePeerID(a.Peer)
				if err != nil {
					return p2pSettings{}, usageError{fmt.Sprintf("database %q: p2p group %q: peer %q: %v", d.Name, g.Group, a.Peer, err)}
				}
				gs.approved = append(gs.approved, approvedSpec{id: id, device: a.Device})
			}
			s.groups = append(s.groups, gs)
		}
	}
	return s, nil
}

// bookPath is where a group's peer book lives in the data directory.
func bookPath(dataDir, db, group string) string {
	return filepath.Join(dataDir, "p2p", db, group, p2p.PeerBookFileName)
}
