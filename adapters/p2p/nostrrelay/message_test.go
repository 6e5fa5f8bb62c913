//go:build !js

package nostrrelay

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

func TestDecodeMessage(t *testing.T) {
	id := strings.Repeat("ab", 32)
	cases := []struct {
		msg, label, errID, prefix string
	}{
		{`["CLOSE","s"]`, labelClose, "", ""},
		{`["REQ","s",{"kinds":[30078],"#d":["x"],"since":1,"until":2,"limit":9999}]`, labelReq, "", ""},
		{`["REQ","s",{"#dd":["x"],"search":"q"}]`, labelReq, "", ""}, // unknown keys ignored
		{`["REQ","s"]`, labelReq, "s", "invalid:"},
		{`["REQ","s",{"limit":-1}]`, labelReq, "s", "invalid:"},
		{`["REQ","s",{"kinds":"x"}]`, labelReq, "s", "invalid:"},
		{`["REQ","",{}]`, labelReq, "", "invalid:"},
		{`["EVENT",{"id":"` + id + `"}]`, labelEvent, id, "invalid: pubkey"},
		{`["EVENT",{"id":"` + id + `","created_at":"now"}]`, labelEvent, id, "invalid: malformed"},
		{`["EVENT",{"id":"AB"}]`, labelEvent, "", "invalid:"},
		{`["EVENT"]`, labelEvent, "", "invalid:"},
		{`["COUNT","s",{}]`, "", "", "unsupported:"},
		{`{}`, "", "", "invalid:"},
		{`[1]`, "", "", "invalid:"},
	}
	for _, tc := range cases {
		m, err := decodeMessage([]byte(tc.msg), 8)
		if tc.prefix == "" {
			if err != nil || m.Label != tc.label {
				t.Errorf("%s: %+v %v", tc.msg, m, err)
			}
			continue
		}
		var de *decodeError
		if !errors.As(err, &de) || de.Label != tc.label || de.ID != tc.errID || !strings.HasPrefix(de.Reason, tc.prefix) {
			t.Errorf("%s: error %+v, want label %q id %q prefix %q", tc.msg, de, tc.label, tc.errID, tc.prefix)
		}
	}
	m, _ := decodeMessage([]byte(`["REQ","s",{"limit":9999}]`), 8)
	if m.Filters[0].Limit != maxLimit {
		t.Errorf("limit %d, want it lowered to %d", m.Filters[0].Limit, maxLimit)
	}
	m, _ = decodeMessage([]byte(`["REQ","s",{"limit":0}]`), 8)
	if !m.Filters[0].LimitZero {
		t.Error("limit 0 not kept")
	}
}

// TestEventRoundTrip: a signed event decodes to one whose id and
// signature still verify.
func TestEventRoundTrip(t *testing.T) {
	ev := event(t, nostr.GeneratePrivateKey(), KindAnnouncement, "room", time.Now(), time.Now().Add(time.Minute), "a \"quoted\" \u2028 line")
	b, _ := json.Marshal([]any{"EVENT", ev})
	m, err := decodeMessage(b, 8)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Event.CheckID() {
		t.Fatal("id does not verify after decoding")
	}
	if ok, _ := m.Event.CheckSignature(); !ok {
		t.Fatal("signature does not verify after decoding")
	}
}

func FuzzDecodeMessage(f *testing.F) {
	id := strings.Repeat("ab", 32)
	for _, seed := range []string{
		`["CLOSE","s"]`,
		`["REQ","s",{"kinds":[30078],"#d":["x"],"since":1,"limit":5},{"ids":["` + id + `"],"authors":[]}]`,
		`["EVENT",{"id":"` + id + `","pubkey":"` + id + `","created_at":1,"kind":30078,"tags":[["d","x"],["expiration","9"]],"content":"c","sig":"` + id + id + `"}]`,
		`["EVENT","s",{}]`, `[]`, `[null]`, `"EVENT"`, `["REQ","s",{"#":[]}]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeMessage(data, 4)
		if err != nil {
			var de *decodeError
			if !errors.As(err, &de) || de.Reason == "" {
				t.Fatalf("error %v is not a *decodeError with a reason", err)
			}
			if de.ID != "" && len(de.ID) > maxSubIDLen {
				t.Fatalf("id %q too long to answer for", de.ID)
			}
			return
		}
		switch m.Label {
		case labelEvent:
			ev := m.Event
			if !isHex(ev.ID, 64) || !isHex(ev.PubKey, 64) || !isHex(ev.Sig, 128) || len(ev.Tags) > maxTags {
				t.Fatalf("accepted a malformed event %+v", ev)
			}
			ev.CheckID() // must not panic
			_, _ = ev.CheckSignature()
		case labelReq:
			if !validSubID(m.SubID) || len(m.Filters) == 0 || len(m.Filters) > 4 {
				t.Fatalf("accepted REQ %q with %d filters", m.SubID, len(m.Filters))
			}
			for _, f := range m.Filters {
				if f.Limit > maxLimit || f.Limit < 0 || len(f.Tags) > maxFilterTags {
					t.Fatalf("filter out of bounds: %+v", f)
				}
			}
		case labelClose:
			if !validSubID(m.SubID) {
				t.Fatalf("accepted CLOSE %q", m.SubID)
			}
		default:
			t.Fatalf("label %q", m.Label)
		}
	})
}
