package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/adapters/p2p/livesyncp2p"
	"github.com/livesync-go/livesync-go/adapters/p2p/trysteronet"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/decorate"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// The relay in a LiveSync P2P room is an always-on device of the vault:
// it serves the database, in the plaintext local form the plugin's
// devices keep, to the devices it auto-accepts; it pulls from a device
// that asks it to (legacy/reqSync, the plugin's "sync") or announces
// changes (legacy/onProgress: the relay follows every accepted device);
// and, unless broadcast = false, it tells the accepted devices present
// about every change of the database, so a device that watches it pulls
// at once. The database keeps the remote form, so the relay encodes and
// decodes with the vault's codec (decorate.CodecView): an end-to-end
// encrypted vault needs the database's passphrase. The devices' writes
// go through the same hold-back as the CouchDB clients' (held notes are
// served over neither path before their chunks), counted for the user
// "livesync-p2p:GROUP"; the devices present are chunk sources of the
// database's hunt.

// lsp2pUserPrefix names the user a room's writes are held for.
const lsp2pUserPrefix = "livesync-p2p:"

// Timings of a room's upkeep.
const (
	lsp2pOpenTimeout  = 30 * time.Second
	lsp2pHuntInterval = 2 * time.Second  // the hunt's sources follow the devices present
	lsp2pCheckEvery   = 1                // hunt intervals between checks of the vault's codec and settings
	lsp2pMaxRetry     = 60 * time.Second // the longest wait before joining again after a failure
)

// Room states in /status.
const (
	lsp2pStarting = "starting"
	lsp2pJoined   = "joined"
	lsp2pError    = "error"
	lsp2pStopped  = "stopped"
)

// errVaultNeedsPassphrase: the vault's settings say end-to-end encrypted
// and the database has no passphrase.
var errVaultNeedsPassphrase = errors.New("the vault is end-to-end encrypted (its settings say encrypt = true): documents cross in the plugin's plaintext form, so the relay needs the vault passphrase: give the database's passphrase_file or passphrase_env")

// errPlainVault marks an end-to-end encrypted chunk or document met while
// the database has no passphrase.
var errPlainVault = errors.New("an end-to-end encrypted document, but the database has no passphrase: give the database's passphrase_file or passphrase_env")

// lsp2pRuntime runs every [[databases.livesync_p2p]] room.
type lsp2pRuntime struct {
	log    *slog.Logger
	rooms  []*lsp2pRoom
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// lsp2pRoom is one room of a database.
type lsp2pRoom struct {
	spec       lsp2pSpec
	held       *couchapi.HeldDatabase
	passphrase string // the vault's; secret
	relays     []string
	log        *slog.Logger

	docsIn, docsOut, pullsServed, pullsMade, joinErrors, rejoins, unusable atomic.Uint64

	mu      sync.Mutex
	state   string
	lastErr string
	node    *livesyncp2p.Node
	view    vaultView       // the node's codec
	sources map[string]bool // peer ids in the hunt sourcesOf
	// sourcesOf is the hunt sources was built for: a database kept on
	// CouchDB gets a new hunt each time this relay becomes its leader.
	sourcesOf *hunt.Hunt
}

// withLSP2PHunts adds an entry, maybe empty, for every database with a
// LiveSync P2P room to the upstreams by database: such a database gets a
// bridge, and so a hunt whose sources the room's devices join.
func withLSP2PHunts(ups map[string][]upstreamSpec, rooms []lsp2pSpec) map[string][]upstreamSpec {
	out := maps.Clone(ups)
	if out == nil {
		out = map[string][]upstreamSpec{}
	}
	for _, g := range rooms {
		if _, ok := out[g.db]; !ok {
			out[g.db] = nil
		}
	}
	return out
}

// startLiveSyncP2P prepares the rooms (their databases open); they join
// once the HTTP server serves (runLiveSyncP2P), since they may signal on
// the relay's own /_nostr.
func (r *relay) startLiveSyncP2P(ctx context.Context) error {
	rt := &lsp2pRuntime{log: r.log.With("component", "livesync-p2p")}
	r.lsp2p = rt
	for _, sp := range r.s.p2p.livesync {
		held, err := r.dbs.OpenHeld(ctx, sp.db)
		if err != nil {
			return fmt.Errorf("database %q: livesync_p2p group %q: %w", sp.db, sp.group, err)
		}
		rt.rooms = append(rt.rooms, &lsp2pRoom{spec: sp, held: held, passphrase: r.s.passphrases[sp.db], state: lsp2pStarting,
			log: rt.log.With("db", sp.db, "group", sp.group), sources: map[string]bool{}})
	}
	return nil
}

// runLiveSyncP2P joins every room in the background: a room that cannot
// join (or loses its settings) is retried, and /status says why.
func (r *relay) runLiveSyncP2P() {
	rt := r.lsp2p
	if rt == nil || len(rt.rooms) == 0 {
		return
	}
	self := selfNostrURL(r.ln.Addr(), r.s.tlsOn())
	ctx, cancel := context.WithCancel(context.Background())
	rt.cancel = cancel
	for _, rm := range rt.rooms {
		var relays []string
		for _, u := range rm.spec.relays {
			if u == selfNostr {
				u = self
			}
			relays = append(relays, u)
		}
		rm.mu.Lock() // /status reads it: the server serves already
		rm.relays = relays
		rm.mu.Unlock()
		rt.wg.Add(1)
		go func() {
			defer rt.wg.Done()
			rm.run(ctx)
		}()
	}
}

// close leaves every room and waits for them.
func (rt *lsp2pRuntime) close() {
	if rt == nil || rt.cancel == nil {
		return
	}
	rt.cancel()
	rt.wg.Wait()
}

// run joins the room, keeps it joined, and joins again when the vault's
// codec or settings change, until ctx ends.
func (rm *lsp2pRoom) run(ctx context.Context) {
	defer rm.setState(lsp2pStopped, nil)
	delay := time.Second
	for ctx.Err() == nil {
		key, err := rm.open(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			rm.setState(lsp2pError, err)
			rm.log.Warn("LiveSync P2P room: cannot join; retrying", "err", err, "retry_in", delay)
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			delay = min(delay*2, lsp2pMaxRetry)
			continue
		}
		delay = time.Second
		rm.setState(lsp2pJoined, nil)
		rm.keep(ctx, key)
		rm.leave()
		if ctx.Err() == nil {
			rm.rejoins.Add(1)
			rm.log.Info("the vault's codec or settings changed: joining the LiveSync P2P room again with them")
		}
	}
}

// keep follows the devices present into the hunt until ctx ends or the
// vault's codec or settings no longer give key (or say it is encrypted
// while the database has no passphrase).
func (rm *lsp2pRoom) keep(ctx context.Context, key string) {
	t := time.NewTicker(lsp2pHuntInterval)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rm.syncHunt(ctx)
		if n%lsp2pCheckEvery == 0 {
			v, err := rm.vault(ctx)
			if err == nil && v.key != key || errors.Is(err, errVaultNeedsPassphrase) {
				return
			}
		}
	}
}

func (rm *lsp2pRoom) setState(state string, err error) {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	rm.state, rm.lastErr = state, ""
	if err != nil {
		rm.lastErr = err.Error()
	}
}

// vaultView is what the room serves with: the codec, whether the vault
// is unencrypted, its tweak values, and a key that changes with them.
type vaultView struct {
	codec  *livesync.Codec
	plain  bool
	tweaks negotiate.TweakValues
	key    string
}

// vault reads the database's codec and settings. With a passphrase and
// no salt yet, it creates the vault's salt, as a first client would.
func (rm *lsp2pRoom) vault(ctx context.Context) (vaultView, error) {
	preferred, hasPreferred, err := rm.preferredTweaks(ctx)
	if err != nil {
		return vaultView{}, err
	}
	var v vaultView
	if rm.passphrase == "" {
		if enc, ok := preferred.Get("encrypt"); hasPreferred && ok && string(enc) == "true" {
			return vaultView{}, errVaultNeedsPassphrase
		}
		if v.codec, err = livesync.New(livesync.Config{}); err != nil {
			return vaultView{}, err
		}
		v.plain = true
	} else {
		codec, _ := rm.held.Codec()
		if codec == nil {
			if err := rm.ensureSalt(ctx); err != nil {
				return vaultView{}, fmt.Errorf("creating the vault's salt: %w", err)
			}
			if codec, _ = rm.held.Codec(); codec == nil {
				return vaultView{}, errors.New("the vault's codec could not be built from its sync parameters and the passphrase (see the log)")
			}
		}
		v.codec = codec
	}
	v.tweaks = v.codec.Settings().TweakValues()
	if hasPreferred {
		v.tweaks = preferred
	}
	tb, _ := json.Marshal(v.tweaks)
	v.key = fmt.Sprintf("%p|%s", v.codec, tb)
	if v.plain {
		v.key = "plain|" + string(tb)
	}
	return v, nil
}

// preferredTweaks reads the milestone's PREFERRED tweak values (ok false
// without a milestone or that entry).
func (rm *lsp2pRoom) preferredTweaks(ctx context.Context) (negotiate.TweakValues, bool, error) {
	raw, err := store.LiveLocal(ctx, rm.held, negotiate.MilestoneLocalID)
	if err != nil {
		return negotiate.TweakValues{}, false, fmt.Errorf("reading the vault's milestone: %w", err)
	}
	if raw == nil {
		return negotiate.TweakValues{}, false, nil
	}
	m, err := negotiate.ParseMilestone(raw)
	if err != nil {
		return negotiate.TweakValues{}, false, fmt.Errorf("the vault's milestone: %w", err)
	}
	t, ok := m.TweakValues[negotiate.PreferredNode]
	return t, ok, nil
}

// ensureSalt writes sync parameters with a new salt when the database
// has none (the hold-back then builds the vault's codec).
func (rm *lsp2pRoom) ensureSalt(ctx context.Context) error {
	raw, err := store.LiveLocal(ctx, rm.held, negotiate.SyncParametersLocalID)
	if err != nil {
		return err
	}
	rev := "0-1"
	if raw != nil {
		if salt, err := negotiate.SaltOf(raw); err != nil || salt != nil {
			return err // a salt exists; the codec failed for another reason (logged by the hold-back)
		}
		var cur struct {
			Rev string `json:"_rev"`
		}
		if json.Unmarshal(raw, &cur) == nil {
			if n, err := strconv.ParseInt(strings.TrimPrefix(cur.Rev, "0-"), 10, 64); err == nil {
				rev = "0-" + strconv.FormatInt(n+1, 10)
			}
		}
	}
	salt, err := negotiate.NewSalt(nil)
	if err != nil {
		return err
	}
	b, err := json.Marshal(negotiate.NewSyncParameters(salt))
	if err != nil {
		return err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	m["_rev"], _ = json.Marshal(rev)
	doc, _ := json.Marshal(m)
	if err := rm.held.PutLocal(ctx, negotiate.SyncParametersLocalID, doc); err != nil {
		return err
	}
	rm.log.Info("the database had no vault salt: created one (CouchDB clients adopt it at their next handshake)")
	return nil
}

// open joins the room with the vault's current codec and settings and
// returns their key.
func (rm *lsp2pRoom) open(ctx context.Context) (string, error) {
	v, err := rm.vault(ctx)
	if err != nil {
		return "", err
	}
	var plainErr error
	if v.plain {
		plainErr = engine.Permanent(errPlainVault)
	}
	db := lsp2pStore{Store: rm.held, user: lsp2pUserPrefix + rm.spec.group, in: &rm.docsIn, out: &rm.docsOut}
	sp := rm.spec
	stun := sp.stun // nil: the plugin's defaults; empty: none
	var turn []trysteronet.ICEServer
	if len(sp.turnURLs) > 0 {
		turn = []trysteronet.ICEServer{{URLs: sp.turnURLs, Username: sp.turnUser, Credential: sp.turnCred}}
	}
	cfg := livesyncp2p.Config{
		Room: trysteronet.Config{AppID: sp.appID, RoomID: sp.group, Password: sp.roomPassword, Relays: rm.relays,
			STUN: stun, TURN: turn, RelayOnly: sp.relayOnly, LoopbackOnly: sp.loopbackOnly},
		Peer: livesyncrpc.Config{DB: decorate.CodecView(db, v.codec, decorate.CodecOptions{Plain: plainErr}),
			DBName: livesyncrpc.DBName(sp.db), DeviceName: sp.device, Tweaks: v.tweaks, Passphrase: rm.passphrase,
			AutoAccept: sp.autoAccept, AutoDeny: sp.autoDeny, Follow: "~.*",
			OnProgress: rm.onProgress},
		Logger: rm.log,
	}
	octx, cancel := context.WithTimeout(ctx, lsp2pOpenTimeout)
	defer cancel()
	node, err := livesyncp2p.Open(octx, cfg)
	if err != nil {
		return "", fmt.Errorf("joining the room: %w", err)
	}
	node.OnJoinError(func(peer string, err error) {
		rm.joinErrors.Add(1)
		rm.log.Warn("a device could not join the LiveSync P2P room (a wrong room passphrase on either side?)", "peer", peer, "err", err)
	})
	rm.mu.Lock()
	rm.node, rm.view = node, v
	rm.mu.Unlock()
	if sp.broadcast {
		h := node.Hosted()
		go func() {
			// Ends when the node closes.
			if err := h.Broadcast(context.Background()); err != nil && !errors.Is(err, context.Canceled) {
				rm.log.Warn("broadcasting changes to the devices ended", "err", err)
			}
		}()
	}
	rm.log.Info("joined the LiveSync P2P room", "self_id", node.SelfID(), "device_name", sp.device,
		"relays", strings.Join(rm.relays, " "), "broadcast", sp.broadcast)
	return v.key, nil
}

// leave closes the node and takes its devices out of the hunt.
func (rm *lsp2pRoom) leave() {
	rm.mu.Lock()
	node := rm.node
	rm.node = nil
	rm.mu.Unlock()
	rm.dropSources()
	if node != nil {
		if err := node.Close(); err != nil {
			rm.log.Debug("leaving the LiveSync P2P room", "err", err)
		}
	}
}

// onProgress counts the pulls that end: a device's pull from the relay
// (Sending) and the relay's pull from a device.
func (rm *lsp2pRoom) onProgress(p livesyncrpc.Progress) {
	if p.Info != nil {
		return
	}
	if p.Sending {
		rm.pullsServed.Add(1)
	} else {
		rm.pullsMade.Add(1)
	}
}

// lsp2pStore is the database as the room's devices reach it: writes are
// held for the room's user and counted, reads counted, and the vault's
// own _local documents are not theirs to write.
type lsp2pStore struct {
	store.Store
	user    string
	in, out *atomic.Uint64
}

func (s lsp2pStore) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	res, err := s.Store.BulkDocs(couchapi.WithUser(ctx, s.user), docs)
	if err == nil {
		n := len(docs)
		for _, r := range res {
			if r.Error != "" {
				n--
			}
		}
		s.in.Add(uint64(max(n, 0)))
	}
	return res, err
}

func (s lsp2pStore) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	docs, err := s.Store.BulkGet(ctx, revs)
	s.out.Add(uint64(len(docs)))
	return docs, err
}

// PutLocal writes the devices' replication marks and checkpoints; the
// vault's sync parameters, milestone and node info are refused.
func (s lsp2pStore) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	switch strings.TrimPrefix(id, "_local/") {
	case negotiate.SyncParametersLocalID, negotiate.MilestoneLocalID, negotiate.NodeInfoLocalID:
		return fmt.Errorf("_local/%s is the vault's own document; a P2P device may not write it on the relay: %w", strings.TrimPrefix(id, "_local/"), engine.ErrUnsupported)
	}
	return s.Store.PutLocal(ctx, id, doc)
}

// lsp2pBanner adds the LiveSync P2P rooms to the start banner: what a
// plugin device sets to meet the relay.
func (r *relay) lsp2pBanner(p func(string, ...any)) {
	if r.lsp2p == nil {
		return
	}
	for _, rm := range r.lsp2p.rooms {
		relays := strings.Join(rm.spec.relays, ", ")
		if containsString(rm.spec.relays, selfNostr) {
			relays = strings.ReplaceAll(relays, selfNostr, "ws"+strings.TrimPrefix(r.url, "http")+nostrPath)
		}
		p("LiveSync P2P: database %s, room %q, device name %q: plugin devices set the relay(s) %s,", rm.spec.db, rm.spec.group, rm.spec.device, relays)
		p("    the same group and P2P passphrase; devices named by auto_accept are served")
	}
}
