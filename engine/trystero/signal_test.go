package trystero

import (
	"errors"
	"testing"
)

func TestSignalEncode(t *testing.T) {
	for _, tc := range []struct {
		s    Signal
		want string
	}{
		{Signal{PeerID: "p"}, `{"peerId":"p"}`},
		{Signal{PeerID: "p", Passive: true}, `{"peerId":"p","passive":true}`},
		{Signal{PeerID: "p", OfferID: "o", Offer: "X"}, `{"peerId":"p","offerId":"o","offer":"X"}`},
		{Signal{PeerID: "p", OfferID: "o", Candidate: "C"}, `{"peerId":"p","offerId":"o","candidate":"C"}`},
		{Signal{PeerID: "p", OfferID: "o", Answer: "A"}, `{"peerId":"p","answer":"A","offerId":"o"}`},
		{Signal{PeerID: "p", OfferID: "o", Candidate: "C", Answering: true}, `{"peerId":"p","candidate":"C","offerId":"o"}`},
		{Signal{PeerID: "p", Answer: "A"}, `{"peerId":"p","answer":"A"}`},
		{Signal{PeerID: "p\"<", Answer: "A", Passive: true}, `{"peerId":"p\"<","answer":"A","passive":true}`},
	} {
		if got := string(tc.s.Encode()); got != tc.want {
			t.Errorf("Encode(%+v) = %s, want %s", tc.s, got, tc.want)
		}
		back, err := DecodeSignal(tc.s.Encode())
		if err != nil {
			t.Fatalf("DecodeSignal(%s): %v", tc.want, err)
		}
		if back.Type() != tc.s.Type() || back.PeerID != tc.s.PeerID || back.Passive != tc.s.Passive {
			t.Errorf("round trip of %s = %+v", tc.want, back)
		}
	}
}

func TestDecodeSignal(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Signal
		typ  SignalType
	}{
		{`{"peerId":"p"}`, Signal{PeerID: "p"}, SignalAnnounce},
		{`{"peerId":"p","offer":"O","candidate":"C","offerId":""}`, Signal{PeerID: "p", Offer: "O", Candidate: "C", Answering: true}, SignalOffer},
		{`{"peerId":"p","answer":"A","candidate":"C"}`, Signal{PeerID: "p", Answer: "A", Candidate: "C", Answering: true}, SignalCandidate},
		{`{"peerId":"p","passive":1,"hasOutgoingOffer":true,"x":[1]}`, Signal{PeerID: "p", HasOutgoingOffer: true}, SignalAnnounce},
		{`{"peerId":"p","offerId":"o","candidate":"C"}`, Signal{PeerID: "p", OfferID: "o", Candidate: "C"}, SignalCandidate},
		{`{"peerId":"p","candidate":"C","offerId":"o"}`, Signal{PeerID: "p", OfferID: "o", Candidate: "C", Answering: true}, SignalCandidate},
		{`{"peerId":"x","peerId":"p"}`, Signal{PeerID: "p"}, SignalAnnounce}, // the last duplicate wins, as in JSON.parse
	} {
		got, err := DecodeSignal([]byte(tc.in))
		if err != nil || got != tc.want || got.Type() != tc.typ {
			t.Errorf("DecodeSignal(%s) = %+v (%d), %v", tc.in, got, got.Type(), err)
		}
	}
	// Trystero drops all of these.
	for _, in := range []string{``, `null`, `[]`, `"s"`, `{}`, `{"peerId":""}`, `{"peerId":5}`, `{"peerId":null}`,
		`{"peerId":"p","offer":""}`, `{"peerId":"p","answer":null}`, `{"peerId":"p","candidate":{}}`, `{"PeerId":"p"}`} {
		if _, err := DecodeSignal([]byte(in)); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeSignal(%s) error %v", in, err)
		}
	}
}
