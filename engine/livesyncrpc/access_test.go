package livesyncrpc

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/rpcroom"
)

func TestAcceptanceOrder(t *testing.T) {
	ctx := context.Background()
	ad := Advertisement{PeerID: "peer1", Name: "Laptop-Work", Platform: "desktop"}
	cases := []struct {
		name    string
		cfg     func(*Config)
		prepare func(p *Peer)
		want    bool
	}{
		{"no advertisement", func(c *Config) { c.AutoAccept = "~.*" }, func(p *Peer) { p.PeerLeft("peer1") }, false},
		{"headless without patterns", nil, nil, false},
		{"exact pattern, case-insensitive", func(c *Config) { c.AutoAccept = "other, laptop-work" }, nil, true},
		{"exact pattern is anchored", func(c *Config) { c.AutoAccept = "laptop" }, nil, false},
		{"~ pattern searches", func(c *Config) { c.AutoAccept = "~WORK" }, nil, true},
		{"auto-deny beats auto-accept", func(c *Config) { c.AutoAccept = "~.*"; c.AutoDeny = "~^laptop" }, nil, false},
		{"auto-deny alone does not accept", func(c *Config) { c.AutoDeny = "x" }, nil, false},
		{"stored decision beats auto-deny", func(c *Config) { c.AutoDeny = "~.*" }, func(p *Peer) {
			_ = p.cfg.Decisions.SetDecision(ctx, "Laptop-Work", true)
		}, true},
		{"stored refusal beats auto-accept", func(c *Config) { c.AutoAccept = "~.*" }, func(p *Peer) {
			_ = p.cfg.Decisions.SetDecision(ctx, "Laptop-Work", false)
		}, false},
		{"session decision beats stored decision", nil, func(p *Peer) {
			_ = p.cfg.Decisions.SetDecision(ctx, "Laptop-Work", true)
			_ = p.Decide(ctx, ad, Decision{Accept: false, Temporary: true})
		}, false},
		{"session acceptance beats auto-deny", func(c *Config) { c.AutoDeny = "~.*" }, func(p *Peer) {
			_ = p.Decide(ctx, ad, Decision{Accept: true, Temporary: true})
		}, true},
		{"lasting decision by name covers a new peer id", nil, func(p *Peer) {
			_ = p.Decide(ctx, Advertisement{PeerID: "old", Name: "laptop-work"}, Decision{Accept: true})
			_ = p.Decide(ctx, Advertisement{PeerID: "x", Name: "Laptop-Work"}, Decision{Accept: true})
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{SelfID: "me", DB: nil, DBName: "v", Decisions: &MemoryDecisions{}}
			if c.cfg != nil {
				c.cfg(&cfg)
			}
			cfg.DB = mustMemory(t)
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !p.OnAdvertisement("peer1", ad) {
				t.Fatal("advertisement refused")
			}
			if c.prepare != nil {
				c.prepare(p)
			}
			if got := p.acceptable(ctx, "peer1"); got != c.want {
				t.Fatalf("acceptable = %v, want %v", got, c.want)
			}
			if got := p.CanAccept(ctx, "peer1", MethodInfo); got != c.want {
				t.Fatalf("CanAccept(db.info) = %v, want %v", got, c.want)
			}
			if !p.CanAccept(ctx, "peer1", MethodReqAuth) {
				t.Fatal("legacy/!reqAuth must always be let through")
			}
		})
	}
}

func TestAskRemembered(t *testing.T) {
	ctx := context.Background()
	asked := 0
	p, err := New(Config{SelfID: "me", DB: mustMemory(t), DBName: "v", Decisions: &MemoryDecisions{},
		Ask: func(_ context.Context, ad Advertisement) (Decision, error) {
			asked++
			return Decision{Accept: ad.Name == "good", Temporary: ad.Name == "good"}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	p.OnAdvertisement("p1", Advertisement{PeerID: "p1", Name: "good"})
	p.OnAdvertisement("p2", Advertisement{PeerID: "p2", Name: "bad"})
	for range 2 {
		if !p.acceptable(ctx, "p1") || p.acceptable(ctx, "p2") {
			t.Fatal("wrong decisions")
		}
	}
	if asked != 2 {
		t.Fatalf("asked %d times, want once per peer", asked)
	}
	if v, ok, _ := p.cfg.Decisions.Decision(ctx, "bad"); !ok || v {
		t.Fatal("a lasting refusal is stored by name")
	}
}

func TestAdvertisementRules(t *testing.T) {
	p, err := New(Config{SelfID: "me", DB: mustMemory(t), DBName: "v", DeviceName: "relay"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(p.Advertisement()); string(b) != `{"peerId":"me","name":"relay","platform":"server"}` {
		t.Fatalf("advertisement %s", b)
	}
	if p.OnAdvertisement("x", Advertisement{PeerID: "y"}) || p.OnAdvertisement("me", Advertisement{PeerID: "me"}) ||
		p.OnAdvertisement("x", Advertisement{PeerID: "me"}) {
		t.Fatal("an advertisement not from its own peer, or our own, is kept")
	}
	ad, err := DecodeAdvertisement([]byte(`{"peerId":"x","name":"n","platform":"desktop"}`))
	if err != nil || !p.OnAdvertisement("x", ad) || len(p.Known()) != 1 {
		t.Fatal("a proper advertisement is not kept")
	}
	if _, err := New(Config{SelfID: "me", DB: mustMemory(t), DBName: "v", AutoAccept: "~("}); err == nil {
		t.Fatal("a bad pattern is accepted")
	}
}

// An unaccepted peer's requests get no answer at all: the caller times
// out (after db.info's 30 s); only legacy/!reqAuth is answered, false.
func TestUnacceptedDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		n := &network{}
		a := newNode(t, n, "aaaa", func(c *Config) { c.AutoAccept = "" })
		b := newNode(t, n, "bbbb", nil)
		meet(a, b)
		start := time.Now()
		_, err := b.room.Call(ctx, "aaaa", MethodInfo)
		if !errors.Is(err, rpcroom.ErrTimeout) || time.Since(start) != 30*time.Second {
			t.Fatalf("db.info: %v after %v, want TIMEOUT after 30s", err, time.Since(start))
		}
		if got := n.sentFrom("aaaa", "bbbb"); got != 0 {
			t.Fatalf("the refusing peer sent %d messages", got)
		}
		raw, err := b.room.Call(ctx, "aaaa", MethodReqAuth, "bbbb")
		if err != nil || string(raw) != "false" {
			t.Fatalf("!reqAuth = %s, %v", raw, err)
		}
		if _, err := b.Pull(ctx, "aaaa", PullOptions{}); !errors.Is(err, ErrRejected) {
			t.Fatalf("pull from a refusing peer: %v", err)
		}
		// Once accepted for the session, requests are served.
		_ = a.Decide(ctx, b.Advertisement(), Decision{Accept: true, Temporary: true})
		if _, err := b.room.Call(ctx, "aaaa", MethodInfo); err != nil {
			t.Fatal(err)
		}
	})
}

func TestPassphraseHashBuckets(t *testing.T) {
	// synctest's clock starts at 2000-01-01T00:00:00Z, 946684800000 ms,
	// which is exactly bucket 5259360 ("34q5c" in base 36).
	synctest.Test(t, func(t *testing.T) {
		h0 := PassphraseHash(time.Now(), "pw")
		if h0 != SHA1B64(SHA1B64("34q5c")+"pw") {
			t.Fatalf("hash at the bucket start %s", h0)
		}
		time.Sleep(PassphraseBucket - time.Millisecond)
		if got := PassphraseHash(time.Now(), "pw"); got != h0 {
			t.Fatal("hash changed within the bucket")
		}
		time.Sleep(time.Millisecond)
		h1 := PassphraseHash(time.Now(), "pw")
		if h1 == h0 || h1 != SHA1B64(SHA1B64("34q5d")+"pw") {
			t.Fatal("hash did not move to the next bucket")
		}
	})
	// Vectors computed in Node with crypto.createHash("sha1") and the
	// formula of getHashedStringWithCurrentTime.
	for _, v := range []struct {
		ms         int64
		pass, want string
	}{
		{1764672000000, "pw", "v+KtbPZmbDVFLoeV5rr4zod9oQ0="},
		{1764672179999, "pässwörd🔑", "g2w+qMq7dawl4/yxosT+8vd6OCM="},
		{1764672180000, "", "YWImZRpk1vTPvL5ERpeDkr3Pwaw="},
	} {
		if got := PassphraseHash(time.UnixMilli(v.ms), v.pass); got != v.want {
			t.Errorf("PassphraseHash(%d) = %s, want %s", v.ms, got, v.want)
		}
	}
	if SHA1B64("abc") != "qZk+NkcGgWq6PiVxeFDCbJzQ2J0=" {
		t.Fatal("SHA1B64")
	}
}

func TestTweakSettingsShape(t *testing.T) {
	tw := negotiate.ShouldMatchTemplate()
	_ = tw.Set("encrypt", true)
	raw := TweakSettings(tw, "secret", time.UnixMilli(0))
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if len(m) != len(negotiate.ShouldMatchKeys())+1 || m["encrypt"] != true || m["passphrase"] != PassphraseHash(time.UnixMilli(0), "secret") {
		t.Fatalf("tweak settings %s", raw)
	}
	if strings.Contains(string(raw), "secret") {
		t.Fatal("the passphrase crosses in clear")
	}
}

func TestTweakCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		n := &network{}
		a := newNode(t, n, "aaaa", func(c *Config) { c.Passphrase = "other" })
		b := newNode(t, n, "bbbb", nil)
		c := newNode(t, n, "cccc", func(c *Config) { _ = c.Tweaks.Set("customChunkSize", 60) })
		meet(a, b)
		meet(b, c)
		put(t, a.st, "x", `"v":1`)
		put(t, c.st, "y", `"v":1`)
		if _, err := b.Pull(ctx, "aaaa", PullOptions{}); !errors.Is(err, ErrPassphraseMismatch) {
			t.Fatalf("pull with another passphrase: %v", err)
		}
		if len(leaves(t, b.st)) != 0 {
			t.Fatal("documents pulled despite the mismatch")
		}
		res, err := b.Pull(ctx, "cccc", PullOptions{})
		if err != nil || res.Docs != 1 || len(res.TweakMismatch) != 1 || res.TweakMismatch[0] != "customChunkSize" {
			t.Fatalf("pull with another chunk size: %+v, %v", res, err)
		}
		b.PeerLeft("cccc")
		if _, err := b.Pull(ctx, "cccc", PullOptions{}); !errors.Is(err, ErrUnknownPeer) {
			t.Fatalf("pull from a peer without advertisement: %v", err)
		}
	})
}

func TestSyncAndReqSync(t *testing.T) {
	ctx := context.Background()
	n := &network{}
	var acksMu sync.Mutex
	var acks []Progress
	a := newNode(t, n, "aaaa", nil)
	b := newNode(t, n, "bbbb", func(c *Config) {
		c.OnProgress = func(p Progress) {
			if p.Sending {
				acksMu.Lock()
				acks = append(acks, p)
				acksMu.Unlock()
			}
		}
	})
	meet(a, b)
	put(t, a.st, "from-a", `"v":1`)
	put(t, b.st, "from-b", `"v":1`)
	if _, err := a.Sync(ctx, "bbbb", PullOptions{}); err != nil {
		t.Fatal(err)
	}
	sameLeaves(t, a.st, b.st)
	if len(leaves(t, a.st)) != 2 {
		t.Fatal("sync did not join both sides")
	}
	// b was told of a's progress: one batch, then the end (sent in the
	// background, as the plugin sends them).
	for deadline := time.Now().Add(10 * time.Second); ; {
		acksMu.Lock()
		got := slices.Clone(acks)
		acksMu.Unlock()
		if len(got) == 2 && got[0].Info != nil && got[0].Peer == "aaaa" && got[1].Info == nil {
			break
		}
		if len(got) > 2 || time.Now().After(deadline) {
			t.Fatalf("acknowledgements %+v", got)
		}
		time.Sleep(2 * time.Millisecond) // poll
	}
	// a peer that refuses to pull answers {error}.
	c := newNode(t, n, "cccc", nil)
	d := newNode(t, n, "dddd", func(c *Config) { c.Passphrase = "different" })
	meet(c, d)
	_, err := c.Sync(ctx, "dddd", PullOptions{})
	if !errors.Is(err, ErrPassphraseMismatch) {
		t.Fatalf("sync with another passphrase: %v", err)
	}
	raw, err := d.room.Call(ctx, "cccc", MethodReqSync, "dddd")
	if err != nil || !strings.Contains(string(raw), `"error":{"message"`) {
		t.Fatalf("reqSync answer %s, %v", raw, err)
	}
	raw, err = d.room.Call(ctx, "cccc", MethodReqSync, "someone-else")
	if err != nil || !strings.Contains(string(raw), `"error"`) {
		t.Fatalf("reqSync naming another caller: %s, %v", raw, err)
	}
}

func TestOnProgressFollow(t *testing.T) {
	ctx := context.Background()
	n := &network{}
	a := newNode(t, n, "aaaa", func(c *Config) { c.Follow = "device-bbbb" })
	b := newNode(t, n, "bbbb", func(c *Config) { c.Broadcasting = true })
	meet(a, b)
	put(t, b.st, "news", `"v":1`)
	if _, err := b.room.Call(ctx, "aaaa", MethodOnProgress, "bbbb"); err != nil {
		t.Fatal(err)
	}
	if len(leaves(t, a.st)) != 1 {
		t.Fatal("a followed peer's progress did not make a pull")
	}
	put(t, a.st, "other", `"v":1`)
	if _, err := a.room.Call(ctx, "bbbb", MethodOnProgress, "aaaa"); err != nil {
		t.Fatal(err)
	}
	if len(leaves(t, b.st)) != 1 {
		t.Fatal("an unfollowed peer's progress made a pull")
	}
	for _, c := range []struct {
		to, method, want string
	}{{"bbbb", MethodGetIsBroadcasting, "true"}, {"aaaa", MethodGetIsBroadcasting, "false"},
		{"bbbb", MethodRequestBroadcasting, "true"}, {"aaaa", MethodRequestBroadcasting, ""}} {
		from := map[string]*node{"aaaa": b, "bbbb": a}[c.to]
		raw, err := from.room.Call(ctx, c.to, c.method, from.id)
		if err != nil || string(raw) != c.want {
			t.Errorf("%s on %s = %s, %v; want %q", c.method, c.to, raw, err, c.want)
		}
	}
}

func TestBroadcast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		n := &network{}
		a := newNode(t, n, "aaaa", func(c *Config) { c.AutoAccept = "device-bbbb, device-cccc" })
		b := newNode(t, n, "bbbb", func(c *Config) { c.Follow = "device-aaaa" })
		c := newNode(t, n, "cccc", nil) // does not follow a
		d := newNode(t, n, "dddd", func(c *Config) { c.Follow = "~.*" })
		meet(a, b)
		meet(a, c)
		meet(a, d) // a does not accept d: d is never notified
		done := make(chan error, 1)
		go func() { done <- a.Broadcast(ctx) }()
		synctest.Wait()
		raw, err := b.room.Call(ctx, "aaaa", MethodGetIsBroadcasting)
		if err != nil || string(raw) != "true" {
			t.Fatalf("getIsBroadcasting while broadcasting: %s, %v", raw, err)
		}
		put(t, a.st, "news.md", `"v":1`)
		synctest.Wait()
		if len(leaves(t, b.st)) != 1 {
			t.Fatal("the following peer did not pull after the change")
		}
		if len(leaves(t, c.st)) != 0 || len(leaves(t, d.st)) != 0 {
			t.Fatal("a peer pulled without following or being accepted")
		}
		if got := n.requests("aaaa", "dddd"); len(got) != 0 {
			t.Fatalf("an unaccepted peer was sent %v", got)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Broadcast after Close: %v", err)
		}
		raw, _ = b.room.Call(ctx, "aaaa", MethodGetIsBroadcasting)
		if string(raw) != "false" {
			t.Fatalf("getIsBroadcasting after Broadcast = %s", raw)
		}
	})
}
