//go:build !js

package trysteronet

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine/rpcroom"
	"github.com/livesync-go/livesync-go/engine/trystero"
	"github.com/pion/turn/v4"
	"github.com/pion/webrtc/v4"
)

// startTURN serves a TURN server on loopback that relays on loopback and
// accepts user/secret; it counts the authentications it answered.
func startTURN(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var auths atomic.Int32
	const realm = "livesync-go.test"
	srv, err := turn.NewServer(turn.ServerConfig{
		Realm: realm,
		AuthHandler: func(user, realm string, _ net.Addr) ([]byte, bool) {
			if user != "user" {
				return nil, false
			}
			auths.Add(1)
			return turn.GenerateAuthKey(user, realm, "secret"), true
		},
		PacketConnConfigs: []turn.PacketConnConfig{{
			PacketConn:            pc,
			RelayAddressGenerator: &turn.RelayAddressGeneratorStatic{RelayAddress: net.IPv4(127, 0, 0, 1), Address: "127.0.0.1"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return "turn:127.0.0.1:" + strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port), &auths
}

// TestTURNRelayOnly: with RelayOnly the peers gather only relayed
// candidates, so they can meet only through the TURN server and its
// credentials (LiveSync's connection path "relay").
func TestTURNRelayOnly(t *testing.T) {
	relay := startRelay(t)
	turnURL, auths := startTURN(t)
	join := func() *peer {
		r, err := New(Config{
			RoomID: "test-group", Password: trystero.RoomPassword("test"), Relays: []string{relay},
			STUN: []string{}, TURN: []ICEServer{{URLs: []string{turnURL}, Username: "user", Credential: "secret"}},
			RelayOnly: true, LoopbackOnly: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		rpc, _ := rpcroom.New(rpcroom.Config{Transport: r.RPCTransport()})
		r.AttachRPC(rpc)
		if err := r.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close(); rpc.Close() })
		return &peer{room: r, rpc: rpc}
	}
	a, b := join(), join()
	waitFor(t, 15*time.Second, "the peers to connect through TURN", func() bool {
		return len(a.room.Peers()) == 1 && len(b.room.Peers()) == 1
	})
	if auths.Load() == 0 {
		t.Fatal("the TURN server authenticated nobody")
	}
	a.room.mu.Lock()
	c := a.room.active[b.room.SelfID()]
	a.room.mu.Unlock()
	pair, err := c.pc.(pionPeer).SCTP().Transport().ICETransport().GetSelectedCandidatePair()
	if err != nil || pair == nil {
		t.Fatalf("no selected candidate pair: %v", err)
	}
	if pair.Local.Typ != webrtc.ICECandidateTypeRelay {
		t.Fatalf("connected over a %s candidate, want relay", pair.Local.Typ)
	}
	if _, err := New(Config{RoomID: "r", Relays: []string{relay}, RelayOnly: true}); err == nil {
		t.Fatal("RelayOnly without a TURN server was accepted")
	}
}
