package trysteronet

import (
	"context"

	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
	"github.com/livesync-go/livesync-go/engine/rpcroom"
)

// ActionRPC is the action LiveSync's RpcRoom speaks on.
const ActionRPC = livesyncrpc.ActionRPC

// A Room is the room a LiveSync peer attaches to (livesyncrpc.Attach).
var _ livesyncrpc.RoomPort = (*Room)(nil)

// RPCTransport returns the rpcroom.Transport that sends each wire
// message as a JSON message on ActionRPC.
func (r *Room) RPCTransport() rpcroom.Transport { return rpcTransport{r} }

type rpcTransport struct{ r *Room }

func (t rpcTransport) Send(ctx context.Context, peer string, msg []byte) error {
	return t.r.Send(ctx, peer, ActionRPC, msg)
}

// AttachRPC makes rpc run over the room: messages on ActionRPC go to
// rpc.Receive, and peer arrivals and departures to PeerJoined and
// PeerLeft. Call it before Start; rpc's Config.Transport should be
// r.RPCTransport().
func (r *Room) AttachRPC(rpc *rpcroom.Room) {
	r.OnAction(ActionRPC, rpc.Receive)
	r.OnPeerJoin(rpc.PeerJoined)
	r.OnPeerLeave(rpc.PeerLeft)
}
