package rpcroom

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"unicode/utf16"
)

// TestEncodeWire pins the wire messages as JSON.stringify wrote them in
// Node 20 (object keys in commonlib's order; a lone half of a pair as a
// \udxxx escape).
func TestEncodeWire(t *testing.T) {
	emojiTail := []uint16{0xD83D, 0xDE00, 0xD83D}
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"chunk ending in a high surrogate", EncodeChunk("stream-x", 0, 2, emojiTail),
			`{"wire":"chunk","streamId":"stream-x","index":0,"total":2,"payload":"😀\ud83d"}`},
		{"chunk starting with a low surrogate", EncodeChunk("stream-x", 0, 3, []uint16{0xDE00, 0xD83D, 0xDE00}),
			`{"wire":"chunk","streamId":"stream-x","index":0,"total":3,"payload":"\ude00😀"}`},
		{"raw", EncodeRaw(utf16.Encode([]rune(`{"kind":"cancel","requestId":"req-1"}`))),
			`{"wire":"raw","payload":"{\"kind\":\"cancel\",\"requestId\":\"req-1\"}"}`},
		{"ack missing", EncodeChunkAck("stream-x", []int{1, 3}), `{"wire":"chunk-ack","streamId":"stream-x","missing":[1,3]}`},
		{"ack done", EncodeChunkAck("stream-x", nil), `{"wire":"chunk-ack","streamId":"stream-x","missing":[]}`},
	}
	for _, tt := range tests {
		if string(tt.got) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, tt.got, tt.want)
		}
	}
}

func TestDecodeWire(t *testing.T) {
	w, err := DecodeWire([]byte(`{"wire":"chunk","streamId":"s","index":1,"total":2,"payload":"\ude00b"}`))
	if err != nil {
		t.Fatal(err)
	}
	if w.Kind != WireChunk || w.StreamID != "s" || w.Index != 1 || w.Total != 2 {
		t.Errorf("decoded %+v", w)
	}
	if got := wtf8Units(w.Payload); !slices.Equal(got, []uint16{0xDE00, 'b'}) {
		t.Errorf("payload units %x", got)
	}
	w, err = DecodeWire([]byte(`{"wire":"chunk-ack","streamId":"s","missing":[0,2]}`))
	if err != nil || !slices.Equal(w.Missing, []int{0, 2}) {
		t.Errorf("ack: %+v, %v", w, err)
	}
	w, err = DecodeWire([]byte(`{"wire":"chunk-ack","streamId":"s","missing":[]}`))
	if err != nil || w.Missing == nil || len(w.Missing) != 0 {
		t.Errorf("empty ack: %+v, %v", w, err)
	}
}

// TestDecodeWireHostile: messages a hostile or broken peer might send are
// rejected with ErrMalformed rather than reaching reassembly.
func TestDecodeWireHostile(t *testing.T) {
	for _, msg := range []string{
		``, `null`, `[]`, `{"wire":"bogus"}`, `{"payload":"x"}`,
		`{"wire":"raw"}`, `{"wire":"raw","payload":1}`, `{"wire":"raw","payload":"\x"}`,
		`{"wire":"chunk","index":0,"total":1,"payload":"x"}`,
		`{"wire":"chunk","streamId":"s","total":1,"payload":"x"}`,
		`{"wire":"chunk","streamId":"s","index":-1,"total":2,"payload":"x"}`,
		`{"wire":"chunk","streamId":"s","index":2,"total":2,"payload":"x"}`,
		`{"wire":"chunk","streamId":"s","index":0.5,"total":2,"payload":"x"}`,
		`{"wire":"chunk","streamId":"s","index":"0","total":2,"payload":"x"}`,
		`{"wire":"chunk","streamId":"s","index":0,"total":0,"payload":"x"}`,
		`{"wire":"chunk","streamId":"s","index":0,"total":1e300,"payload":"x"}`,
		`{"wire":"chunk","streamId":1,"index":0,"total":2,"payload":"x"}`,
		`{"wire":"chunk-ack","streamId":"s","missing":[0.5]}`,
		`{"wire":"chunk-ack","streamId":"s","missing":["a"]}`,
		`{"wire":"chunk-ack","missing":[]}`,
	} {
		if _, err := DecodeWire([]byte(msg)); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeWire(%s) err = %v, want ErrMalformed", msg, err)
		}
	}
}

// FuzzDecodeWire: the decoder never panics, accepts only messages within
// its stated invariants, and what it accepts re-encodes to a message that
// decodes the same.
func FuzzDecodeWire(f *testing.F) {
	for _, s := range []string{
		`{"wire":"raw","payload":"{\"kind\":\"handshake\",\"versionMajor\":1,\"versionMinor\":0}"}`,
		`{"wire":"chunk","streamId":"stream-a","index":0,"total":2,"payload":"😀\ud83d"}`,
		`{"wire":"chunk","streamId":"stream-a","index":1,"total":2,"payload":"\ude00"}`,
		`{"wire":"chunk-ack","streamId":"stream-a","missing":[1]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		w, err := DecodeWire(msg)
		if err != nil {
			return
		}
		var again []byte
		switch w.Kind {
		case WireRaw:
			again = EncodeRaw(wtf8Units(w.Payload))
		case WireChunk:
			if w.Index < 0 || w.Index >= w.Total {
				t.Fatalf("index %d of %d accepted", w.Index, w.Total)
			}
			again = EncodeChunk(w.StreamID, w.Index, w.Total, wtf8Units(w.Payload))
		case WireChunkAck:
			again = EncodeChunkAck(w.StreamID, w.Missing)
		default:
			t.Fatalf("kind %q accepted", w.Kind)
		}
		w2, err := DecodeWire(again)
		if err != nil {
			t.Fatalf("re-encoded %s: %v", again, err)
		}
		if w2.Kind != w.Kind || w2.StreamID != w.StreamID || w2.Index != w.Index || w2.Total != w.Total ||
			!bytes.Equal(w2.Payload, w.Payload) || !slices.Equal(w2.Missing, w.Missing) {
			t.Fatalf("round trip changed %+v to %+v", w, w2)
		}
	})
}
