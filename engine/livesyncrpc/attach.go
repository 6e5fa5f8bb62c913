package livesyncrpc

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/livesync-go/livesync-go/engine/rpcroom"
)

// The Trystero actions LiveSync speaks on: the RPC wire and the
// advertisement.
const (
	ActionRPC = "rpc2"
	ActionAd  = "ad"
)

// adSendTimeout bounds sending one advertisement to a joining peer.
const adSendTimeout = 10 * time.Second

// RoomPort is a joined Trystero room as a Peer needs it: a native room
// (adapters/p2p/trysteronet) or, in the wasm build, one over the host's
// WebRTC. Send sends body, JSON text, as a JSON message on action to an
// active peer. OnAction's handler receives each complete message's text;
// OnPeerJoin's and OnPeerLeave's run when a peer becomes active (its
// password handshake passed) and when it goes. Handlers must return
// quickly.
type RoomPort interface {
	SelfID() string
	Send(ctx context.Context, peer, action string, body []byte) error
	OnAction(action string, fn func(peer string, body []byte))
	OnPeerJoin(fn func(peer string))
	OnPeerLeave(fn func(peer string))
}

// Hosted is a Peer attached to a room: its rpcroom.Room runs on the
// room's "rpc2" action, advertisements cross on "ad".
type Hosted struct {
	*Peer
	RPC  *rpcroom.Room
	port RoomPort
}

// Attach makes a Peer serve on port as the plugin's replicator does:
// cfg.SelfID defaults to port.SelfID(); rc's Transport and CanAccept are
// set here (the rest of rc keeps its meaning). Every peer that joins
// gets this peer's advertisement, and advertisements received on "ad"
// are recorded (Peer.OnAdvertisement). Call Attach before the room
// starts, so that no peer's arrival is missed; Close detaches.
func Attach(port RoomPort, cfg Config, rc rpcroom.Config) (*Hosted, error) {
	if port == nil {
		return nil, errors.New("livesyncrpc: Attach needs a room")
	}
	if cfg.SelfID == "" {
		cfg.SelfID = port.SelfID()
	}
	p, err := New(cfg)
	if err != nil {
		return nil, err
	}
	rc.Transport = portTransport{port}
	rc.CanAccept = p.CanAccept
	room, err := rpcroom.New(rc)
	if err != nil {
		return nil, err
	}
	if err := p.Serve(room); err != nil {
		room.Close()
		return nil, err
	}
	h := &Hosted{Peer: p, RPC: room, port: port}
	port.OnAction(ActionRPC, room.Receive)
	port.OnAction(ActionAd, func(peer string, body []byte) {
		if ad, err := DecodeAdvertisement(body); err == nil {
			p.OnAdvertisement(peer, ad)
		}
	})
	port.OnPeerJoin(func(peer string) {
		room.PeerJoined(peer)
		p.notifyMu.Lock() // Close cancels under it: no Add after its Wait
		defer p.notifyMu.Unlock()
		if p.ctx.Err() != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			_ = h.Advertise(peer)
		}()
	})
	port.OnPeerLeave(func(peer string) {
		room.PeerLeft(peer)
		p.PeerLeft(peer)
	})
	return h, nil
}

// Advertise sends this peer's advertisement to peer.
func (h *Hosted) Advertise(peer string) error {
	body, err := json.Marshal(h.Peer.Advertisement())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(h.Peer.ctx, adSendTimeout)
	defer cancel()
	return h.port.Send(ctx, peer, ActionAd, body)
}

// Close stops the Peer (its pulls and broadcasts) and the rpcroom.Room;
// the room itself belongs to the caller.
func (h *Hosted) Close() error {
	err := h.Peer.Close()
	return errors.Join(err, h.RPC.Close())
}

// portTransport sends rpcroom's wire messages on ActionRPC.
type portTransport struct{ port RoomPort }

func (t portTransport) Send(ctx context.Context, peer string, msg []byte) error {
	return t.port.Send(ctx, peer, ActionRPC, msg)
}
