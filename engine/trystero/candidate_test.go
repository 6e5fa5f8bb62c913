package trystero

import (
	"errors"
	"testing"
)

func TestICECandidate(t *testing.T) {
	// The plaintext trystero 0.25.3 seals for a candidate (from the Node vectors).
	const plain = `{"candidate":"candidate:842163049 1 udp 1677729535 192.0.2.1 56143 typ srflx raddr 0.0.0.0 rport 0 generation 0 ufrag Ab3d network-cost 999","sdpMid":"0","sdpMLineIndex":0,"usernameFragment":"Ab3d"}`
	c, err := DecodeCandidate(plain)
	if err != nil || c.SDPMid == nil || *c.SDPMid != "0" || c.SDPMLineIndex == nil || *c.SDPMLineIndex != 0 || *c.UsernameFragment != "Ab3d" {
		t.Fatalf("DecodeCandidate = %+v, %v", c, err)
	}
	if got := c.Encode(); got != plain {
		t.Errorf("Encode = %s", got)
	}
	if got := (ICECandidate{Candidate: "x"}).Encode(); got != `{"candidate":"x","sdpMid":null,"sdpMLineIndex":null,"usernameFragment":null}` {
		t.Errorf("Encode(nulls) = %s", got)
	}
	for _, bad := range []string{"", "null", "[]", `"x"`, "{"} {
		if _, err := DecodeCandidate(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeCandidate(%q): %v", bad, err)
		}
	}
}
