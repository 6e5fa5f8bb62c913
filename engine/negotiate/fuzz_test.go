package negotiate

import (
	"bytes"
	"encoding/json"
	"testing"
)

func FuzzParseSyncParameters(f *testing.F) {
	f.Add(localDocs(f, "vault-dump-e2ee.json")[SyncParametersDocID])
	f.Add(readVector(f, "journal/e2ee/"+JournalSyncParametersKey))
	for _, s := range []string{``, `null`, `{}`, `{"pbkdf2salt":""}`, `{"protocolVersion":1e400}`, `{"pbkdf2salt":"A=A="}`, `{"x":1,"x":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseSyncParameters(data)
		if err != nil {
			return
		}
		_, _ = p.Salt()
		_, _ = NeedsNewSalt(&p, nil)
		_ = JournalEpoch(p)
		out, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("parsed document does not encode: %v", err)
		}
		q, err := ParseSyncParameters(out)
		if err != nil {
			t.Fatalf("re-parse: %v\n%s", err, out)
		}
		if out2, _ := json.Marshal(q); !bytes.Equal(out, out2) {
			t.Fatalf("round trip not stable:\n%s\n%s", out, out2)
		}
	})
}

func FuzzParseMilestone(f *testing.F) {
	for _, v := range vectorMilestones(f) {
		f.Add(v.raw)
	}
	for _, s := range []string{``, `null`, `{}`, `{"accepted_nodes":["a","b"],"locked":true,"node_chunk_info":{"a":null}}`,
		`{"tweak_values":{"PREFERRED":null,"me":{"encrypt":true}}}`, `{"node_info":{"me":null}}`, `{"created":9007199254740993}`} {
		f.Add([]byte(s))
	}
	tweaks := ShouldMatchTemplate()
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMilestone(data)
		if err != nil {
			return
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("parsed milestone does not encode: %v", err)
		}
		m2, err := ParseMilestone(out)
		if err != nil {
			t.Fatalf("re-parse: %v\n%s", err, out)
		}
		if out2, _ := json.Marshal(m2); !bytes.Equal(out, out2) {
			t.Fatalf("round trip not stable:\n%s\n%s", out, out2)
		}
		for _, me := range append([]string{"me", PreferredNode}, m.AcceptedNodes...) {
			v := Check(m, me, CouchDBChunkRange, tweaks, CheckOptions{})
			_ = v.Err()
			if own, ok := m.TweakValues[me]; ok {
				_ = Check(m, me, JournalChunkRange, own, CheckOptions{})
			}
		}
		c := m.Clone()
		c.Register("me", CouchDBChunkRange, DeviceInfo{}, tweaks, t0)
		c.Accept("me", CouchDBChunkRange)
		c.Lock("me", CouchDBChunkRange, true)
		c.Unlock("me", CouchDBChunkRange)
		if _, err := json.Marshal(c); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzParseVersionDoc(f *testing.F) {
	for _, s := range []string{`{"_id":"obsydian_livesync_version","type":"versioninfo","version":12}`, `{"version":"0x1F"}`, `{"version":[12]}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseVersionDoc(data)
		if err != nil {
			return
		}
		v, err := CheckVersion(&d)
		if (err != nil) != (v == VersionIncompatible) {
			t.Fatalf("verdict %v with err %v", v, err)
		}
		_, _ = json.Marshal(d)
	})
}

func FuzzTweakMismatch(f *testing.F) {
	f.Add([]byte(`{"encrypt":true,"hashAlg":"x"}`), []byte(`{"encrypt":false,"hashAlg":[1,{"a":null}]}`))
	f.Add([]byte(`null`), []byte(`{"customChunkSize":1e999}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var p, c TweakValues
		if json.Unmarshal(a, &p) != nil || json.Unmarshal(b, &c) != nil {
			return
		}
		d := TweakMismatch(p, c)
		// A set never mismatches itself once defaults are applied to it.
		if self := TweakMismatch(c, c.WithDefaults()); len(self) != 0 {
			t.Fatalf("self mismatch: %s", diffString(self))
		}
		for _, x := range d {
			if x.Impact == ImpactNone {
				t.Fatalf("diff on a non must-match key %q", x.Key)
			}
		}
	})
}
