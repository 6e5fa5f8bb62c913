package rpcroom

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Wire kinds: the "wire" field of a message on the rpc2 action.
const (
	WireRaw      = "raw"       // one whole envelope in payload
	WireChunk    = "chunk"     // part index of total of stream streamId
	WireChunkAck = "chunk-ack" // the receiver's missing indices; empty = done
)

// Wire is one decoded message of the rpc2 action (commonlib
// src/rpc/types.ts RpcWireMessage). Payload is WTF-8: the payload
// string's text as UTF-8, except that a surrogate not paired within this
// message is kept as its 3-byte encoding (ED A0..BF xx) so that a pair
// split between two chunks re-forms when their payloads are joined.
type Wire struct {
	Kind     string
	StreamID string
	Index    int
	Total    int
	Payload  []byte
	Missing  []int
}

// EncodeRaw returns the wire message {"wire":"raw","payload":…} carrying
// the envelope JSON text env, as JSON.stringify writes it.
func EncodeRaw(env []uint16) []byte {
	b := append(make([]byte, 0, len(env)+32), `{"wire":"raw","payload":`...)
	return append(appendQuoted(b, env), '}')
}

// EncodeChunk returns the wire message {"wire":"chunk","streamId",
// "index","total","payload"} as JSON.stringify writes it; part may begin
// or end with half of a surrogate pair, written as a \udxxx escape.
func EncodeChunk(streamID string, index, total int, part []uint16) []byte {
	b := append(make([]byte, 0, len(part)+64+len(streamID)), `{"wire":"chunk","streamId":`...)
	b = appendQuoted(b, jsUnits(streamID))
	b = append(b, `,"index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"total":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	b = append(b, `,"payload":`...)
	return append(appendQuoted(b, part), '}')
}

// EncodeChunkAck returns the wire message {"wire":"chunk-ack","streamId",
// "missing":[…]}; an empty missing list tells the sender the stream is
// complete.
func EncodeChunkAck(streamID string, missing []int) []byte {
	b := append(make([]byte, 0, 64+len(streamID)+8*len(missing)), `{"wire":"chunk-ack","streamId":`...)
	b = appendQuoted(b, jsUnits(streamID))
	b = append(b, `,"missing":[`...)
	for i, m := range missing {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(m), 10)
	}
	return append(b, "]}"...)
}

// wireFields is the JSON shape of any wire message; payload stays raw so
// that its lone surrogates survive.
type wireFields struct {
	Wire     string          `json:"wire"`
	StreamID *string         `json:"streamId"`
	Index    *float64        `json:"index"`
	Total    *float64        `json:"total"`
	Payload  json.RawMessage `json:"payload"`
	Missing  []float64       `json:"missing"`
}

// DecodeWire parses one rpc2 wire message. It checks the shape commonlib
// relies on: a known wire kind, a string payload for raw and chunk, a
// string streamId, integer index and total with 0 <= index < total for a
// chunk, and a list of integers for chunk-ack. Errors wrap ErrMalformed.
func DecodeWire(msg []byte) (Wire, error) {
	var f wireFields
	if err := json.Unmarshal(msg, &f); err != nil {
		return Wire{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	w := Wire{Kind: f.Wire}
	switch f.Wire {
	case WireRaw, WireChunk:
		p, err := unquoteWTF8(f.Payload)
		if err != nil {
			return Wire{}, fmt.Errorf("%w: payload: %v", ErrMalformed, err)
		}
		w.Payload = p
		if f.Wire == WireRaw {
			return w, nil
		}
	case WireChunkAck:
		w.Missing = make([]int, 0, len(f.Missing))
		for _, m := range f.Missing {
			i, ok := jsInt(&m)
			if !ok {
				return Wire{}, fmt.Errorf("%w: chunk-ack index %v", ErrMalformed, m)
			}
			w.Missing = append(w.Missing, i)
		}
	default:
		return Wire{}, fmt.Errorf("%w: unknown wire kind %q", ErrMalformed, f.Wire)
	}
	if f.StreamID == nil {
		return Wire{}, fmt.Errorf("%w: %s without streamId", ErrMalformed, f.Wire)
	}
	w.StreamID = *f.StreamID
	if f.Wire == WireChunkAck {
		return w, nil
	}
	idx, ok1 := jsInt(f.Index)
	total, ok2 := jsInt(f.Total)
	if !ok1 || !ok2 || total < 1 || idx < 0 || idx >= total {
		return Wire{}, fmt.Errorf("%w: chunk index/total out of range", ErrMalformed)
	}
	w.Index, w.Total = idx, total
	return w, nil
}

// jsInt reports the integer value of a JSON number that is a safe
// integer.
func jsInt(f *float64) (int, bool) {
	if f == nil || *f != math.Trunc(*f) || math.Abs(*f) > 1<<53-1 {
		return 0, false
	}
	return int(*f), true
}

// jsUnits returns the UTF-16 code units of the Go string s.
func jsUnits(s string) []uint16 {
	return wtf8Units([]byte(s))
}
