//go:build js

package trysteronet

import (
	"errors"
	"sync"
	"syscall/js"

	"github.com/livesync-go/livesync-go/engine/trystero"
)

// newRTC makes a peer connection with the host's RTCPeerConnection and
// the room's ICE configuration. The browser gathers the candidates
// (LoopbackOnly has no meaning here).
func newRTC(cfg Config) (rtcPeer, error) {
	ctor, err := constructor(cfg.Host.RTCPeerConnection, "RTCPeerConnection")
	if err != nil {
		return nil, err
	}
	servers := []any{}
	for _, u := range cfg.STUN {
		servers = append(servers, map[string]any{"urls": []any{u}})
	}
	for _, t := range cfg.TURN {
		urls := make([]any, len(t.URLs))
		for i, u := range t.URLs {
			urls[i] = u
		}
		servers = append(servers, map[string]any{"urls": urls, "username": t.Username, "credential": t.Credential})
	}
	conf := map[string]any{"iceServers": servers}
	if cfg.RelayOnly {
		conf["iceTransportPolicy"] = "relay"
	}
	p := &jsPeer{events: newSerial()}
	if err := try(func() { p.pc = ctor.New(js.ValueOf(conf)) }); err != nil {
		p.events.stop()
		return nil, err
	}
	return p, nil
}

// jsPeer is an RTCPeerConnection. Its events and its channels' run on
// one serial goroutine, in order; a channel's bufferedamountlow is
// handled at once (a sender waiting for it may be that goroutine).
type jsPeer struct {
	pc     js.Value
	events *serial
	h      handlers
	mu     sync.Mutex
	chans  []*jsChannel
}

// maxQueuedMessages bounds the messages received and not handled yet
// (the browser does not push back on the sender once JS has taken them):
// past it, a peer flooding the channel loses its own messages.
const maxQueuedMessages = 1024

func (p *jsPeer) CreateDataChannel(label string) (rtcChannel, error) {
	var dc js.Value
	if err := try(func() { dc = p.pc.Call("createDataChannel", label) }); err != nil {
		return nil, err
	}
	return p.channel(dc), nil
}

func (p *jsPeer) channel(dc js.Value) *jsChannel {
	dc.Set("binaryType", "arraybuffer")
	c := &jsChannel{p: p, dc: dc}
	p.mu.Lock()
	p.chans = append(p.chans, c)
	p.mu.Unlock()
	return c
}

func (p *jsPeer) OnDataChannel(fn func(rtcChannel)) {
	p.h.set(p.pc, "ondatachannel", func(ev js.Value) {
		c := p.channel(ev.Get("channel"))
		p.events.post(func() { fn(c) })
	})
}

func (p *jsPeer) OnICECandidate(fn func(trystero.ICECandidate)) {
	p.h.set(p.pc, "onicecandidate", func(ev js.Value) {
		c := ev.Get("candidate")
		if c.IsNull() || c.IsUndefined() || c.Get("candidate").String() == "" {
			return // the end of gathering
		}
		cand := trystero.ICECandidate{Candidate: c.Get("candidate").String()}
		if v := c.Get("sdpMid"); v.Type() == js.TypeString {
			s := v.String()
			cand.SDPMid = &s
		}
		if v := c.Get("sdpMLineIndex"); v.Type() == js.TypeNumber {
			n := uint16(v.Int())
			cand.SDPMLineIndex = &n
		}
		if v := c.Get("usernameFragment"); v.Type() == js.TypeString {
			s := v.String()
			cand.UsernameFragment = &s
		}
		p.events.post(func() { fn(cand) })
	})
}

func jsState(s string) rtcState {
	switch s {
	case "disconnected":
		return rtcDisconnected
	case "failed":
		return rtcFailed
	case "closed":
		return rtcClosed
	}
	return rtcActive
}

func (p *jsPeer) OnStateChange(fn func(rtcState)) {
	p.h.set(p.pc, "onconnectionstatechange", func(js.Value) {
		s := jsState(p.pc.Get("connectionState").String())
		p.events.post(func() { fn(s) })
	})
}

func (p *jsPeer) State() rtcState { return jsState(p.pc.Get("connectionState").String()) }

func (p *jsPeer) describe(create string) (string, error) {
	var pr js.Value
	if err := try(func() { pr = p.pc.Call(create) }); err != nil {
		return "", err
	}
	d, err := await(pr)
	if err != nil {
		return "", err
	}
	if err := try(func() { pr = p.pc.Call("setLocalDescription", d) }); err != nil {
		return "", err
	}
	if _, err := await(pr); err != nil {
		return "", err
	}
	return d.Get("sdp").String(), nil
}

func (p *jsPeer) Offer() (string, error)  { return p.describe("createOffer") }
func (p *jsPeer) Answer() (string, error) { return p.describe("createAnswer") }

func (p *jsPeer) SetRemote(offer bool, sdp string) error {
	typ := "answer"
	if offer {
		typ = "offer"
	}
	var pr js.Value
	if err := try(func() { pr = p.pc.Call("setRemoteDescription", map[string]any{"type": typ, "sdp": sdp}) }); err != nil {
		return err
	}
	_, err := await(pr)
	return err
}

func (p *jsPeer) AddCandidate(c trystero.ICECandidate) error {
	init := map[string]any{"candidate": c.Candidate, "sdpMid": nil, "sdpMLineIndex": nil}
	if c.SDPMid != nil {
		init["sdpMid"] = *c.SDPMid
	}
	if c.SDPMLineIndex != nil {
		init["sdpMLineIndex"] = int(*c.SDPMLineIndex)
	}
	if c.UsernameFragment != nil {
		init["usernameFragment"] = *c.UsernameFragment
	}
	if init["sdpMid"] == nil && init["sdpMLineIndex"] == nil {
		return errors.New("trysteronet: a candidate without sdpMid and sdpMLineIndex")
	}
	var pr js.Value
	if err := try(func() { pr = p.pc.Call("addIceCandidate", init) }); err != nil {
		return err
	}
	_, err := await(pr)
	return err
}

func (p *jsPeer) Close() error {
	err := try(func() { p.pc.Call("close") })
	p.h.release()
	p.mu.Lock()
	for _, c := range p.chans {
		c.h.release()
	}
	p.chans = nil
	p.mu.Unlock()
	p.events.stop()
	return err
}

// jsChannel is an RTCDataChannel of a jsPeer.
type jsChannel struct {
	p  *jsPeer
	dc js.Value
	h  handlers
}

func (c *jsChannel) SetBufferedAmountLowThreshold(n uint64) {
	c.dc.Set("bufferedAmountLowThreshold", float64(n))
}

func (c *jsChannel) OnBufferedAmountLow(fn func()) {
	c.h.set(c.dc, "onbufferedamountlow", func(js.Value) { fn() })
}

func (c *jsChannel) OnOpen(fn func()) {
	c.h.set(c.dc, "onopen", func(js.Value) { c.p.events.post(fn) })
	if c.dc.Get("readyState").String() == "open" {
		c.p.events.post(fn)
	}
}

func (c *jsChannel) OnMessage(fn func([]byte)) {
	c.h.set(c.dc, "onmessage", func(ev js.Value) {
		if b, ok := bytesOf(ev.Get("data")); ok {
			c.p.events.postBounded(func() { fn(b) }, maxQueuedMessages)
		}
	})
}

func (c *jsChannel) OnClose(fn func()) {
	c.h.set(c.dc, "onclose", func(js.Value) {
		c.h.release()
		c.p.events.post(fn)
	})
}

func (c *jsChannel) Send(b []byte) error {
	a := js.Global().Get("Uint8Array").New(len(b))
	js.CopyBytesToJS(a, b)
	return try(func() { c.dc.Call("send", a) })
}

func (c *jsChannel) BufferedAmount() uint64 {
	return uint64(c.dc.Get("bufferedAmount").Float())
}

func (c *jsChannel) Close() error { return try(func() { c.dc.Call("close") }) }
