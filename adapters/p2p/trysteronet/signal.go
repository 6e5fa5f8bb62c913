package trysteronet

import (
	"fmt"
	"time"

	"github.com/livesync-go/livesync-go/engine/trystero"
)

// peerState is what the signalling knows of one remote peer (trystero
// signal-handler.mjs makeState). Only the event loop touches it.
type peerState struct {
	id            string
	topic         string // the peer's self topic
	offer         *conn  // our outgoing offer (we lead)
	offerID       string
	offerSealed   string
	offerAnswered bool
	offerRelays   map[int]time.Time // relays the offer went out on, and when
	offerCands    []trystero.ICECandidate
	offerTimer    *time.Timer
	answering     *conn
	answerTimer   *time.Timer
	connected     *conn
	pending       map[string][]trystero.ICECandidate // by offerId ("" for none)
}

// maxStates bounds the peers the signalling keeps state for at once, so
// a flood of announcements under made-up ids cannot make unbounded
// connections.
const maxStates = 256

// state returns the peer's state, nil when maxStates are in use.
func (r *Room) state(id string) *peerState {
	st := r.states[id]
	if st == nil {
		if len(r.states) >= maxStates {
			return nil
		}
		st = &peerState{id: id, topic: trystero.SelfTopic(r.cfg.AppID, r.cfg.RoomID, id),
			offerRelays: map[int]time.Time{}, pending: map[string][]trystero.ICECandidate{}}
		r.states[id] = st
	}
	return st
}

// publish sends a signalling message to a peer's self topic on a relay.
func (r *Room) publish(relay int, topic string, s trystero.Signal) {
	if err := r.relays[relay].publish(topic, string(s.Encode())); err != nil {
		r.log.Debug("trysteronet: publish failed", "relay", r.relays[relay].url, "err", err)
	}
}

// seal seals an SDP or a candidate's JSON with the room key.
func (r *Room) seal(plain string) (string, error) {
	return trystero.SealSDP(r.key, plain, r.rand)
}

// handleSignal is trystero's signal handler for one message that arrived
// on our root or self topic.
func (r *Room) handleSignal(relay int, content []byte) {
	s, err := trystero.DecodeSignal(content)
	if err != nil || s.PeerID == "" || s.PeerID == r.selfID {
		return
	}
	st := r.state(s.PeerID)
	if st == nil {
		return
	}
	defer r.prune(st)
	if st.connected != nil {
		st.connected.mu.Lock()
		live := !st.connected.closed
		st.connected.mu.Unlock()
		if live {
			return
		}
		st.connected = nil
	}
	switch s.Type() {
	case trystero.SignalAnnounce:
		r.onAnnounce(relay, st)
	case trystero.SignalOffer:
		r.onOffer(relay, st, s)
	case trystero.SignalCandidate:
		r.onCandidate(st, s)
	case trystero.SignalAnswer:
		r.onAnswer(st, s)
	}
}

// onAnnounce: the leader offers (again on a relay once OfferPrune has
// passed), the other side nudges the leader with a bare peerId.
func (r *Room) onAnnounce(relay int, st *peerState) {
	if st.answering != nil || st.offerAnswered {
		return
	}
	if !trystero.IsLeader(r.selfID, st.id) {
		if st.offer == nil {
			r.publish(relay, st.topic, trystero.Signal{PeerID: r.selfID})
		}
		return
	}
	if t, ok := st.offerRelays[relay]; ok && time.Since(t) < trystero.OfferPrune {
		return
	}
	if st.offer == nil {
		if err := r.makeOffer(st); err != nil {
			r.log.Debug("trysteronet: offer failed", "peer", st.id, "err", err)
			return
		}
	}
	st.offerRelays[relay] = time.Now()
	r.publish(relay, st.topic, trystero.Signal{PeerID: r.selfID, OfferID: st.offerID, Offer: st.offerSealed})
	for _, cand := range st.offerCands {
		r.publishCandidate(relay, st, cand, st.offerID, false)
	}
}

func (r *Room) makeOffer(st *peerState) error {
	c, err := r.newConn(st.id, true)
	if err != nil {
		return err
	}
	c.pc.OnICECandidate(func(cand trystero.ICECandidate) {
		r.post(func() {
			if st.offer != c || st.connected != nil {
				return
			}
			st.offerCands = append(st.offerCands, cand)
			for relay := range st.offerRelays {
				r.publishCandidate(relay, st, cand, st.offerID, false)
			}
		})
	})
	offer, err := c.pc.Offer()
	var sealed string
	if err == nil {
		sealed, err = r.seal(offer)
	}
	if err != nil {
		c.close(false)
		return err
	}
	st.offer, st.offerID, st.offerSealed, st.offerAnswered = c, trystero.NewOfferID(r.rand), sealed, false
	st.offerCands = nil
	r.armOfferTimer(st, trystero.OfferTTL)
	return nil
}

func (r *Room) armOfferTimer(st *peerState, d time.Duration) {
	if st.offerTimer != nil {
		st.offerTimer.Stop()
	}
	c := st.offer
	st.offerTimer = time.AfterFunc(d, func() {
		r.post(func() {
			if st.offer == c && st.connected != c {
				if st.offerAnswered {
					r.joinError(st.id, fmt.Errorf("trysteronet: could not connect to peer %s after exchanging SDP", st.id))
				}
				r.resetOffer(st)
			}
		})
	})
}

// resetOffer forgets our outgoing offer, closing its connection unless
// it became the peer's connection.
func (r *Room) resetOffer(st *peerState) {
	if st.offerTimer != nil {
		st.offerTimer.Stop()
		st.offerTimer = nil
	}
	if st.offer != nil && st.offer != st.connected {
		st.offer.close(false)
	}
	st.offer, st.offerID, st.offerSealed, st.offerAnswered = nil, "", "", false
	st.offerCands = nil
	clear(st.offerRelays)
}

func (r *Room) publishCandidate(relay int, st *peerState, cand trystero.ICECandidate, offerID string, answering bool) {
	sealed, err := r.seal(cand.Encode())
	if err != nil {
		return
	}
	r.publish(relay, st.topic, trystero.Signal{PeerID: r.selfID, OfferID: offerID, Candidate: sealed, Answering: answering})
}

// onOffer answers an offer, unless we lead and have our own offer out.
func (r *Room) onOffer(relay int, st *peerState, s trystero.Signal) {
	if st.answering != nil || st.offerAnswered {
		return
	}
	hasOffer := st.offer != nil
	if (hasOffer || s.HasOutgoingOffer) && trystero.IsLeader(r.selfID, st.id) {
		return
	}
	if hasOffer {
		r.resetOffer(st)
	}
	plain, err := trystero.OpenSDP(r.key, s.Offer)
	if err != nil {
		r.joinError(st.id, fmt.Errorf("trysteronet: peer %s: %w when decrypting offer", st.id, err))
		return
	}
	c, err := r.newConn(st.id, false)
	if err != nil {
		return
	}
	c.offerID, c.relay = s.OfferID, relay
	c.pc.OnICECandidate(func(cand trystero.ICECandidate) {
		r.post(func() {
			if st.answering == c {
				r.publishCandidate(c.relay, st, cand, c.offerID, true)
			}
		})
	})
	if err := r.answer(c, plain); err != nil {
		r.log.Debug("trysteronet: answer failed", "peer", st.id, "err", err)
		c.close(false)
		return
	}
	st.answering = c
	for _, key := range []string{s.OfferID, ""} {
		for _, cand := range st.pending[key] {
			c.addCandidate(cand)
		}
		delete(st.pending, key)
	}
	st.answerTimer = time.AfterFunc(trystero.AnsweringTTL, func() {
		r.post(func() {
			if st.answering == c && st.connected != c {
				r.joinError(st.id, fmt.Errorf("trysteronet: could not connect to peer %s after exchanging SDP", st.id))
				st.answering = nil
				c.close(false)
			}
		})
	})
}

// answer applies the offer and publishes the sealed answer.
func (r *Room) answer(c *conn, offer string) error {
	if err := c.setRemote(true, offer); err != nil {
		return err
	}
	ans, err := c.pc.Answer()
	if err != nil {
		return err
	}
	sealed, err := r.seal(ans)
	if err != nil {
		return err
	}
	st := r.states[c.peer]
	r.publish(c.relay, st.topic, trystero.Signal{PeerID: r.selfID, Answer: sealed, OfferID: c.offerID, Answering: true})
	return nil
}

// onCandidate applies a trickled candidate to the connection it belongs
// to, or keeps it for a connection not made yet. One that does not open
// is dropped silently, as trystero does.
func (r *Room) onCandidate(st *peerState, s trystero.Signal) {
	plain, err := trystero.OpenSDP(r.key, s.Candidate)
	if err != nil {
		return
	}
	cand, err := trystero.DecodeCandidate(plain)
	if err != nil {
		return
	}
	var target *conn
	switch {
	case s.OfferID != "" && st.offer != nil && st.offerID == s.OfferID:
		target = st.offer
	case st.answering != nil:
		target = st.answering
	case s.OfferID == "" && st.offer != nil:
		target = st.offer
	}
	if target == nil {
		if len(st.pending[s.OfferID]) < maxPendingCandidates {
			st.pending[s.OfferID] = append(st.pending[s.OfferID], cand)
		}
		return
	}
	target.addCandidate(cand)
}

// onAnswer applies the answer to our offer.
func (r *Room) onAnswer(st *peerState, s trystero.Signal) {
	plain, err := trystero.OpenSDP(r.key, s.Answer)
	if err != nil {
		r.joinError(st.id, fmt.Errorf("trysteronet: peer %s: %w when decrypting answer", st.id, err))
		return
	}
	if st.offer == nil || st.offerAnswered || (s.OfferID != "" && s.OfferID != st.offerID) {
		return
	}
	st.offerAnswered = true
	r.armOfferTimer(st, trystero.OfferPostAnswerTTL)
	if err := st.offer.setRemote(false, plain); err != nil {
		r.log.Debug("trysteronet: answer refused", "peer", st.id, "err", err)
	}
}

// connected records that c's data channel opened (trystero connectPeer).
func (r *Room) connected(c *conn) {
	st := r.states[c.peer]
	if st == nil || (st.connected != nil && st.connected != c) {
		c.close(false)
		return
	}
	st.connected = c
	if st.answering == c {
		st.answering = nil
		if st.answerTimer != nil {
			st.answerTimer.Stop()
		}
	}
	if st.offer != nil {
		r.resetOffer(st) // keeps c open: it is st.connected now
	}
}

// prune forgets the state of a peer with nothing under way.
func (r *Room) prune(st *peerState) {
	if st.offer == nil && st.answering == nil && st.connected == nil && len(st.pending) == 0 {
		delete(r.states, st.id)
	}
}

// disconnected forgets a closed connection.
func (r *Room) disconnected(c *conn) {
	st := r.states[c.peer]
	if st == nil {
		return
	}
	if st.connected == c {
		st.connected = nil
	}
	if st.answering == c {
		st.answering = nil
	}
	if st.offer == c {
		r.resetOffer(st)
	}
	r.prune(st)
}
