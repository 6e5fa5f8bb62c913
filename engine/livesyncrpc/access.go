package livesyncrpc

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Platform is what a headless peer advertises ("server", as the plugin's
// command-line client does).
const Platform = "server"

// PlatformPseudoReplicator is a platform whose peers skip the tweak
// check in both directions.
const PlatformPseudoReplicator = "pseudo-replicator"

// Advertisement is the message of Trystero's action "ad": a peer's id,
// device name and platform (commonlib src/replication/trystero/types.ts).
type Advertisement struct {
	PeerID   string `json:"peerId"`
	Name     string `json:"name"`
	Platform string `json:"platform"`
}

// DecodeAdvertisement parses an "ad" message.
func DecodeAdvertisement(b []byte) (Advertisement, error) {
	var ad Advertisement
	if err := json.Unmarshal(b, &ad); err != nil {
		return Advertisement{}, fmt.Errorf("livesyncrpc: advertisement: %w", err)
	}
	return ad, nil
}

// Decision is an answer to "accept this peer?": Accept, and whether it
// holds for this session and peer id only (Temporary) or is stored under
// the device name.
type Decision struct {
	Accept    bool
	Temporary bool
}

// Decisions stores decisions by device name, the plugin's
// "p2p-device-decisions" store. Decision reports ok false when there is
// none for name.
type Decisions interface {
	Decision(ctx context.Context, name string) (accept, ok bool, err error)
	SetDecision(ctx context.Context, name string, accept bool) error
	DeleteDecision(ctx context.Context, name string) error
}

// MemoryDecisions is a Decisions kept in memory. The zero value is empty
// and ready.
type MemoryDecisions struct {
	mu sync.Mutex
	m  map[string]bool
}

func (d *MemoryDecisions) Decision(_ context.Context, name string) (bool, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.m[name]
	return v, ok, nil
}

func (d *MemoryDecisions) SetDecision(_ context.Context, name string, accept bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[string]bool{}
	}
	d.m[name] = accept
	return nil
}

func (d *MemoryDecisions) DeleteDecision(_ context.Context, name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, name)
	return nil
}

// Patterns is a list of device-name patterns as the plugin's
// P2P_AutoAcceptingPeers, P2P_AutoDenyingPeers and P2P_AutoWatchPeers
// settings hold them: comma-separated, each trimmed; "~re" is the
// regular expression re searched anywhere in the name, anything else
// the expression "^entry$" (the plugin does not escape it); both ignore
// case.
type Patterns []*regexp.Regexp

// ParsePatterns compiles a comma-separated pattern list. Go's regular
// expressions (RE2) stand in for JavaScript's; an entry RE2 does not
// accept is an error.
func ParsePatterns(list string) (Patterns, error) {
	var out Patterns
	for _, e := range strings.Split(list, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		expr := "^" + e + "$"
		if strings.HasPrefix(e, "~") {
			expr = e[1:]
		}
		re, err := regexp.Compile("(?i)" + expr)
		if err != nil {
			return nil, fmt.Errorf("livesyncrpc: peer pattern %q: %w", e, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// Match reports whether any pattern matches name.
func (p Patterns) Match(name string) bool {
	for _, re := range p {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

// access is the plugin's acceptance state (TrysteroReplicatorP2PServer
// isAcceptablePeer): known advertisements by peer id and the session's
// decisions by peer id.
type access struct {
	mu      sync.Mutex
	ads     map[string]Advertisement
	session map[string]bool
	askMu   sync.Mutex
}

// acceptable decides whether peer may be served, in the plugin's order:
// a peer without an advertisement is refused; then the session decision
// by peer id; the stored decision by device name; the auto-accept
// patterns, unless an auto-deny pattern also matches (an auto-accepted
// peer is remembered for the session); a headless peer (no Ask) refuses;
// else Ask decides and its answer is remembered.
func (p *Peer) acceptable(ctx context.Context, peer string) bool {
	a := &p.access
	a.mu.Lock()
	ad, known := a.ads[peer]
	dec, decided := a.session[peer]
	a.mu.Unlock()
	if !known {
		return false
	}
	if decided {
		return dec
	}
	if p.cfg.Decisions != nil {
		if v, ok, err := p.cfg.Decisions.Decision(ctx, ad.Name); err != nil {
			return false
		} else if ok {
			return v
		}
	}
	if p.accept.Match(ad.Name) {
		if p.deny.Match(ad.Name) {
			return false
		}
		a.mu.Lock()
		a.session[peer] = true
		a.mu.Unlock()
		return true
	}
	if p.cfg.Ask == nil {
		return false
	}
	a.askMu.Lock()
	defer a.askMu.Unlock()
	a.mu.Lock()
	dec, decided = a.session[peer]
	a.mu.Unlock()
	if decided {
		return dec
	}
	d, err := p.cfg.Ask(ctx, ad)
	if err != nil {
		return false
	}
	if err := p.Decide(ctx, ad, d); err != nil {
		return false
	}
	return d.Accept
}

// Decide records a decision about the peer ad names, as the plugin's
// makeDecision does: a temporary one for its peer id this session, a
// lasting one under its device name in Config.Decisions.
func (p *Peer) Decide(ctx context.Context, ad Advertisement, d Decision) error {
	a := &p.access
	if d.Temporary {
		a.mu.Lock()
		a.session[ad.PeerID] = d.Accept
		a.mu.Unlock()
		return nil
	}
	a.mu.Lock()
	delete(a.session, ad.PeerID)
	a.mu.Unlock()
	if p.cfg.Decisions == nil {
		return fmt.Errorf("livesyncrpc: no store for lasting decisions")
	}
	return p.cfg.Decisions.SetDecision(ctx, ad.Name, d.Accept)
}

// Revoke forgets the decisions about ad's peer id and device name.
func (p *Peer) Revoke(ctx context.Context, ad Advertisement) error {
	p.access.mu.Lock()
	delete(p.access.session, ad.PeerID)
	p.access.mu.Unlock()
	if p.cfg.Decisions == nil {
		return nil
	}
	return p.cfg.Decisions.DeleteDecision(ctx, ad.Name)
}

// CanAccept is the rpcroom.Config.CanAccept hook: legacy/!reqAuth is
// always served, any other request only from an acceptable peer; the
// Room drops the rest without an answer, so their callers time out.
func (p *Peer) CanAccept(ctx context.Context, peer, method string) bool {
	if method == MethodReqAuth {
		return true
	}
	return p.acceptable(ctx, peer)
}

// Advertisement returns this peer's advertisement, to send on the "ad"
// action to each joining peer and to all when starting.
func (p *Peer) Advertisement() Advertisement {
	return Advertisement{PeerID: p.cfg.SelfID, Name: p.cfg.DeviceName, Platform: p.cfg.Platform}
}

// OnAdvertisement records an advertisement that arrived from peer on the
// "ad" action. As in the plugin, it is kept only when its peerId is the
// sender's and not this peer's own; it reports whether it was kept.
func (p *Peer) OnAdvertisement(peer string, ad Advertisement) bool {
	if peer == p.cfg.SelfID || ad.PeerID == p.cfg.SelfID || ad.PeerID != peer {
		return false
	}
	p.access.mu.Lock()
	p.access.ads[peer] = ad
	p.access.mu.Unlock()
	return true
}

// PeerLeft forgets peer's advertisement (session decisions stay, as in
// the plugin).
func (p *Peer) PeerLeft(peer string) {
	p.access.mu.Lock()
	delete(p.access.ads, peer)
	p.access.mu.Unlock()
}

// Known returns the advertisements of the peers present.
func (p *Peer) Known() []Advertisement {
	p.access.mu.Lock()
	defer p.access.mu.Unlock()
	out := make([]Advertisement, 0, len(p.access.ads))
	for _, ad := range p.access.ads {
		out = append(out, ad)
	}
	return out
}

func (p *Peer) known(peer string) (Advertisement, bool) {
	p.access.mu.Lock()
	defer p.access.mu.Unlock()
	ad, ok := p.access.ads[peer]
	return ad, ok
}
