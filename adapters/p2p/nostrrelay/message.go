//go:build !js

package nostrrelay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nbd-wtf/go-nostr"
)

// The labels of the client messages of NIP-01.
const (
	labelEvent = "EVENT"
	labelReq   = "REQ"
	labelClose = "CLOSE"
)

const (
	// maxSubIDLen is NIP-01's bound on a subscription id.
	maxSubIDLen = 64
	// maxFilterValues bounds each list of a filter (ids, authors, kinds,
	// the values of one tag) and maxFilterTags the tag keys of a filter.
	maxFilterValues = 256
	maxFilterTags   = 8
	// maxLimit bounds the stored events answered per filter; it is also
	// the limit of a filter that gives none.
	maxLimit = 500
	// maxTags bounds the tags of one event.
	maxTags = 64
)

// clientMessage is a decoded NIP-01 client message.
type clientMessage struct {
	Label     string        // labelEvent, labelReq or labelClose
	Event     *nostr.Event  // EVENT
	EventSize int           // EVENT: bytes of the event's JSON
	SubID     string        // REQ, CLOSE
	Filters   nostr.Filters // REQ
}

// decodeError says why a client message was refused. ID is the event id
// (EVENT) or subscription id (REQ) when it could be read, so the answer can
// be an OK or CLOSED for it; otherwise the answer is a NOTICE. Reason
// carries its NIP-01 prefix.
type decodeError struct {
	Label  string
	ID     string
	Reason string
}

// Error is the reason sent back to the client.
func (e *decodeError) Error() string { return e.Reason }

func invalid(label, id, format string, args ...any) *decodeError {
	return &decodeError{Label: label, ID: id, Reason: "invalid: " + fmt.Sprintf(format, args...)}
}

// wireEvent is the JSON form of an event (NIP-01).
type wireEvent struct {
	ID        string     `json:"id"`
	PubKey    string     `json:"pubkey"`
	CreatedAt int64      `json:"created_at"`
	Kind      int        `json:"kind"`
	Tags      [][]string `json:"tags"`
	Content   string     `json:"content"`
	Sig       string     `json:"sig"`
}

// decodeMessage decodes one client message. maxFilters bounds the filters
// of a REQ. It checks the shape of what it decodes (hex lengths, bounds),
// not signatures or the relay's policy.
func decodeMessage(data []byte, maxFilters int) (clientMessage, error) {
	var parts []json.RawMessage
	if err := json.Unmarshal(data, &parts); err != nil || len(parts) == 0 {
		return clientMessage{}, invalid("", "", "a message is a JSON array whose first element is its label")
	}
	var label string
	if err := json.Unmarshal(parts[0], &label); err != nil {
		return clientMessage{}, invalid("", "", "a message is a JSON array whose first element is its label")
	}
	switch label {
	case labelEvent:
		if len(parts) != 2 {
			return clientMessage{}, invalid(label, "", "EVENT takes exactly one event")
		}
		ev, err := decodeEvent(parts[1])
		if err != nil {
			return clientMessage{}, err
		}
		return clientMessage{Label: label, Event: ev, EventSize: len(parts[1])}, nil
	case labelReq:
		return decodeReq(parts, maxFilters)
	case labelClose:
		var id string
		if len(parts) != 2 || json.Unmarshal(parts[1], &id) != nil || !validSubID(id) {
			return clientMessage{}, invalid(label, "", "CLOSE takes one subscription id")
		}
		return clientMessage{Label: label, SubID: id}, nil
	default:
		if len(label) > 16 {
			label = label[:16]
		}
		return clientMessage{}, &decodeError{Reason: "unsupported: " + strconv.Quote(label) + " messages are not supported by this relay"}
	}
}

func decodeEvent(raw json.RawMessage) (*nostr.Event, error) {
	var w wireEvent
	if err := json.Unmarshal(raw, &w); err != nil {
		// Answer for the id when the rest is malformed.
		var idOnly struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(raw, &idOnly)
		id := ""
		if isHex(idOnly.ID, 64) {
			id = idOnly.ID
		}
		return nil, invalid(labelEvent, id, "malformed event")
	}
	if !isHex(w.ID, 64) {
		return nil, invalid(labelEvent, "", "event id is not 64 lowercase hex digits")
	}
	switch {
	case !isHex(w.PubKey, 64):
		return nil, invalid(labelEvent, w.ID, "pubkey is not 64 lowercase hex digits")
	case !isHex(w.Sig, 128):
		return nil, invalid(labelEvent, w.ID, "sig is not 128 lowercase hex digits")
	case w.Kind < 0 || w.Kind > 65535:
		return nil, invalid(labelEvent, w.ID, "kind out of range")
	case w.CreatedAt < 0:
		return nil, invalid(labelEvent, w.ID, "created_at out of range")
	case len(w.Tags) > maxTags:
		return nil, invalid(labelEvent, w.ID, "more than %d tags", maxTags)
	}
	tags := make(nostr.Tags, 0, len(w.Tags))
	for _, t := range w.Tags {
		if len(t) == 0 {
			return nil, invalid(labelEvent, w.ID, "empty tag")
		}
		tags = append(tags, nostr.Tag(t))
	}
	return &nostr.Event{
		ID: w.ID, PubKey: w.PubKey, CreatedAt: nostr.Timestamp(w.CreatedAt), Kind: w.Kind,
		Tags: tags, Content: w.Content, Sig: w.Sig,
	}, nil
}

func decodeReq(parts []json.RawMessage, maxFilters int) (clientMessage, error) {
	var id string
	if len(parts) < 2 || json.Unmarshal(parts[1], &id) != nil || !validSubID(id) {
		return clientMessage{}, invalid(labelReq, "", "REQ takes a subscription id of 1 to %d characters", maxSubIDLen)
	}
	if len(parts) < 3 {
		return clientMessage{}, invalid(labelReq, id, "REQ takes at least one filter")
	}
	if len(parts)-2 > maxFilters {
		return clientMessage{}, invalid(labelReq, id, "at most %d filters per REQ", maxFilters)
	}
	filters := make(nostr.Filters, 0, len(parts)-2)
	for _, raw := range parts[2:] {
		f, err := decodeFilter(raw)
		if err != nil {
			return clientMessage{}, invalid(labelReq, id, "%s", err.Error())
		}
		filters = append(filters, f)
	}
	return clientMessage{Label: labelReq, SubID: id, Filters: filters}, nil
}

// decodeFilter decodes one NIP-01 filter. Keys it does not know (search,
// for one) are ignored; a filter without a limit gets maxLimit, and a
// larger limit is lowered to it.
func decodeFilter(raw json.RawMessage) (nostr.Filter, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nostr.Filter{}, fmt.Errorf("a filter is a JSON object")
	}
	f := nostr.Filter{Limit: maxLimit}
	for key, val := range fields {
		var err error
		switch {
		case key == "ids":
			f.IDs, err = decodeStrings(val)
		case key == "authors":
			f.Authors, err = decodeStrings(val)
		case key == "kinds":
			err = decodeBounded(val, &f.Kinds)
		case key == "since":
			f.Since, err = decodeTimestamp(val)
		case key == "until":
			f.Until, err = decodeTimestamp(val)
		case key == "limit":
			err = decodeLimit(val, &f)
		case len(key) == 2 && key[0] == '#' && isLetter(key[1]):
			if f.Tags == nil {
				f.Tags = nostr.TagMap{}
			}
			if len(f.Tags) >= maxFilterTags {
				return nostr.Filter{}, fmt.Errorf("at most %d tag conditions per filter", maxFilterTags)
			}
			f.Tags[key[1:]], err = decodeStrings(val)
		}
		if err != nil {
			return nostr.Filter{}, fmt.Errorf("filter %q: %v", key, err)
		}
	}
	return f, nil
}

func decodeStrings(val json.RawMessage) ([]string, error) {
	var out []string
	if err := decodeBounded(val, &out); err != nil {
		return nil, err
	}
	for _, s := range out {
		if len(s) > 256 {
			return nil, fmt.Errorf("value longer than 256 bytes")
		}
	}
	return out, nil
}

// decodeBounded decodes a JSON array of at most maxFilterValues elements
// into out; a non-nil empty slice matches nothing, as in NIP-01.
func decodeBounded[T any](val json.RawMessage, out *[]T) error {
	if err := json.Unmarshal(val, out); err != nil {
		return fmt.Errorf("not an array of the right type")
	}
	if *out == nil {
		*out = []T{}
	}
	if len(*out) > maxFilterValues {
		return fmt.Errorf("more than %d values", maxFilterValues)
	}
	return nil
}

func decodeTimestamp(val json.RawMessage) (*nostr.Timestamp, error) {
	var n int64
	if err := json.Unmarshal(val, &n); err != nil || n < 0 {
		return nil, fmt.Errorf("not a non-negative integer")
	}
	ts := nostr.Timestamp(n)
	return &ts, nil
}

func decodeLimit(val json.RawMessage, f *nostr.Filter) error {
	var n int64
	if err := json.Unmarshal(val, &n); err != nil || n < 0 {
		return fmt.Errorf("not a non-negative integer")
	}
	f.Limit = int(min(n, maxLimit))
	f.LimitZero = n == 0
	return nil
}

func validSubID(id string) bool { return id != "" && len(id) <= maxSubIDLen }

func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

// isHex reports whether s is n lowercase hexadecimal digits.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Relay messages (NIP-01). Subscription ids are client text: they are
// JSON-encoded here, never spliced in raw.

func okMessage(id string, ok bool, reason string) []byte {
	return mustJSON([]any{"OK", id, ok, reason})
}

func closedMessage(subID, reason string) []byte { return mustJSON([]any{"CLOSED", subID, reason}) }

func noticeMessage(text string) []byte { return mustJSON([]any{"NOTICE", text}) }

func eoseMessage(subID string) []byte { return mustJSON([]any{"EOSE", subID}) }

// eventMessage frames the JSON of an event (eventJSON) for a subscription.
func eventMessage(subID string, eventJSON []byte) []byte {
	id := mustJSON(subID)
	var b bytes.Buffer
	b.Grow(len(`["EVENT",,]`) + len(id) + len(eventJSON))
	b.WriteString(`["EVENT",`)
	b.Write(id)
	b.WriteByte(',')
	b.Write(eventJSON)
	b.WriteByte(']')
	return b.Bytes()
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("nostrrelay: encode relay message: " + err.Error())
	}
	return b
}
