package lease

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzDecode feeds hostile stored lease documents to the decoder and to
// the decisions taken on them: never a panic; what cannot be read is
// free (no holder, no state); a state that is kept is JSON, so a holder
// writing it back writes a valid document.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`, `[]`, `"x"`, `{"holder":"a","until":1,"state":{"x":1}}`,
		`{"holder":"a","until":-1}`, `{"holder":"a","until":9223372036854775807}`,
		`{"holder":"a","until":1e300}`, `{"holder":7}`, `{"state":null}`, `{"state":"\ud800"}`,
		`{"holder":"a","holder":"b"}`, `{"until":"soon"}`,
	} {
		f.Add([]byte(s))
	}
	now := time.Unix(1_000_000, 0)
	f.Fuzz(func(t *testing.T, b []byte) {
		var raw json.RawMessage
		if len(b) > 0 {
			raw = b
		}
		d := decode(raw)
		if !json.Valid(b) && (d.Holder != "" || d.Until != 0 || d.State != nil) {
			t.Fatalf("%q is not JSON but decodes to %+v", b, d)
		}
		if d.State != nil && !json.Valid(d.State) {
			t.Fatalf("%q: kept state %q is not JSON", b, d.State)
		}
		_ = d.live(now)
		l := New(nil, Config{Holder: "me"})
		d.Holder, d.Until = l.cfg.Holder, now.Add(l.cfg.TTL).UnixMilli()
		out, err := l.encode(d)
		if err != nil || !json.Valid(out) {
			t.Fatalf("%q: re-encoded %q (%v)", b, out, err)
		}
		if back := decode(out); back.Holder != "me" || !back.live(now) {
			t.Fatalf("%q: the taken lease reads back as %+v", b, back)
		}
	})
}
