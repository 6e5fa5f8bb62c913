package livesyncrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/rpcroom"
	"github.com/livesync-go/livesync-go/engine/store"
)

// network connects Rooms in memory: a message is handed to the
// addressee's Receive at once, and logged.
type network struct {
	mu    sync.Mutex
	rooms map[string]*rpcroom.Room
	log   []sentMsg
}

type sentMsg struct{ from, to, msg string }

type endpoint struct {
	n    *network
	self string
}

func (e endpoint) Send(ctx context.Context, peer string, msg []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.n.mu.Lock()
	e.n.log = append(e.n.log, sentMsg{e.self, peer, string(msg)})
	r := e.n.rooms[peer]
	e.n.mu.Unlock()
	if r == nil {
		return errors.New("no such peer")
	}
	r.Receive(e.self, msg)
	return nil
}

// requests returns the methods from sent to to, in order.
func (n *network) requests(from, to string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, s := range n.log {
		if s.from != from || s.to != to {
			continue
		}
		var w struct{ Payload string }
		var env struct{ Kind, Method string }
		if json.Unmarshal([]byte(s.msg), &w) == nil && json.Unmarshal([]byte(w.Payload), &env) == nil && env.Kind == "request" {
			out = append(out, env.Method)
		}
	}
	return out
}

// sentFrom counts the messages from one peer to another.
func (n *network) sentFrom(from, to string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, s := range n.log {
		if s.from == from && s.to == to {
			c++
		}
	}
	return c
}

type node struct {
	*Peer
	id   string
	st   store.Store
	room *rpcroom.Room
}

// newNode makes a peer over an empty memory store, with the vault's
// default tweaks and passphrase "pw", accepting every device name.
func newNode(t testing.TB, n *network, id string, edit func(*Config)) *node {
	t.Helper()
	st, err := store.NewMemory(store.Options{Name: id})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{SelfID: id, DB: st, DBName: DBName("vault-" + id), DeviceName: "device-" + id,
		Tweaks: negotiate.ShouldMatchTemplate(), Passphrase: "pw", AutoAccept: "~.*"}
	if edit != nil {
		edit(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	room, err := rpcroom.New(rpcroom.Config{Transport: endpoint{n, id}, CanAccept: p.CanAccept})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Serve(room); err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	if n.rooms == nil {
		n.rooms = map[string]*rpcroom.Room{}
	}
	n.rooms[id] = room
	n.mu.Unlock()
	t.Cleanup(func() { room.Close(); st.Close() })
	return &node{p, id, st, room}
}

// meet exchanges the advertisements of a and b.
func meet(a, b *node) {
	a.OnAdvertisement(b.id, b.Advertisement())
	b.OnAdvertisement(a.id, a.Advertisement())
}

func put(t testing.TB, st store.Store, id, body string) string {
	t.Helper()
	rev, err := st.Put(context.Background(), json.RawMessage(fmt.Sprintf(`{"_id":%q,%s}`, id, body)))
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// leaves returns every document's id and leaf revisions.
func leaves(t *testing.T, st store.Store) map[string][]string {
	t.Helper()
	page, err := st.Changes(context.Background(), engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, c := range page.Results {
		revs := slices.Clone(c.Revs)
		slices.Sort(revs)
		out[c.ID] = revs
	}
	return out
}

func sameLeaves(t *testing.T, a, b store.Store) {
	t.Helper()
	la, lb := leaves(t, a), leaves(t, b)
	if len(la) != len(lb) {
		t.Fatalf("%d documents vs %d", len(la), len(lb))
	}
	for id, revs := range la {
		if !slices.Equal(revs, lb[id]) {
			t.Fatalf("%s: leaves %v vs %v", id, revs, lb[id])
		}
	}
}

func TestPullBothWaysConverges(t *testing.T) {
	ctx := context.Background()
	n := &network{}
	a, b := newNode(t, n, "aaaa", nil), newNode(t, n, "bbbb", nil)
	meet(a, b)
	for i := range 70 {
		put(t, a.st, fmt.Sprintf("a/%03d.md", i), `"type":"plain","children":[]`)
	}
	for i := range 10 {
		put(t, b.st, fmt.Sprintf("b/%03d.md", i), `"type":"plain","children":[]`)
	}
	if err := a.st.PutChunks(ctx, []engine.Chunk{{ID: "h:abc", Data: "hello"}}); err != nil {
		t.Fatal(err)
	}
	// A conflict: both sides will edit a shared document.
	put(t, a.st, "shared.md", `"v":1`)
	if _, err := b.Pull(ctx, "aaaa", PullOptions{}); err != nil {
		t.Fatal(err)
	}
	put(t, a.st, "a/000.md", `"_rev":"`+leaves(t, a.st)["a/000.md"][0]+`","v":2`)
	put(t, a.st, "shared.md", `"_rev":"`+leaves(t, a.st)["shared.md"][0]+`","v":"a"`)
	put(t, b.st, "shared.md", `"_rev":"`+leaves(t, b.st)["shared.md"][0]+`","v":"b"`)
	var batches []ProgressInfo
	res, err := b.Pull(ctx, "aaaa", PullOptions{OnBatch: func(_ context.Context, _ []json.RawMessage, info ProgressInfo) {
		batches = append(batches, info)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Docs != 2 || len(batches) != 1 {
		t.Fatalf("second pull wrote %d docs in %v, want a/000.md and shared.md", res.Docs, batches)
	}
	if _, err := a.Pull(ctx, "bbbb", PullOptions{}); err != nil {
		t.Fatal(err)
	}
	sameLeaves(t, a.st, b.st)
	if got := leaves(t, a.st)["shared.md"]; len(got) != 2 {
		t.Fatalf("shared.md leaves %v, want both edits as a conflict", got)
	}
	if got := len(leaves(t, a.st)); got != 82 {
		t.Fatalf("%d documents, want 82", got)
	}
	// The first pull read 72 changes in pages of 33 and ended on an empty page.
	changes := 0
	for _, m := range n.requests("bbbb", "aaaa") {
		if m == MethodChanges {
			changes++
		}
	}
	if changes != 4+2 {
		t.Fatalf("%d db.changes calls, want 4 for the first pull and 2 for the second", changes)
	}
}

func TestCheckpointResume(t *testing.T) {
	ctx := context.Background()
	n := &network{}
	a, b := newNode(t, n, "aaaa", nil), newNode(t, n, "bbbb", nil)
	meet(a, b)
	for i := range 40 {
		put(t, a.st, fmt.Sprintf("d%02d", i), `"v":1`)
	}
	res, err := b.Pull(ctx, "aaaa", PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Docs != 40 || res.Batches != 2 || string(res.Since) != "40" {
		t.Fatalf("first pull %+v", res)
	}
	// The mark lives on the source, the checkpoint on the target.
	markID := "replication-checkpoint-mark-" + DBName("vault-bbbb") + "-" + DBName("vault-aaaa")
	raw, err := a.st.GetLocal(ctx, markID)
	if err != nil {
		t.Fatal(err)
	}
	var mark struct{ ID, Rev, Mark string }
	_ = json.Unmarshal(raw, &struct {
		ID   *string `json:"_id"`
		Rev  *string `json:"_rev"`
		Mark *string `json:"mark"`
	}{&mark.ID, &mark.Rev, &mark.Mark})
	if mark.ID != "_local/"+markID || mark.Rev != "0-1" || mark.Mark != res.Mark || mark.Mark == "" {
		t.Fatalf("mark document %s", raw)
	}
	cp, err := b.st.GetLocal(ctx, "replication-checkpoint-"+DBName("vault-bbbb")+"-"+res.Mark)
	if err != nil || !strings.Contains(string(cp), `"since":40`) {
		t.Fatalf("checkpoint %s, %v", cp, err)
	}
	for i := range 3 {
		put(t, a.st, fmt.Sprintf("e%02d", i), `"v":1`)
	}
	res2, err := b.Pull(ctx, "aaaa", PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res2.Mark != res.Mark || res2.Docs != 3 || res2.Batches != 1 {
		t.Fatalf("resumed pull %+v", res2)
	}
	// The resumed pull asked for changes since the checkpoint only.
	var sinces []string
	n.mu.Lock()
	for _, s := range n.log {
		if s.from == "bbbb" && strings.Contains(s.msg, `db.changes`) {
			i := strings.Index(s.msg, `since`)
			sinces = append(sinces, s.msg[i:i+12])
		}
	}
	n.mu.Unlock()
	if got := sinces[len(sinces)-2]; !strings.Contains(got, `:40`) {
		t.Fatalf("resumed pull started at %q", got)
	}
	// Rewinding makes a new mark and starts over; nothing is missing.
	res3, err := b.Pull(ctx, "aaaa", PullOptions{Rewind: true})
	if err != nil {
		t.Fatal(err)
	}
	if res3.Docs != 0 || string(res3.Since) != "43" {
		t.Fatalf("rewound pull %+v", res3)
	}
}

func mustMemory(t testing.TB) store.Store {
	t.Helper()
	st, err := store.NewMemory(store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// An interrupted pull resumes after its last written batch.
func TestInterruptedPullResumes(t *testing.T) {
	n := &network{}
	a, b := newNode(t, n, "aaaa", nil), newNode(t, n, "bbbb", nil)
	meet(a, b)
	for i := range 70 {
		put(t, a.st, fmt.Sprintf("d%02d", i), `"v":1`)
	}
	ctx, cancel := context.WithCancel(context.Background())
	_, err := b.Pull(ctx, "aaaa", PullOptions{OnBatch: func(context.Context, []json.RawMessage, ProgressInfo) { cancel() }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted pull: %v", err)
	}
	if got := len(leaves(t, b.st)); got != 33 {
		t.Fatalf("%d documents after one batch", got)
	}
	before := len(n.requests("bbbb", "aaaa"))
	res, err := b.Pull(context.Background(), "aaaa", PullOptions{})
	if err != nil || res.Docs != 37 || res.Batches != 2 {
		t.Fatalf("resumed pull %+v, %v; want the 37 left in 2 batches", res, err)
	}
	// Pages from the checkpoint: 33 and 4 changes, then the empty one.
	changes := 0
	for _, m := range n.requests("bbbb", "aaaa")[before:] {
		if m == MethodChanges {
			changes++
		}
	}
	if changes != 3 {
		t.Fatalf("resumed pull read %d pages, want 3", changes)
	}
	sameLeaves(t, a.st, b.st)
}
