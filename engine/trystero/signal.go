package trystero

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/livesync-go/livesync-go/engine/jsstring"
)

// SignalType is what a signalling message asks of its receiver.
type SignalType uint8

// Signal types, in the order Trystero's signal handler tests them
// (trystero core dist signal-handler.mjs createSignalHandler): a message
// with an offer is an offer even if it also has a candidate, and so on.
const (
	// SignalAnnounce has only a peer id: on the root topic it announces a
	// peer; on a self topic it is the nudge a non-leading peer sends so
	// that the leader makes an offer.
	SignalAnnounce SignalType = iota
	SignalOffer
	SignalCandidate
	SignalAnswer
)

// Signal is one signalling message, the JSON content of a Nostr event on
// a room's root topic or a peer's self topic. Offer, Answer and Candidate
// are sealed with SealSDP.
type Signal struct {
	PeerID    string
	OfferID   string
	Offer     string
	Answer    string
	Candidate string
	// Passive is set by passive rooms (Trystero's passive mode); a passive
	// room ignores other passive peers.
	Passive bool
	// HasOutgoingOffer is a hint some strategies add to offers; a leader
	// with this hint ignores the offer. Decoded only.
	HasOutgoingOffer bool
	// Answering selects the key order of a message from the answering
	// side: {"peerId", "answer" or "candidate", "offerId"}. Messages from
	// the offering side are {"peerId", "offerId", "offer" or
	// "candidate"}. A Signal with an Answer is always answering;
	// DecodeSignal sets it for a candidate that precedes its offerId. It
	// only matters for byte-exact output.
	Answering bool
}

// Type returns what the message asks for.
func (s Signal) Type() SignalType {
	switch {
	case s.Offer != "":
		return SignalOffer
	case s.Candidate != "":
		return SignalCandidate
	case s.Answer != "":
		return SignalAnswer
	}
	return SignalAnnounce
}

// Encode returns the message as Trystero's JSON.stringify writes it:
// {"peerId"} for announcements and nudges; {"peerId","offerId","offer"}
// and {"peerId","offerId","candidate"} from the offerer;
// {"peerId","answer","offerId"} and {"peerId","candidate","offerId"} from
// the answerer (offerId left out when empty); then "passive":true if set.
func (s Signal) Encode() []byte {
	b := make([]byte, 0, 64+len(s.Offer)+len(s.Answer)+len(s.Candidate))
	field := func(name, v string) {
		if b[len(b)-1] != '{' {
			b = append(b, ',')
		}
		b = jsstring.AppendJSONString(b, name)
		b = append(b, ':')
		b = jsstring.AppendJSONString(b, v)
	}
	b = append(b, '{')
	field("peerId", s.PeerID)
	switch {
	case s.Offer != "":
		field("offerId", s.OfferID)
		field("offer", s.Offer)
	case s.Answer != "" || (s.Answering && s.Candidate != ""):
		if s.Answer != "" {
			field("answer", s.Answer)
		} else {
			field("candidate", s.Candidate)
		}
		if s.OfferID != "" {
			field("offerId", s.OfferID)
		}
	case s.Candidate != "":
		if s.OfferID != "" {
			field("offerId", s.OfferID)
		}
		field("candidate", s.Candidate)
	}
	if s.Passive {
		b = append(b, `,"passive":true`...)
	}
	return append(b, '}')
}

// DecodeSignal reads a signalling message as Trystero's signal handler
// does: it must be a JSON object; if it has an "offer", "answer" or
// "candidate" key, that must be a non-empty string, else the whole
// message is dropped; "peerId" must be a non-empty string; other string
// fields count only when non-empty strings, "passive" and
// "hasOutgoingOffer" only when true. A message Trystero would drop
// returns an error wrapping ErrMalformed. Dropping messages from the
// receiver's own peer id is the caller's job.
func DecodeSignal(content []byte) (Signal, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(content, &obj); err != nil || obj == nil {
		return Signal{}, fmt.Errorf("%w: signal is not a JSON object", ErrMalformed)
	}
	var s Signal
	for _, k := range []string{"offer", "answer", "candidate"} {
		if raw, ok := obj[k]; ok {
			v, isStr := jsonString(raw)
			if !isStr || v == "" {
				return Signal{}, fmt.Errorf("%w: signal field %q is not a non-empty string", ErrMalformed, k)
			}
		}
	}
	get := func(k string) string { v, _ := jsonString(obj[k]); return v }
	s.PeerID, s.OfferID = get("peerId"), get("offerId")
	s.Offer, s.Answer, s.Candidate = get("offer"), get("answer"), get("candidate")
	s.Passive = string(obj["passive"]) == "true"
	s.HasOutgoingOffer = string(obj["hasOutgoingOffer"]) == "true"
	s.Answering = s.Answer != "" || (s.Candidate != "" && keyBefore(content, "candidate", "offerId"))
	if s.PeerID == "" {
		return Signal{}, fmt.Errorf("%w: signal without a peer id", ErrMalformed)
	}
	return s, nil
}

// keyBefore reports whether the JSON object content has the key a at top
// level before the key b or without b, reading keys in order with a
// streaming decoder. content is known to be a valid JSON object.
func keyBefore(content []byte, a, b string) bool {
	dec := json.NewDecoder(bytes.NewReader(content))
	if _, err := dec.Token(); err != nil {
		return false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case a:
			return true
		case b:
			return false
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return false
		}
	}
	return false
}

// jsonString decodes raw if it is a JSON string.
func jsonString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var v string
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	return v, true
}
