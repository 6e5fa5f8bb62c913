package trystero

import (
	"bytes"
	"errors"
	"testing"
)

func TestFrames(t *testing.T) {
	token := RoomToken("self-hosted-livesync", "myroom")
	payload := []byte{9, 8, 7}
	rf := RoomFrame(token, payload)
	if !bytes.Equal(rf[:3], []byte{1, 0, 64}) || string(rf[3:67]) != token || !bytes.Equal(rf[67:], payload) {
		t.Fatalf("room frame %x", rf)
	}
	f, err := ParseFrame(rf)
	if err != nil || f.Kind != FrameRoom || f.RoomToken != token || !bytes.Equal(f.Payload, payload) {
		t.Fatalf("ParseFrame(room) = %+v, %v", f, err)
	}
	for _, present := range []bool{true, false} {
		pf := PresenceFrame(token, present)
		want := byte(0)
		if present {
			want = 1
		}
		if !bytes.Equal(pf[:4], []byte{2, want, 0, 64}) || len(pf) != 68 {
			t.Fatalf("presence frame %x", pf)
		}
		f, err := ParseFrame(pf)
		if err != nil || f.Kind != FramePresence || f.RoomToken != token || f.Present != present || f.Payload != nil {
			t.Fatalf("ParseFrame(presence) = %+v, %v", f, err)
		}
	}
	// Only the byte 1 means present; an empty room payload is fine.
	if f, err := ParseFrame([]byte{2, 2, 0, 1, 'x'}); err != nil || f.Present {
		t.Errorf("presence byte 2: %+v %v", f, err)
	}
	if f, err := ParseFrame([]byte{1, 0, 1, 'x'}); err != nil || len(f.Payload) != 0 {
		t.Errorf("empty payload: %+v %v", f, err)
	}
}

func TestParseFrameHostile(t *testing.T) {
	for _, b := range [][]byte{
		nil, {1}, {1, 0}, {1, 0, 0}, {1, 0, 0, 'x'}, {1, 0, 2, 'x'}, {1, 255, 255},
		{2, 1, 0}, {2, 1, 0, 0}, {2, 1, 0, 2, 'x'}, {0, 0, 0, 0}, {3, 0, 1, 'x'},
	} {
		if _, err := ParseFrame(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseFrame(%x) error %v", b, err)
		}
	}
	big := RoomFrame("t", make([]byte, MaxFrameBytes))
	if _, err := ParseFrame(big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized frame: %v", err)
	}
}

func FuzzParseFrame(f *testing.F) {
	f.Add(RoomFrame(RoomToken("a", "b"), []byte("x")))
	f.Add(PresenceFrame("tok", true))
	f.Add([]byte{1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := ParseFrame(b)
		if err != nil {
			return
		}
		// A frame that parses rebuilds to the same token and payload.
		switch fr.Kind {
		case FrameRoom:
			again, err := ParseFrame(RoomFrame(fr.RoomToken, fr.Payload))
			if err != nil && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("rebuilt room frame: %v", err)
			}
			if err == nil && (again.RoomToken != fr.RoomToken || !bytes.Equal(again.Payload, fr.Payload)) {
				t.Fatalf("room frame round trip: %+v vs %+v", again, fr)
			}
		case FramePresence:
			h, body := ParseAction(fr.Payload)
			_, _ = h, body
		default:
			t.Fatalf("kind %d", fr.Kind)
		}
	})
}
