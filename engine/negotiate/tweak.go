package negotiate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/livesync-go/livesync-go/engine"
)

// Tweak values mirror commonlib src/common/models/tweak.definition.ts.
// Every table below keeps upstream's key order.

type tweakPair struct {
	key   string
	value string // JSON
}

// shouldMatchTemplate is TweakValuesShouldMatchedTemplate: the keys that
// must agree between a node and the vault's preferred set, with the
// template's values (which upstream uses only for their keys).
var shouldMatchTemplate = []tweakPair{
	{"minimumChunkSize", "20"},
	{"longLineThreshold", "250"},
	{"encrypt", "false"},
	{"usePathObfuscation", "false"},
	{"enableCompression", "false"},
	{"useEden", "false"},
	{"customChunkSize", "0"},
	{"useDynamicIterationCount", "false"},
	{"hashAlg", `"xxhash64"`},
	{"enableChunkSplitterV2", "false"},
	{"maxChunksInEden", "10"},
	{"maxTotalLengthInEden", "1024"},
	{"maxAgeInEden", "10"},
	{"usePluginSyncV2", "false"},
	{"handleFilenameCaseSensitive", "false"},
	{"useSegmenter", "false"},
	{"E2EEAlgorithm", `"v2"`},
	{"chunkSplitterVersion", `"v3-rabin-karp"`},
}

// recommendedTemplate is TweakValuesRecommendedTemplate, whose keys come
// first in TweakValuesTemplate: the settings a node stores besides the
// must-match ones, for the user to compare. Their values are the
// plugin's DEFAULT_SETTINGS (commonlib
// src/common/models/setting.const.defaults.ts), except usePluginSyncV2,
// which is PREFERRED_BASE's (setting.const.preferred.ts).
var recommendedTemplate = []tweakPair{
	{"useIgnoreFiles", "false"},
	{"useCustomRequestHandler", "false"},
	{"batch_size", "25"},
	{"batches_limit", "25"},
	{"useTimeouts", "false"},
	{"readChunksOnline", "true"},
	{"hashCacheMaxCount", "300"},
	{"hashCacheMaxAmount", "50"},
	{"concurrencyOfReadChunksOnline", "40"},
	{"minimumIntervalOfReadChunksOnline", "50"},
	{"ignoreFiles", `".gitignore"`},
	{"syncMaxSizeInMB", "50"},
	{"enableChunkSplitterV2", "false"},
	{"usePluginSyncV2", "true"},
	{"handleFilenameCaseSensitive", "false"},
	{"E2EEAlgorithm", `"v2"`},
	{"chunkSplitterVersion", `"v3-rabin-karp"`},
}

// recommendedKeys are the keys of recommendedTemplate, in its order.
var recommendedKeys = func() []string {
	keys := make([]string, len(recommendedTemplate))
	for i, p := range recommendedTemplate {
		keys[i] = p.key
	}
	return keys
}()

// newVaultPreset are the values a vault set up by the plugin today holds
// where they differ from TweakValuesTemplate's: PREFERRED_BASE's
// usePluginSyncV2 and handleFilenameCaseSensitive, and the read-chunks
// pacing that both PREFERRED_SETTING_SELF_HOSTED and
// PREFERRED_JOURNAL_SYNC set (commonlib
// src/common/models/setting.const.preferred.ts). The interop vectors the
// library wrote (engine/testdata/vectors) hold exactly these.
var newVaultPreset = []tweakPair{
	{"usePluginSyncV2", "true"},
	{"handleFilenameCaseSensitive", "false"},
	{"concurrencyOfReadChunksOnline", "30"},
	{"minimumIntervalOfReadChunksOnline", "25"},
}

// tweakDefaults is TweakValuesDefault: values assumed for keys a stored set
// omits (documents written by older clients). Its fourth entry,
// tweakModified, is undefined upstream and therefore absent here.
var tweakDefaults = []tweakPair{
	{"usePluginSyncV2", "false"},
	{"E2EEAlgorithm", `"v2"`},
	{"chunkSplitterVersion", `"v3-rabin-karp"`},
}

// Key classes of tweak.definition.ts (IncompatibleChanges,
// CompatibleButLossyChanges).
var (
	incompatibleKeys = []string{"encrypt", "usePathObfuscation", "useDynamicIterationCount", "handleFilenameCaseSensitive"}
	lossyKeys        = []string{"hashAlg", "customChunkSize", "chunkSplitterVersion"}
)

// templateKeys is the key list of TweakValuesTemplate, in its order.
var templateKeys = func() []string {
	keys := append([]string(nil), recommendedKeys...)
	seen := map[string]bool{}
	for _, k := range keys {
		seen[k] = true
	}
	for _, p := range shouldMatchTemplate {
		if !seen[p.key] {
			keys = append(keys, p.key)
			seen[p.key] = true
		}
	}
	return append(keys, "tweakModified")
}()

// TemplateKeys returns the keys of upstream's TweakValuesTemplate in its
// order: the keys a node stores under its own id and under PREFERRED. The
// result is a fresh slice.
func TemplateKeys() []string { return append([]string(nil), templateKeys...) }

// ShouldMatchKeys returns the keys that must agree with the remote's
// preferred set (TweakValuesShouldMatchedTemplate), in upstream's order.
// The result is a fresh slice.
func ShouldMatchKeys() []string {
	keys := make([]string, len(shouldMatchTemplate))
	for i, p := range shouldMatchTemplate {
		keys[i] = p.key
	}
	return keys
}

// ShouldMatchTemplate returns TweakValuesShouldMatchedTemplate with its
// values (those of a new vault before presets): a starting point for a
// node's current set. The result is a fresh set.
func ShouldMatchTemplate() TweakValues { return pairsToValues(shouldMatchTemplate) }

// NewVaultTweaks returns the tweak values of a vault the plugin sets up
// today, before its own choices (chunk size, E2EE, path obfuscation, case
// sensitivity): every key of TemplateKeys except the undefined
// tweakModified, in that order, with TweakValuesTemplate's values
// ({...TweakValuesRecommendedTemplate, ...TweakValuesShouldMatchedTemplate})
// overridden by the new-vault presets of setting.const.preferred.ts
// (usePluginSyncV2 true; concurrencyOfReadChunksOnline 30 and
// minimumIntervalOfReadChunksOnline 25, as both the self-hosted and the
// journal preset set). This is the 30-key set extractObject gives on a
// new vault. The result is a fresh set.
func NewVaultTweaks() TweakValues {
	var t TweakValues
	for _, p := range recommendedTemplate {
		t.setRaw(p.key, json.RawMessage(p.value))
	}
	for _, p := range shouldMatchTemplate {
		t.setRaw(p.key, json.RawMessage(p.value))
	}
	for _, p := range newVaultPreset {
		t.setRaw(p.key, json.RawMessage(p.value))
	}
	return t
}

// withRecommended returns current reduced to the template keys
// (extractObject(TweakValuesTemplate, …)), in the template's order, with
// every recommended key current lacks taken from NewVaultTweaks. In the
// plugin the settings object always holds every recommended key (its
// DEFAULT_SETTINGS fill the gaps), so the set it stores is complete; a set
// of ours may come from an older client that stored only the must-match
// keys. Must-match keys current lacks stay absent: they are compared, and
// a guess could turn into a mismatch; tweakModified stays absent too.
func withRecommended(current TweakValues) TweakValues {
	fill := NewVaultTweaks()
	var out TweakValues
	for _, k := range templateKeys {
		if v, ok := current.vals[k]; ok {
			out.setRaw(k, v)
		} else if ImpactOf(k) == ImpactNone {
			if v, ok := fill.vals[k]; ok {
				out.setRaw(k, v)
			}
		}
	}
	return out
}

// TweakDefaults returns TweakValuesDefault, the values assumed for keys a
// stored tweak set omits. The result is a fresh set.
func TweakDefaults() TweakValues { return pairsToValues(tweakDefaults) }

func pairsToValues(pairs []tweakPair) TweakValues {
	var t TweakValues
	for _, p := range pairs {
		t.setRaw(p.key, json.RawMessage(p.value))
	}
	return t
}

// Impact classifies a tweak key by what a disagreement on it costs.
type Impact int

const (
	// ImpactNone: the key is not one that must match (a recommended key).
	ImpactNone Impact = iota
	// ImpactMustMatch: the key must match, but upstream lists it neither
	// as incompatible nor as lossy; it asks the user without warning of a
	// rebuild.
	ImpactMustMatch
	// ImpactLossy: compatible but lossy (CompatibleButLossyChanges): both
	// sides can read each other, deduplication suffers; upstream
	// recommends a rebuild and may auto-accept the newer side.
	ImpactLossy
	// ImpactBreaking: incompatible (IncompatibleChanges): the sides cannot
	// read each other's data; upstream requires a rebuild.
	ImpactBreaking
)

func (i Impact) String() string {
	switch i {
	case ImpactNone:
		return "none"
	case ImpactMustMatch:
		return "must-match"
	case ImpactLossy:
		return "lossy"
	case ImpactBreaking:
		return "breaking"
	}
	return "Impact(" + strconv.Itoa(int(i)) + ")"
}

// ImpactOf returns the class of a tweak key; keys outside ShouldMatchKeys
// are ImpactNone.
func ImpactOf(key string) Impact {
	for _, k := range incompatibleKeys {
		if k == key {
			return ImpactBreaking
		}
	}
	for _, k := range lossyKeys {
		if k == key {
			return ImpactLossy
		}
	}
	for _, p := range shouldMatchTemplate {
		if p.key == key {
			return ImpactMustMatch
		}
	}
	return ImpactNone
}

// TweakValues is an ordered set of tweak settings (keys of TemplateKeys,
// plus any key a newer client stored) with arbitrary JSON values, as
// upstream stores them in a milestone's tweak_values. Keys keep their first
// insertion order; values are compact JSON and are compared with
// JavaScript semantics (1 equals 1.0). The zero value is an empty set. A
// set decoded from JSON null encodes back to null and counts as present
// but empty. TweakValues has value semantics only through Clone: copies
// share storage.
type TweakValues struct {
	keys []string
	vals map[string]json.RawMessage
	null bool
}

// Len returns the number of keys.
func (t TweakValues) Len() int { return len(t.keys) }

// Keys returns the keys in order, as a fresh slice.
func (t TweakValues) Keys() []string { return append([]string(nil), t.keys...) }

// Has reports whether key is present.
func (t TweakValues) Has(key string) bool { _, ok := t.vals[key]; return ok }

// Get returns a copy of the JSON value of key.
func (t TweakValues) Get(key string) (json.RawMessage, bool) {
	v, ok := t.vals[key]
	if !ok {
		return nil, false
	}
	return append(json.RawMessage(nil), v...), true
}

// Bool returns the value of key if it is a JSON boolean.
func (t TweakValues) Bool(key string) (value, ok bool) {
	v, present := t.vals[key]
	if !present || isNull(v) {
		return false, false
	}
	if json.Unmarshal(v, &value) != nil {
		return false, false
	}
	return value, true
}

// String returns the value of key if it is a JSON string.
func (t TweakValues) String(key string) (string, bool) {
	v, present := t.vals[key]
	if !present || isNull(v) {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// Number returns the value of key if it is a JSON number.
func (t TweakValues) Number(key string) (float64, bool) {
	v, present := t.vals[key]
	if !present || isNull(v) {
		return 0, false
	}
	var f float64
	if json.Unmarshal(v, &f) != nil {
		return 0, false
	}
	return f, true
}

// Set stores value (marshalled to JSON) under key, keeping the key's
// position if it is present and appending it otherwise. It fails with
// engine.ErrMalformed if value does not marshal.
func (t *TweakValues) Set(key string, value any) error {
	raw, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("negotiate: tweak %s: %v: %w", key, err, engine.ErrMalformed)
	}
	t.setRaw(key, raw)
	return nil
}

// SetRaw stores a JSON value under key like Set; it fails with
// engine.ErrMalformed if value is not valid JSON.
func (t *TweakValues) SetRaw(key string, value json.RawMessage) error {
	if !json.Valid(value) {
		return fmt.Errorf("negotiate: tweak %s: invalid JSON value: %w", key, engine.ErrMalformed)
	}
	t.setRaw(key, value)
	return nil
}

func (t *TweakValues) setRaw(key string, value json.RawMessage) {
	var b bytes.Buffer
	if json.Compact(&b, value) != nil {
		b.Reset()
		b.Write(value)
	}
	if t.vals == nil {
		t.vals = map[string]json.RawMessage{}
	}
	if _, ok := t.vals[key]; !ok {
		t.keys = append(t.keys, key)
	}
	t.vals[key] = b.Bytes()
	t.null = false
}

// Delete removes key.
func (t *TweakValues) Delete(key string) {
	if _, ok := t.vals[key]; !ok {
		return
	}
	delete(t.vals, key)
	for i, k := range t.keys {
		if k == key {
			t.keys = append(t.keys[:i:i], t.keys[i+1:]...)
			break
		}
	}
}

// Clone returns a deep copy.
func (t TweakValues) Clone() TweakValues {
	c := TweakValues{null: t.null}
	for _, k := range t.keys {
		c.setRaw(k, t.vals[k])
	}
	c.null = t.null
	return c
}

// WithDefaults returns {...TweakDefaults(), ...t}: t's values, with the
// defaults filling keys t omits (upstream's spread of TweakValuesDefault).
func (t TweakValues) WithDefaults() TweakValues {
	d := TweakDefaults()
	for _, k := range t.keys {
		d.setRaw(k, t.vals[k])
	}
	return d
}

// Extract returns the members of t named by keys, in the order of keys;
// keys t lacks stay absent (upstream's extractObject leaves them
// undefined).
func (t TweakValues) Extract(keys []string) TweakValues {
	var e TweakValues
	for _, k := range keys {
		if v, ok := t.vals[k]; ok {
			e.setRaw(k, v)
		}
	}
	return e
}

// Equal reports whether t and o hold the same keys with equal values
// (octagonal-wheels isObjectDifferent, strict mode): key order does not
// matter, a key present on one side only is a difference.
func (t TweakValues) Equal(o TweakValues) bool {
	if t.null || o.null {
		return t.null == o.null && len(t.keys) == 0 && len(o.keys) == 0
	}
	if len(t.vals) != len(o.vals) {
		return false
	}
	for k, v := range t.vals {
		w, ok := o.vals[k]
		if !ok || rawDifferent(v, w) {
			return false
		}
	}
	return true
}

// MarshalJSON encodes the set as a JSON object in key order (or null for
// a set decoded from null).
func (t TweakValues) MarshalJSON() ([]byte, error) {
	if t.null && len(t.keys) == 0 {
		return []byte("null"), nil
	}
	var w objWriter
	for _, k := range t.keys {
		w.raw(k, t.vals[k])
	}
	return w.bytes("tweak values")
}

// UnmarshalJSON decodes a JSON object (or null) keeping member order. A
// repeated key keeps its first position and its last value, as JSON.parse
// does. Anything else fails with engine.ErrMalformed.
func (t *TweakValues) UnmarshalJSON(data []byte) error {
	*t = TweakValues{}
	if isNull(data) {
		t.null = true
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return fmt.Errorf("negotiate: tweak values: not a JSON object: %w", engine.ErrMalformed)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("negotiate: tweak values: %v: %w", err, engine.ErrMalformed)
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("negotiate: tweak values: bad key: %w", engine.ErrMalformed)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("negotiate: tweak values: %v: %w", err, engine.ErrMalformed)
		}
		t.setRaw(key, v)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return fmt.Errorf("negotiate: tweak values: unterminated object: %w", engine.ErrMalformed)
	}
	return nil
}

// TweakDiff is one must-match key on which two tweak sets disagree.
// Preferred and Current are the compared JSON values (defaults applied to
// the preferred side); Impact is never ImpactNone.
type TweakDiff struct {
	Key       string
	Preferred json.RawMessage
	Current   json.RawMessage
	Impact    Impact
}

// TweakMismatch returns the must-match keys on which current disagrees
// with preferred, in ShouldMatchKeys order; nil means they agree. It is
// the comparison of ensureRemoteIsCompatible (commonlib
// src/pouchdb/LiveSyncDBFunctions.ts): both sides are spread over
// TweakValuesDefault, reduced to the must-match keys, and compared
// ignoring keys undefined on either side.
//
// The two sides are not symmetric, exactly as upstream: preferred is a set
// read from JSON, so TweakDefaults fills the keys it omits; current is
// this node's settings as extractObject(TweakValuesTemplate, settings)
// builds them, so a template key it omits is present-but-undefined in
// upstream, overrides the default and is skipped. Every default key is a
// template key, so defaults never apply to current. To compare two stored
// sets, pass current.WithDefaults().
func TweakMismatch(preferred, current TweakValues) []TweakDiff {
	p := preferred.WithDefaults()
	var diffs []TweakDiff
	for _, sp := range shouldMatchTemplate {
		pv, pok := p.vals[sp.key]
		cv, cok := current.vals[sp.key]
		if !pok || !cok {
			continue
		}
		if rawDifferent(pv, cv) {
			diffs = append(diffs, TweakDiff{
				Key:       sp.key,
				Preferred: append(json.RawMessage(nil), pv...),
				Current:   append(json.RawMessage(nil), cv...),
				Impact:    ImpactOf(sp.key),
			})
		}
	}
	return diffs
}

// storedTweaksDiffer mirrors the write-back test of ensureRemoteIsCompatible:
// isObjectDifferent(tweak_values[me], current) in strict mode, where
// current is extractObject(TweakValuesTemplate, settings) (pass
// withRecommended(current)). In upstream every template key is an own
// property of current, undefined when the settings lack it, while a stored
// set read from JSON never holds undefined. A template key missing from
// current is therefore always a difference, which is why upstream rewrites
// the milestone on every connection while tweakModified is unset.
func storedTweaksDiffer(stored *TweakValues, current TweakValues) bool {
	if stored == nil || stored.null {
		return true
	}
	for _, k := range templateKeys {
		if !current.Has(k) {
			return true
		}
	}
	return !stored.Equal(current)
}

// rawDifferent compares two JSON values with isObjectDifferent semantics.
// Values Go cannot decode (numbers beyond float64) are compared as text.
func rawDifferent(a, b json.RawMessage) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		var ca, cb bytes.Buffer
		_ = json.Compact(&ca, a)
		_ = json.Compact(&cb, b)
		return !bytes.Equal(ca.Bytes(), cb.Bytes())
	}
	return jsDifferent(va, vb)
}

// jsDifferent is octagonal-wheels isObjectDifferent (strict mode) on
// decoded JSON: different typeof is a difference; null equals only null;
// objects and arrays (both typeof "object", arrays keyed by index) differ
// if a key is on one side only or a member differs; primitives use ===.
func jsDifferent(a, b any) bool {
	if jsTypeof(a) != jsTypeof(b) {
		return true
	}
	if jsTypeof(a) != "object" {
		return a != b
	}
	if a == nil || b == nil {
		return !(a == nil && b == nil)
	}
	ma, mb := objectView(a), objectView(b)
	if len(ma) != len(mb) {
		return true
	}
	for k, va := range ma {
		vb, ok := mb[k]
		if !ok || jsDifferent(va, vb) {
			return true
		}
	}
	return false
}

func jsTypeof(v any) string {
	switch v.(type) {
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	}
	return "object" // nil, []any, map[string]any
}

func objectView(v any) map[string]any {
	switch x := v.(type) {
	case map[string]any:
		return x
	case []any:
		m := make(map[string]any, len(x))
		for i, e := range x {
			m[strconv.Itoa(i)] = e
		}
		return m
	}
	return nil
}
