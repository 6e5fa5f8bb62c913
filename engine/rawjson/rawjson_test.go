package rawjson

import (
	"encoding/json"
	"maps"
	"testing"
)

func TestMembersMatchesUnmarshal(t *testing.T) {
	for _, in := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"_id":"x","_rev":"1-a","n":[1,{"b":"]}"}],"s":"q\"}","t":true,"z":null}`,
		`{"\u005fid":"esc","a" : { "x" : [ ] } , "b":-1.5e3}`, `{"a":"é","a":2}`,
	} {
		want := map[string]json.RawMessage{}
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(in, err)
		}
		got := map[string]json.RawMessage{}
		if !Members([]byte(in), func(k, v []byte) bool { got[string(k)] = v; return true }) {
			t.Fatalf("%s: not an object", in)
		}
		if !maps.EqualFunc(got, want, func(a, b json.RawMessage) bool { return string(a) == string(b) }) {
			t.Errorf("%s: got %q, want %q", in, got, want)
		}
	}
	for _, bad := range []string{``, `[]`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":"x}`, `{"a":[1}`, `{"a":1} x`} {
		if Members([]byte(bad), func(k, v []byte) bool { return true }) {
			t.Errorf("%q: taken for an object", bad)
		}
	}
}

func TestElements(t *testing.T) {
	var got []string
	if !Elements([]byte(` [ {"a":[1,2]} , "s,]" ,3, [] ] `), func(v []byte) bool { got = append(got, string(v)); return true }) {
		t.Fatal("not an array")
	}
	want := []string{`{"a":[1,2]}`, `"s,]"`, `3`, `[]`}
	if len(got) != len(want) {
		t.Fatalf("got %q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("element %d: %q, want %q", i, got[i], want[i])
		}
	}
	if !Elements([]byte(`[]`), func([]byte) bool { t.Fatal("element of []"); return true }) {
		t.Error("[] not an array")
	}
	if s, ok := String([]byte(`"a\nb"`)); !ok || s != "a\nb" {
		t.Errorf("String: %q %v", s, ok)
	}
}
