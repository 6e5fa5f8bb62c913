package negotiate

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
)

// tv builds a tweak set from a JSON object literal, keeping its order.
func tv(t testing.TB, obj string) TweakValues {
	t.Helper()
	var v TweakValues
	if err := json.Unmarshal([]byte(obj), &v); err != nil {
		t.Fatalf("tv(%s): %v", obj, err)
	}
	return v
}

func TestTweakTables(t *testing.T) {
	// The "must match" tweak keys: the 18 keys with their template values.
	want := `{"minimumChunkSize":20,"longLineThreshold":250,"encrypt":false,"usePathObfuscation":false,` +
		`"enableCompression":false,"useEden":false,"customChunkSize":0,"useDynamicIterationCount":false,` +
		`"hashAlg":"xxhash64","enableChunkSplitterV2":false,"maxChunksInEden":10,"maxTotalLengthInEden":1024,` +
		`"maxAgeInEden":10,"usePluginSyncV2":false,"handleFilenameCaseSensitive":false,"useSegmenter":false,` +
		`"E2EEAlgorithm":"v2","chunkSplitterVersion":"v3-rabin-karp"}`
	if got, _ := json.Marshal(ShouldMatchTemplate()); string(got) != want {
		t.Errorf("ShouldMatchTemplate =\n%s\nwant\n%s", got, want)
	}
	if got := TweakDefaults(); !got.Equal(tv(t, `{"usePluginSyncV2":false,"E2EEAlgorithm":"v2","chunkSplitterVersion":"v3-rabin-karp"}`)) {
		t.Errorf("TweakDefaults = %v", got.Keys())
	}
	keys := TemplateKeys()
	if len(keys) != 31 || keys[0] != "useIgnoreFiles" || keys[29] != "useSegmenter" || keys[30] != "tweakModified" {
		t.Errorf("TemplateKeys = %v", keys)
	}
	for _, tc := range []struct {
		key  string
		want Impact
	}{
		{"encrypt", ImpactBreaking},
		{"usePathObfuscation", ImpactBreaking},
		{"useDynamicIterationCount", ImpactBreaking},
		{"handleFilenameCaseSensitive", ImpactBreaking},
		{"hashAlg", ImpactLossy},
		{"customChunkSize", ImpactLossy},
		{"chunkSplitterVersion", ImpactLossy},
		{"minimumChunkSize", ImpactMustMatch},
		{"E2EEAlgorithm", ImpactMustMatch},
		{"batch_size", ImpactNone},
		{"tweakModified", ImpactNone},
	} {
		if got := ImpactOf(tc.key); got != tc.want {
			t.Errorf("ImpactOf(%s) = %v, want %v", tc.key, got, tc.want)
		}
	}
}

func TestTweakMismatch(t *testing.T) {
	base := `"encrypt":false,"hashAlg":"xxhash64","customChunkSize":60,"minimumChunkSize":20`
	for _, tc := range []struct {
		name               string
		preferred, current string
		want               []TweakDiff
	}{
		{"equal", `{` + base + `}`, `{` + base + `}`, nil},
		{"key order is irrelevant", `{"hashAlg":"xxhash64","encrypt":false}`, `{"encrypt":false,"hashAlg":"xxhash64"}`, nil},
		{"encrypt differs: breaking", `{"encrypt":true}`, `{"encrypt":false}`,
			[]TweakDiff{{"encrypt", raw(`true`), raw(`false`), ImpactBreaking}}},
		{"hashAlg differs: lossy", `{"hashAlg":"xxhash64"}`, `{"hashAlg":"sha1"}`,
			[]TweakDiff{{"hashAlg", raw(`"xxhash64"`), raw(`"sha1"`), ImpactLossy}}},
		{"must-match key", `{"minimumChunkSize":20}`, `{"minimumChunkSize":40}`,
			[]TweakDiff{{"minimumChunkSize", raw(`20`), raw(`40`), ImpactMustMatch}}},
		{"several, in ShouldMatchKeys order", `{"hashAlg":"a","encrypt":true,"customChunkSize":0}`, `{"customChunkSize":60,"encrypt":false,"hashAlg":"b"}`,
			[]TweakDiff{
				{"encrypt", raw(`true`), raw(`false`), ImpactBreaking},
				{"customChunkSize", raw(`0`), raw(`60`), ImpactLossy},
				{"hashAlg", raw(`"a"`), raw(`"b"`), ImpactLossy},
			}},
		{"recommended keys are not compared", `{"batch_size":25,"tweakModified":1}`, `{"batch_size":50,"tweakModified":2}`, nil},
		{"key only in preferred is skipped", `{"encrypt":true}`, `{}`, nil},
		{"key only in current is skipped", `{}`, `{"encrypt":true}`, nil},
		{"default fills preferred: E2EEAlgorithm", `{}`, `{"E2EEAlgorithm":""}`,
			[]TweakDiff{{"E2EEAlgorithm", raw(`"v2"`), raw(`""`), ImpactMustMatch}}},
		{"default fills preferred: usePluginSyncV2", `{}`, `{"usePluginSyncV2":true}`,
			[]TweakDiff{{"usePluginSyncV2", raw(`false`), raw(`true`), ImpactMustMatch}}},
		{"default fills preferred: chunkSplitterVersion", `{}`, `{"chunkSplitterVersion":"v2"}`,
			[]TweakDiff{{"chunkSplitterVersion", raw(`"v3-rabin-karp"`), raw(`"v2"`), ImpactLossy}}},
		{"defaults never fill current (extractObject leaves it undefined)", `{"E2EEAlgorithm":"forceV1"}`, `{}`, nil},
		{"stored value wins over default", `{"E2EEAlgorithm":"forceV1"}`, `{"E2EEAlgorithm":"v2"}`,
			[]TweakDiff{{"E2EEAlgorithm", raw(`"forceV1"`), raw(`"v2"`), ImpactMustMatch}}},
		{"numbers compare as JS numbers", `{"customChunkSize":60}`, `{"customChunkSize":60.0}`, nil},
		{"exponent form", `{"maxTotalLengthInEden":1024}`, `{"maxTotalLengthInEden":1.024e3}`, nil},
		{"string vs number", `{"customChunkSize":"60"}`, `{"customChunkSize":60}`,
			[]TweakDiff{{"customChunkSize", raw(`"60"`), raw(`60`), ImpactLossy}}},
		{"null is a value, not undefined", `{"encrypt":null}`, `{"encrypt":false}`,
			[]TweakDiff{{"encrypt", raw(`null`), raw(`false`), ImpactBreaking}}},
		{"null equals null", `{"encrypt":null}`, `{"encrypt":null}`, nil},
		{"objects compare deeply", `{"hashAlg":{"a":[1,2]}}`, `{"hashAlg":{"a":[1,2.0]}}`, nil},
		{"array vs index-keyed object (isObjectDifferent quirk)", `{"hashAlg":[1,2]}`, `{"hashAlg":{"0":1,"1":2}}`, nil},
		{"array lengths differ", `{"hashAlg":[1]}`, `{"hashAlg":[1,2]}`,
			[]TweakDiff{{"hashAlg", raw(`[1]`), raw(`[1,2]`), ImpactLossy}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := TweakMismatch(tv(t, tc.preferred), tv(t, tc.current))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %s\nwant %s", diffString(got), diffString(tc.want))
			}
		})
	}
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func TestTweakValuesJSON(t *testing.T) {
	for _, tc := range []struct {
		name, in, out string
		err           bool
	}{
		{"order kept", `{"b":1, "a": [true, null], "c":"x"}`, `{"b":1,"a":[true,null],"c":"x"}`, false},
		{"duplicate keeps first position, last value", `{"a":1,"b":2,"a":3}`, `{"a":3,"b":2}`, false},
		{"empty", `{}`, `{}`, false},
		{"null round-trips", `null`, `null`, false},
		{"array", `[1]`, ``, true},
		{"string", `"x"`, ``, true},
		{"truncated", `{"a":1`, ``, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v TweakValues
			err := json.Unmarshal([]byte(tc.in), &v)
			if tc.err {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			out, err := json.Marshal(v)
			if err != nil || string(out) != tc.out {
				t.Errorf("got %s, %v; want %s", out, err, tc.out)
			}
		})
	}
	// Direct decoding reports engine.ErrMalformed.
	var v TweakValues
	if err := v.UnmarshalJSON([]byte(`[1]`)); !errors.Is(err, engine.ErrMalformed) {
		t.Errorf("err = %v", err)
	}
}

func TestTweakValuesAccessors(t *testing.T) {
	var v TweakValues
	if err := v.Set("encrypt", true); err != nil {
		t.Fatal(err)
	}
	_ = v.Set("hashAlg", "xxhash64")
	_ = v.Set("customChunkSize", 60)
	_ = v.Set("encrypt", false) // keeps position
	if err := v.Set("bad", func() {}); !errors.Is(err, engine.ErrMalformed) {
		t.Errorf("Set(func) err = %v", err)
	}
	if err := v.SetRaw("bad", json.RawMessage(`{`)); !errors.Is(err, engine.ErrMalformed) {
		t.Errorf("SetRaw err = %v", err)
	}
	if got := strings.Join(v.Keys(), ","); got != "encrypt,hashAlg,customChunkSize" {
		t.Errorf("keys = %s", got)
	}
	if b, ok := v.Bool("encrypt"); b || !ok {
		t.Errorf("Bool = %v %v", b, ok)
	}
	if _, ok := v.Bool("hashAlg"); ok {
		t.Error("Bool of a string")
	}
	if s, ok := v.String("hashAlg"); s != "xxhash64" || !ok {
		t.Errorf("String = %q %v", s, ok)
	}
	if n, ok := v.Number("customChunkSize"); n != 60 || !ok {
		t.Errorf("Number = %v %v", n, ok)
	}
	c := v.Clone()
	c.Delete("hashAlg")
	c.Delete("absent")
	if !v.Has("hashAlg") || c.Has("hashAlg") || c.Len() != 2 {
		t.Error("Clone shares storage or Delete failed")
	}
	if v.Equal(c) || !v.Equal(v.Clone()) {
		t.Error("Equal")
	}
	e := v.Extract([]string{"customChunkSize", "missing", "encrypt"})
	if got := strings.Join(e.Keys(), ","); got != "customChunkSize,encrypt" {
		t.Errorf("Extract keys = %s", got)
	}
	w := tv(t, `{"E2EEAlgorithm":"","x":1}`).WithDefaults()
	if got, _ := json.Marshal(w); string(got) != `{"usePluginSyncV2":false,"E2EEAlgorithm":"","chunkSplitterVersion":"v3-rabin-karp","x":1}` {
		t.Errorf("WithDefaults = %s", got)
	}
}
