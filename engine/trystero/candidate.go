package trystero

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/livesync-go/livesync-go/engine/jsstring"
)

// ICECandidate is the plaintext of a sealed "candidate" signal: Trystero
// seals JSON.stringify(RTCIceCandidate.toJSON()) (trystero core dist
// peer.mjs onicecandidate), an object with the four members below, null
// where the browser has no value. Offers and answers are sealed as the
// bare SDP text instead.
type ICECandidate struct {
	Candidate        string  `json:"candidate"`
	SDPMid           *string `json:"sdpMid"`
	SDPMLineIndex    *uint16 `json:"sdpMLineIndex"`
	UsernameFragment *string `json:"usernameFragment"`
}

// Encode returns the candidate as a browser's toJSON and JSON.stringify
// write it: {"candidate","sdpMid","sdpMLineIndex","usernameFragment"}.
func (c ICECandidate) Encode() string {
	str := func(b []byte, p *string) []byte {
		if p == nil {
			return append(b, "null"...)
		}
		return jsstring.AppendJSONString(b, *p)
	}
	b := append([]byte(`{"candidate":`), jsstring.AppendJSONString(nil, c.Candidate)...)
	b = str(append(b, `,"sdpMid":`...), c.SDPMid)
	b = append(b, `,"sdpMLineIndex":`...)
	if c.SDPMLineIndex == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendUint(b, uint64(*c.SDPMLineIndex), 10)
	}
	b = str(append(b, `,"usernameFragment":`...), c.UsernameFragment)
	return string(append(b, '}'))
}

// DecodeCandidate reads an opened candidate signal. Trystero hands any
// JSON object to addIceCandidate; anything else is an error wrapping
// ErrMalformed.
func DecodeCandidate(plain string) (ICECandidate, error) {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(plain), &obj) != nil || obj == nil {
		return ICECandidate{}, fmt.Errorf("%w: candidate is not a JSON object", ErrMalformed)
	}
	var c ICECandidate
	c.Candidate, _ = jsonString(obj["candidate"])
	if v, ok := jsonString(obj["sdpMid"]); ok {
		c.SDPMid = &v
	}
	if v, ok := jsonString(obj["usernameFragment"]); ok {
		c.UsernameFragment = &v
	}
	var idx uint16
	if raw := obj["sdpMLineIndex"]; raw != nil && json.Unmarshal(raw, &idx) == nil && string(raw) != "null" {
		c.SDPMLineIndex = &idx
	}
	return c, nil
}
