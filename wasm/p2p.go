//go:build js && wasm && p2p

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall/js"
	"time"

	"github.com/livesync-go/livesync-go/adapters/p2p/trysteronet"
	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
	"github.com/livesync-go/livesync-go/engine/rpcroom"
	"github.com/livesync-go/livesync-go/engine/trystero"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// The vault handle's p2p(options): the replica joins a LiveSync P2P room
// (the plugin's P2P mode: Trystero over Nostr signalling and WebRTC data
// channels) and is served to, and pulls from, the peers there. WebRTC is
// the host's RTCPeerConnection and the relays are reached with its
// WebSocket (host.RTCPeerConnection, host.WebSocket, else the globals).
// Documents cross in the plugin's plaintext local form, which is the
// form the replica keeps; an E2EE vault's passphrase must match the
// peers' (legacy/getTweakSettings compares a hash of it).

func init() {
	handleExtensions = append(handleExtensions, func(h *handle, o js.Value) {
		o.Set("p2p", h.method(h.p2p))
	})
}

// defaultPeerWait is how long sync and pull wait for the peer named to
// be present and advertised.
const defaultPeerWait = 30 * time.Second

// p2pOptions are p2p's options, read from JS before any work.
type p2pOptions struct {
	room                         trysteronet.Config
	device, vault, platform      string
	autoAccept, autoDeny, follow string
	ask                          js.Value
}

// parseP2P reads p2p's options:
//
//	{roomId, passphrase, relays, appId, deviceName, vaultName, platform,
//	 autoAccept, autoDeny, follow, ask, stun, turn: [{urls, username,
//	 credential}], relayOnly, host: {RTCPeerConnection, WebSocket}}
//
// roomId and passphrase are the plugin's P2P_roomID and P2P_passphrase,
// relays its P2P_relays (ws:// or wss:// URLs), appId its P2P_AppID.
func parseP2P(o js.Value) (p2pOptions, error) {
	var po p2pOptions
	if o.Type() != js.TypeObject {
		return po, &optionsError{msg: "p2p needs an options object with roomId and relays"}
	}
	var pass string
	var err error
	for key, dst := range map[string]*string{"roomId": &po.room.RoomID, "passphrase": &pass, "appId": &po.room.AppID,
		"deviceName": &po.device, "vaultName": &po.vault, "platform": &po.platform,
		"autoAccept": &po.autoAccept, "autoDeny": &po.autoDeny, "follow": &po.follow} {
		if *dst, err = str(o, key); err != nil {
			return po, err
		}
	}
	if pass != "" {
		po.room.Password = trystero.RoomPassword(pass)
	}
	if po.room.Relays, err = stringList(o, "relays"); err != nil {
		return po, err
	}
	if stun := o.Get("stun"); !stun.IsUndefined() && !stun.IsNull() {
		if po.room.STUN, err = stringList(o, "stun"); err != nil {
			return po, err
		}
		if po.room.STUN == nil {
			po.room.STUN = []string{}
		}
	}
	if po.room.TURN, err = parseTURN(o.Get("turn")); err != nil {
		return po, err
	}
	if po.room.RelayOnly, err = boolean(o, "relayOnly"); err != nil {
		return po, err
	}
	if host := o.Get("host"); host.Type() == js.TypeObject {
		po.room.Host = trysteronet.Host{RTCPeerConnection: host.Get("RTCPeerConnection"), WebSocket: host.Get("WebSocket")}
	}
	if ask := o.Get("ask"); !ask.IsUndefined() && !ask.IsNull() {
		if ask.Type() != js.TypeFunction {
			return po, &optionsError{msg: "option ask must be a function"}
		}
		po.ask = ask
	}
	if err := po.room.Validate(); err != nil {
		return po, &optionsError{msg: err.Error(), err: err}
	}
	if po.vault == "" {
		po.vault = "livesync-go"
	}
	if po.platform == "" {
		po.platform = livesyncrpc.Platform
	}
	return po, nil
}

// stringList reads an optional array of strings.
func stringList(o js.Value, key string) ([]string, error) {
	v := o.Get(key)
	if v.IsUndefined() || v.IsNull() {
		return nil, nil
	}
	if !js.Global().Get("Array").Call("isArray", v).Bool() {
		return nil, &optionsError{msg: fmt.Sprintf("option %s must be an array of strings", key)}
	}
	out := make([]string, v.Length())
	for i := range out {
		e := v.Index(i)
		if e.Type() != js.TypeString {
			return nil, &optionsError{msg: fmt.Sprintf("option %s must be an array of strings", key)}
		}
		out[i] = e.String()
	}
	return out, nil
}

func parseTURN(v js.Value) ([]trysteronet.ICEServer, error) {
	if v.IsUndefined() || v.IsNull() {
		return nil, nil
	}
	if !js.Global().Get("Array").Call("isArray", v).Bool() {
		return nil, &optionsError{msg: "option turn must be an array of {urls, username, credential}"}
	}
	var out []trysteronet.ICEServer
	for i := range v.Length() {
		e := v.Index(i)
		urls, err := stringList(e, "urls")
		if err == nil && e.Get("urls").Type() == js.TypeString {
			urls = []string{e.Get("urls").String()}
		}
		if err != nil || len(urls) == 0 {
			return nil, &optionsError{msg: "each turn server needs urls"}
		}
		s := trysteronet.ICEServer{URLs: urls}
		if s.Username, err = str(e, "username"); err == nil {
			s.Credential, err = str(e, "credential")
		}
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// p2pPeer is one joined room serving the handle's replica.
type p2pPeer struct {
	h      *handle
	room   *trysteronet.Room
	hosted *livesyncrpc.Hosted
	events *p2pEvents
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
}

// p2p(options) joins the room and resolves to the peer's object.
func (h *handle) p2p(args []js.Value) (func() (any, error), error) {
	po, err := parseP2P(arg(args, 0))
	if err != nil {
		return nil, err
	}
	return func() (any, error) {
		p, err := h.joinP2P(po)
		if err != nil {
			return nil, err
		}
		return p.object(), nil
	}, nil
}

func (h *handle) joinP2P(po p2pOptions) (*p2pPeer, error) {
	tweaks, err := h.v.TweakValues()
	if err != nil {
		return nil, err
	}
	room, err := trysteronet.New(po.room)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(h.ctx)
	p := &p2pPeer{h: h, room: room, events: newP2PEvents(), ctx: ctx, cancel: cancel}
	cfg := livesyncrpc.Config{DB: h.st, DBName: livesyncrpc.DBName(po.vault), DeviceName: po.device, Platform: po.platform,
		Tweaks: tweaks, Passphrase: h.passphrase, AutoAccept: po.autoAccept, AutoDeny: po.autoDeny, Follow: po.follow,
		Decisions: &livesyncrpc.MemoryDecisions{}, OnProgress: p.events.progress}
	if cfg.DeviceName == "" {
		cfg.DeviceName = "livesync-go-wasm"
	}
	if po.ask.Type() == js.TypeFunction {
		cfg.Ask = askFunc(po.ask)
	}
	if p.hosted, err = livesyncrpc.Attach(room, cfg, rpcroom.Config{}); err != nil {
		cancel()
		return nil, &optionsError{msg: err.Error(), err: err}
	}
	room.OnPeerJoin(func(peer string) { p.events.peer("join", peer, nil) })
	room.OnPeerLeave(func(peer string) { p.events.peer("leave", peer, nil) })
	room.OnJoinError(func(peer string, err error) { p.events.peer("error", peer, err) })
	if err := room.Start(ctx); err != nil {
		p.close()
		return nil, err
	}
	if !h.onShutdown(p.close) {
		p.close()
		return nil, vault.ErrClosed
	}
	return p, nil
}

// askFunc asks the host's ask({peerId, name, platform}) about a peer;
// it answers (or resolves to) true or false, or {accept, temporary}.
func askFunc(fn js.Value) func(context.Context, livesyncrpc.Advertisement) (livesyncrpc.Decision, error) {
	return func(ctx context.Context, ad livesyncrpc.Advertisement) (livesyncrpc.Decision, error) {
		v, err := awaitJS(ctx, func() js.Value {
			return fn.Invoke(map[string]any{"peerId": ad.PeerID, "name": ad.Name, "platform": ad.Platform})
		})
		if err != nil {
			return livesyncrpc.Decision{}, err
		}
		switch v.Type() {
		case js.TypeBoolean:
			return livesyncrpc.Decision{Accept: v.Bool(), Temporary: true}, nil
		case js.TypeObject:
			return livesyncrpc.Decision{Accept: v.Get("accept").Truthy(), Temporary: v.Get("temporary").Truthy()}, nil
		}
		return livesyncrpc.Decision{}, errors.New("ask answered neither a boolean nor {accept, temporary}")
	}
}

// awaitJS calls f (which may throw) and waits for its value, or the
// value a Promise it returns settles to.
func awaitJS(ctx context.Context, f func() js.Value) (v js.Value, err error) {
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("the host's function threw: %v", r)
			}
		}()
		v = f()
	}()
	if err != nil || v.Type() != js.TypeObject || v.Get("then").Type() != js.TypeFunction {
		return v, err
	}
	ch := make(chan error, 1)
	var out js.Value
	then := js.FuncOf(func(_ js.Value, a []js.Value) any { out = arg(a, 0); ch <- nil; return nil })
	catch := js.FuncOf(func(_ js.Value, a []js.Value) any {
		ch <- fmt.Errorf("the host's function failed: %v", arg(a, 0))
		return nil
	})
	defer then.Release()
	defer catch.Release()
	v.Call("then", then, catch)
	select {
	case err := <-ch:
		return out, err
	case <-ctx.Done():
		return js.Undefined(), ctx.Err()
	}
}

// close leaves the room; it runs once.
func (p *p2pPeer) close() {
	p.once.Do(func() {
		p.cancel()
		_ = p.hosted.Close()
		_ = p.room.Close()
		p.events.stop()
	})
}

// find returns the advertisement of the peer named by id, else by device
// name (case-insensitive), waiting up to wait for it to be present.
func (p *p2pPeer) find(ctx context.Context, name string, wait time.Duration) (livesyncrpc.Advertisement, error) {
	deadline := time.Now().Add(wait)
	for {
		var byName []livesyncrpc.Advertisement
		for _, ad := range p.hosted.Known() {
			if ad.PeerID == name {
				return ad, nil
			}
			if strings.EqualFold(ad.Name, name) {
				byName = append(byName, ad)
			}
		}
		switch {
		case len(byName) == 1:
			return byName[0], nil
		case len(byName) > 1:
			return livesyncrpc.Advertisement{}, &optionsError{msg: fmt.Sprintf("%d peers are named %q: name one by its id", len(byName), name)}
		case time.Now().After(deadline):
			return livesyncrpc.Advertisement{}, fmt.Errorf("no peer %q in the room after %s: %w", name, wait, livesyncrpc.ErrUnknownPeer)
		}
		select {
		case <-ctx.Done():
			return livesyncrpc.Advertisement{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
