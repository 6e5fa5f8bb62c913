package trysteronet

import "github.com/livesync-go/livesync-go/engine/trystero"

// The WebRTC the room needs, as two small interfaces: natively pion's
// (rtc_native.go), in the js build the host's RTCPeerConnection
// (rtc_js.go). Callbacks may run on any goroutine but each kind runs one
// at a time, in order.

// rtcState is what the room cares about in a connection's state.
type rtcState int

const (
	rtcActive       rtcState = iota // new, connecting or connected
	rtcDisconnected                 // may come back
	rtcFailed
	rtcClosed
)

// rtcPeer is one peer connection.
type rtcPeer interface {
	// CreateDataChannel makes a channel with the browser defaults
	// (ordered, reliable, not negotiated).
	CreateDataChannel(label string) (rtcChannel, error)
	OnDataChannel(fn func(rtcChannel))
	// OnICECandidate is told of each local candidate (never the end of
	// gathering).
	OnICECandidate(fn func(trystero.ICECandidate))
	OnStateChange(fn func(rtcState))
	State() rtcState
	// Offer and Answer create the local description, set it and return
	// its SDP.
	Offer() (string, error)
	Answer() (string, error)
	// SetRemote applies the peer's offer (offer true) or answer.
	SetRemote(offer bool, sdp string) error
	AddCandidate(c trystero.ICECandidate) error
	Close() error
}

// rtcChannel is one data channel; messages are binary.
type rtcChannel interface {
	SetBufferedAmountLowThreshold(n uint64)
	OnBufferedAmountLow(fn func())
	OnOpen(fn func())
	OnMessage(fn func([]byte))
	OnClose(fn func())
	Send(b []byte) error
	BufferedAmount() uint64
	Close() error
}
