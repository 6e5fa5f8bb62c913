package trystero

import "io"

// Outgoing is one action message a state machine asks the caller to send
// to the peer.
type Outgoing struct {
	Action string
	Kind   BodyKind
	Body   []byte
}

// PeerHandshake is the per-peer handshake of a Trystero room as a
// transport-free state machine (trystero core dist handshake.mjs,
// room.mjs). When the room has a password, the initiator (IsLeader)
// sends a challenge on ActionHandshakeData and checks the response; the
// responder answers the challenge. A side whose own step succeeded (at
// once without a password) sends an empty string on
// ActionHandshakeReady. The peer becomes active once its own step
// succeeded and the peer's ActionHandshakeReady arrived; only then are
// frames of other actions accepted from it (ReceiveWhilePending). The
// caller enforces the timeout (LiveSyncHandshakeTimeout for LiveSync)
// and drops the peer on any error. Not safe for concurrent use.
type PeerHandshake struct {
	initiator                bool
	password, appID, roomID  string
	challenge                string
	localPassed, remoteReady bool
	awaitingData             bool
}

// NewPeerHandshake prepares the handshake of selfID with peerID in the
// room with the given password (RoomPassword), appID and roomID.
func NewPeerHandshake(selfID, peerID, password, appID, roomID string) *PeerHandshake {
	return &PeerHandshake{
		initiator: IsLeader(selfID, peerID),
		password:  password, appID: appID, roomID: roomID,
	}
}

// Initiator reports whether this side sends the challenge.
func (p *PeerHandshake) Initiator() bool { return p.initiator }

// Start returns the messages to send when the connection to the peer
// opens: the challenge (initiator with a password), or the readiness
// message (no password); nothing for a responder with a password, which
// waits for the challenge. r supplies the challenge's randomness
// (crypto/rand when nil).
func (p *PeerHandshake) Start(r io.Reader) []Outgoing {
	if p.password == "" {
		return p.pass()
	}
	p.awaitingData = true
	if !p.initiator {
		return nil
	}
	msg, c := HandshakeChallenge(r)
	p.challenge = c
	return []Outgoing{{Action: ActionHandshakeData, Kind: BodyJSON, Body: msg}}
}

// pass records that this side's step succeeded and returns the readiness
// message.
func (p *PeerHandshake) pass() []Outgoing {
	p.localPassed, p.awaitingData = true, false
	return []Outgoing{{Action: ActionHandshakeReady, Kind: BodyString, Body: []byte{}}}
}

// Receive takes a complete message from the peer on ActionHandshakeData
// or ActionHandshakeReady and returns what to send in reply. Handshake
// data that no step waits for, and anything after the peer became
// active, is ignored as Trystero ignores it. A failed step returns an
// error wrapping ErrHandshake; the caller then drops the peer.
func (p *PeerHandshake) Receive(m *Message) ([]Outgoing, error) {
	if p.Active() {
		return nil, nil
	}
	switch m.Action {
	case ActionHandshakeReady:
		p.remoteReady = true
		return nil, nil
	case ActionHandshakeData:
	default:
		return nil, nil
	}
	if !p.awaitingData {
		return nil, nil
	}
	var body []byte
	if m.JSON {
		body = m.Body
	}
	if p.initiator {
		if err := VerifyHandshake(body, p.challenge, p.password, p.appID, p.roomID); err != nil {
			p.awaitingData = false
			return nil, err
		}
		return p.pass(), nil
	}
	c, err := ParseChallenge(body)
	if err != nil {
		p.awaitingData = false
		return nil, err
	}
	resp := Outgoing{Action: ActionHandshakeData, Kind: BodyJSON, Body: HandshakeResponse(c, p.password, p.appID, p.roomID)}
	return append([]Outgoing{resp}, p.pass()...), nil
}

// Active reports whether the handshake is complete in both directions.
func (p *PeerHandshake) Active() bool { return p.localPassed && p.remoteReady }
