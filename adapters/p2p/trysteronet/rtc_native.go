//go:build !js

package trysteronet

import (
	"net"

	"github.com/livesync-go/livesync-go/engine/trystero"
	"github.com/pion/ice/v4"
	"github.com/pion/webrtc/v4"
)

// Host is what the js build takes from its host (the WebRTC and
// WebSocket constructors); natively there is nothing to pass.
type Host struct{}

// newRTC makes a pion peer connection with the room's ICE configuration;
// LoopbackOnly keeps it to loopback host candidates without mDNS.
func newRTC(cfg Config) (rtcPeer, error) {
	var se webrtc.SettingEngine
	if cfg.LoopbackOnly {
		se.SetIncludeLoopbackCandidate(true)
		se.SetIPFilter(func(ip net.IP) bool { return ip.IsLoopback() })
		se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
		se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	}
	api := webrtc.NewAPI(webrtc.WithSettingEngine(se))
	var servers []webrtc.ICEServer
	for _, u := range cfg.STUN {
		servers = append(servers, webrtc.ICEServer{URLs: []string{u}})
	}
	for _, t := range cfg.TURN {
		servers = append(servers, webrtc.ICEServer{URLs: t.URLs, Username: t.Username, Credential: t.Credential})
	}
	rc := webrtc.Configuration{ICEServers: servers}
	if cfg.RelayOnly {
		rc.ICETransportPolicy = webrtc.ICETransportPolicyRelay
	}
	pc, err := api.NewPeerConnection(rc)
	if err != nil {
		return nil, err
	}
	return pionPeer{pc}, nil
}

type pionPeer struct{ *webrtc.PeerConnection }

func (p pionPeer) CreateDataChannel(label string) (rtcChannel, error) {
	dc, err := p.PeerConnection.CreateDataChannel(label, nil)
	if err != nil {
		return nil, err
	}
	return pionChannel{dc}, nil
}

func (p pionPeer) OnDataChannel(fn func(rtcChannel)) {
	p.PeerConnection.OnDataChannel(func(dc *webrtc.DataChannel) { fn(pionChannel{dc}) })
}

func (p pionPeer) OnICECandidate(fn func(trystero.ICECandidate)) {
	p.PeerConnection.OnICECandidate(func(ic *webrtc.ICECandidate) {
		if ic == nil {
			return
		}
		j := ic.ToJSON()
		fn(trystero.ICECandidate{Candidate: j.Candidate, SDPMid: j.SDPMid, SDPMLineIndex: j.SDPMLineIndex, UsernameFragment: j.UsernameFragment})
	})
}

func pionState(s webrtc.PeerConnectionState) rtcState {
	switch s {
	case webrtc.PeerConnectionStateDisconnected:
		return rtcDisconnected
	case webrtc.PeerConnectionStateFailed:
		return rtcFailed
	case webrtc.PeerConnectionStateClosed:
		return rtcClosed
	}
	return rtcActive
}

func (p pionPeer) OnStateChange(fn func(rtcState)) {
	p.PeerConnection.OnConnectionStateChange(func(s webrtc.PeerConnectionState) { fn(pionState(s)) })
}

func (p pionPeer) State() rtcState { return pionState(p.PeerConnection.ConnectionState()) }

func (p pionPeer) Offer() (string, error) {
	o, err := p.CreateOffer(nil)
	if err == nil {
		err = p.SetLocalDescription(o)
	}
	return o.SDP, err
}

func (p pionPeer) Answer() (string, error) {
	a, err := p.CreateAnswer(nil)
	if err == nil {
		err = p.SetLocalDescription(a)
	}
	return a.SDP, err
}

func (p pionPeer) SetRemote(offer bool, sdp string) error {
	typ := webrtc.SDPTypeAnswer
	if offer {
		typ = webrtc.SDPTypeOffer
	}
	return p.SetRemoteDescription(webrtc.SessionDescription{Type: typ, SDP: sdp})
}

func (p pionPeer) AddCandidate(c trystero.ICECandidate) error {
	return p.AddICECandidate(webrtc.ICECandidateInit{Candidate: c.Candidate, SDPMid: c.SDPMid,
		SDPMLineIndex: c.SDPMLineIndex, UsernameFragment: c.UsernameFragment})
}

type pionChannel struct{ *webrtc.DataChannel }

func (c pionChannel) OnMessage(fn func([]byte)) {
	c.DataChannel.OnMessage(func(m webrtc.DataChannelMessage) { fn(m.Data) })
}
