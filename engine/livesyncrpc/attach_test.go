package livesyncrpc

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/rpcroom"
	"github.com/livesync-go/livesync-go/engine/store"
)

// memRoom is a Trystero room in memory: ports that are connected
// deliver each other's actions at once, in the sender's goroutine.
type memRoom struct {
	mu    sync.Mutex
	ports map[string]*memPort
	links map[[2]string]bool
}

type memPort struct {
	room    *memRoom
	id      string
	mu      sync.Mutex
	actions map[string]func(peer string, body []byte)
	joins   []func(peer string)
	leaves  []func(peer string)
	got     []memMsg // messages that arrived for actions without a handler
}

type memMsg struct{ from, action, body string }

var _ RoomPort = (*memPort)(nil)

func (r *memRoom) port(id string) *memPort {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ports == nil {
		r.ports, r.links = map[string]*memPort{}, map[[2]string]bool{}
	}
	p := &memPort{room: r, id: id, actions: map[string]func(string, []byte){}}
	r.ports[id] = p
	return p
}

// connect makes a and b active peers of each other, as a passed
// handshake does.
func (r *memRoom) connect(a, b *memPort) {
	r.mu.Lock()
	r.links[[2]string{a.id, b.id}], r.links[[2]string{b.id, a.id}] = true, true
	r.mu.Unlock()
	for _, fn := range a.joinFns() {
		fn(b.id)
	}
	for _, fn := range b.joinFns() {
		fn(a.id)
	}
}

// disconnect ends the connection of a and b.
func (r *memRoom) disconnect(a, b *memPort) {
	r.mu.Lock()
	delete(r.links, [2]string{a.id, b.id})
	delete(r.links, [2]string{b.id, a.id})
	r.mu.Unlock()
	for _, fn := range a.leaveFns() {
		fn(b.id)
	}
	for _, fn := range b.leaveFns() {
		fn(a.id)
	}
}

func (p *memPort) SelfID() string { return p.id }

func (p *memPort) Send(ctx context.Context, peer, action string, body []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.room.mu.Lock()
	to, linked := p.room.ports[peer], p.room.links[[2]string{p.id, peer}]
	p.room.mu.Unlock()
	if !linked {
		return errors.New("memroom: peer is not connected")
	}
	to.deliver(p.id, action, body)
	return nil
}

func (p *memPort) deliver(from, action string, body []byte) {
	p.mu.Lock()
	fn := p.actions[action]
	if fn == nil {
		p.got = append(p.got, memMsg{from, action, string(body)})
	}
	p.mu.Unlock()
	if fn != nil {
		fn(from, slices.Clone(body))
	}
}

func (p *memPort) OnAction(action string, fn func(peer string, body []byte)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.actions[action] = fn
}

func (p *memPort) OnPeerJoin(fn func(peer string)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.joins = append(p.joins, fn)
}

func (p *memPort) OnPeerLeave(fn func(peer string)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.leaves = append(p.leaves, fn)
}

func (p *memPort) joinFns() []func(string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.joins)
}

func (p *memPort) leaveFns() []func(string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.leaves)
}

// received returns the messages on action that arrived unhandled.
func (p *memPort) received(action string) []memMsg {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []memMsg
	for _, m := range p.got {
		if m.action == action {
			out = append(out, m)
		}
	}
	return out
}

// attachNode attaches a Peer over an empty memory store to port; the
// caller closes it.
func attachNode(t *testing.T, port *memPort, name string) (*Hosted, store.Store) {
	t.Helper()
	st := mustMemory(t)
	h, err := Attach(port, Config{DB: st, DBName: DBName("vault-" + name), DeviceName: name,
		Tweaks: negotiate.ShouldMatchTemplate(), Passphrase: "pw", AutoAccept: "~.*"}, rpcroom.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return h, st
}

func knownIDs(h *Hosted) []string {
	var ids []string
	for _, ad := range h.Known() {
		ids = append(ids, ad.PeerID)
	}
	slices.Sort(ids)
	return ids
}

func TestAttachExchangesAdvertisements(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var room memRoom
		pa, pb := room.port("peer-a"), room.port("peer-b")
		a, _ := attachNode(t, pa, "alpha")
		b, bst := attachNode(t, pb, "beta")
		defer a.Close()
		defer b.Close()
		if got := a.Advertisement(); got != (Advertisement{PeerID: "peer-a", Name: "alpha", Platform: Platform}) {
			t.Fatalf("advertisement %+v: SelfID must default to the port's", got)
		}
		room.connect(pa, pb)
		synctest.Wait()
		if got := a.Known(); len(got) != 1 || got[0] != (Advertisement{PeerID: "peer-b", Name: "beta", Platform: Platform}) {
			t.Fatalf("a knows %+v", got)
		}
		if got := b.Known(); len(got) != 1 || got[0] != (Advertisement{PeerID: "peer-a", Name: "alpha", Platform: Platform}) {
			t.Fatalf("b knows %+v", got)
		}
		// rpc2 runs over the port: a pulls b's document.
		put(t, bst, "note.md", `"type":"plain","children":[]`)
		res, err := a.Pull(context.Background(), "peer-b", PullOptions{})
		if err != nil || res.Docs != 1 {
			t.Fatalf("pull over the port: %+v, %v", res, err)
		}
		room.disconnect(pa, pb)
		if len(a.Known()) != 0 || len(b.Known()) != 0 {
			t.Fatalf("advertisements kept after the peers left: %v, %v", knownIDs(a), knownIDs(b))
		}
	})
}

// Advertisements are recorded only under their sender's id: a peer
// cannot speak for another, nor for the receiver; malformed ones are
// ignored.
func TestAttachRecordsOnlyTheSender(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var room memRoom
		pa, pc := room.port("peer-a"), room.port("peer-c")
		a, _ := attachNode(t, pa, "alpha")
		defer a.Close()
		room.connect(pa, pc)
		synctest.Wait()
		// The joining peer got a's advertisement on "ad".
		ads := pc.received(ActionAd)
		if len(ads) != 1 || ads[0].from != "peer-a" {
			t.Fatalf("c received %+v, want a's advertisement", ads)
		}
		if ad, err := DecodeAdvertisement([]byte(ads[0].body)); err != nil || ad.PeerID != "peer-a" || ad.Name != "alpha" {
			t.Fatalf("advertisement %s: %v", ads[0].body, err)
		}
		send := func(body string) {
			t.Helper()
			if err := pc.Send(context.Background(), "peer-a", ActionAd, []byte(body)); err != nil {
				t.Fatal(err)
			}
		}
		send(`{"peerId":"peer-x","name":"forged","platform":"server"}`)
		send(`{"peerId":"peer-a","name":"alpha-again","platform":"server"}`)
		send(`not json`)
		send(`[1,2]`)
		if got := a.Known(); len(got) != 0 {
			t.Fatalf("a recorded %+v from a peer speaking for others", got)
		}
		send(`{"peerId":"peer-c","name":"gamma","platform":"desktop"}`)
		if got := a.Known(); len(got) != 1 || got[0] != (Advertisement{PeerID: "peer-c", Name: "gamma", Platform: "desktop"}) {
			t.Fatalf("a knows %+v", got)
		}
		// A later advertisement of the sender replaces its earlier one.
		send(`{"peerId":"peer-c","name":"gamma-2","platform":"desktop"}`)
		if got := a.Known(); len(got) != 1 || got[0].Name != "gamma-2" {
			t.Fatalf("a knows %+v", got)
		}
	})
}

// Close detaches: no advertisement to peers that join later, no answer
// to requests, and the Peer's own calls fail.
func TestAttachClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var room memRoom
		pa, pb, pd := room.port("peer-a"), room.port("peer-b"), room.port("peer-d")
		a, _ := attachNode(t, pa, "alpha")
		b, _ := attachNode(t, pb, "beta")
		defer b.Close()
		room.connect(pa, pb)
		synctest.Wait()
		if len(a.Known()) != 1 || len(b.Known()) != 1 {
			t.Fatalf("before Close: a knows %v, b knows %v", knownIDs(a), knownIDs(b))
		}
		ctx := context.Background()
		if _, err := b.RPC.Call(ctx, "peer-a", MethodInfo); err != nil {
			t.Fatalf("db.info before Close: %v", err)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if err := a.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		room.connect(pa, pd)
		synctest.Wait()
		if got := pd.received(ActionAd); len(got) != 0 {
			t.Fatalf("a closed peer advertised itself: %+v", got)
		}
		if err := a.Advertise("peer-b"); err == nil {
			t.Fatal("Advertise after Close succeeded")
		}
		start := time.Now()
		_, err := b.RPC.CallTimeout(ctx, "peer-a", MethodInfo, 3*time.Second)
		var re *rpcroom.Error
		if !errors.As(err, &re) || re.Code != rpcroom.CodeTimeout || time.Since(start) != 3*time.Second {
			t.Fatalf("db.info to a closed peer: %v after %s, want a timeout", err, time.Since(start))
		}
		if _, err := a.Pull(ctx, "peer-b", PullOptions{}); err == nil {
			t.Fatal("Pull after Close succeeded")
		}
		var info json.RawMessage
		if info, err = a.RPC.Call(ctx, "peer-b", MethodInfo); err == nil {
			t.Fatalf("a closed Room called db.info: %s", info)
		}
	})
}

func TestAttachNeedsRoomAndConfig(t *testing.T) {
	if _, err := Attach(nil, Config{}, rpcroom.Config{}); err == nil {
		t.Fatal("Attach without a room succeeded")
	}
	var room memRoom
	if _, err := Attach(room.port("p"), Config{DBName: "x"}, rpcroom.Config{}); err == nil {
		t.Fatal("Attach without a database succeeded")
	}
}
