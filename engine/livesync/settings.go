package livesync

import (
	"encoding/json"
	"fmt"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// E2EEAlgorithm selects the end-to-end encryption scheme used when writing.
// Its zero value is V2 (HKDF), the new-vault default.
type E2EEAlgorithm string

// E2EE algorithms. Upstream spells V1 as the empty string; here the empty
// string means the default, V2, and FromTweakValues does the mapping.
const (
	E2EEV2      E2EEAlgorithm = "v2"
	E2EEV1      E2EEAlgorithm = "v1"      // upstream E2EEAlgorithm ""
	E2EEForceV1 E2EEAlgorithm = "forceV1" // upstream "forceV1"
)

// HashAlg selects the chunk-id hash. Its zero value is xxhash64, the
// new-vault default.
type HashAlg string

// Hash algorithms. Upstream spells the legacy raw xxhash32 mode as the
// empty string; here it is HashLegacy and FromTweakValues maps it.
const (
	HashXXHash64    HashAlg = "xxhash64"
	HashXXHash32    HashAlg = "xxhash32"
	HashLegacy      HashAlg = "legacy-xxhash32raw" // upstream hashAlg ""
	HashMixedPureJS HashAlg = "mixed-purejs"
	HashSHA1        HashAlg = "sha1"
)

// Splitter selects the content splitter. Its zero value is V3
// (Rabin–Karp), the new-vault default.
type Splitter string

// Splitters. Upstream spells V1 as the empty string or "v1"; here the
// empty string means the default, V3.
const (
	SplitterV1 Splitter = "v1"
	SplitterV2 Splitter = "v2"
	SplitterV3 Splitter = "v3-rabin-karp"
)

// Settings are the vault settings that decide how files become LiveSync
// documents and how documents look on a remote. The zero value is a new
// vault's default (commonlib src/common/models/setting.const.defaults.ts):
// case-insensitive ids, no encryption, V3 splitter, xxhash64 ids,
// customChunkSize 0, minimumChunkSize 20, no compression.
//
// Every setting here is a "must match" tweak value (engine/FORMAT.md §5.5): all
// devices of a vault use the same values, normally read from the remote's
// milestone with FromTweakValues.
type Settings struct {
	// CaseSensitive is handleFilenameCaseSensitive: ids keep the case of
	// paths. Default false (ids are lower-cased as JavaScript does).
	CaseSensitive bool
	// Encrypt turns on end-to-end encryption of chunks on remotes and
	// passphrase-keyed chunk ids (h:+…). Passphrase must then be set.
	Encrypt bool
	// Passphrase is the E2EE passphrase. It is never logged or printed.
	Passphrase string
	// PathObfuscation is usePathObfuscation: metadata ids become f:<hash>
	// and, on CouchDB remotes, paths and sizes are encrypted.
	PathObfuscation bool
	// E2EEAlgorithm is the scheme used when writing; reading accepts all.
	E2EEAlgorithm E2EEAlgorithm
	// DynamicIterationCount is useDynamicIterationCount (legacy V1 only).
	DynamicIterationCount bool
	// Splitter is chunkSplitterVersion.
	Splitter Splitter
	// CustomChunkSize is customChunkSize (0 = 100 KiB pieces, 60 is the
	// self-hosted CouchDB preset, 10 the object-storage preset).
	CustomChunkSize int
	// MinimumChunkSize is minimumChunkSize; 0 means the default 20.
	MinimumChunkSize int
	// HashAlg is hashAlg.
	HashAlg HashAlg
	// Compression is enableCompression: chunk data is deflated on CouchDB
	// remotes. Compressed data is always understood when reading.
	Compression bool
}

// Validate reports settings that cannot work.
func (s Settings) Validate() error {
	if s.Encrypt && s.Passphrase == "" {
		return fmt.Errorf("livesync: encryption is on but the passphrase is empty: %w", engine.ErrUnsupported)
	}
	if s.PathObfuscation && s.Passphrase == "" {
		return fmt.Errorf("livesync: path obfuscation is on but the passphrase is empty: %w", engine.ErrUnsupported)
	}
	switch s.E2EEAlgorithm {
	case "", E2EEV2, E2EEV1, E2EEForceV1:
	default:
		return fmt.Errorf("livesync: unknown E2EE algorithm %q: %w", s.E2EEAlgorithm, engine.ErrUnsupported)
	}
	switch s.Splitter {
	case "", SplitterV1, SplitterV2, SplitterV3, "v2-segmenter":
	default:
		return fmt.Errorf("livesync: unknown splitter %q: %w", s.Splitter, engine.ErrUnsupported)
	}
	switch s.HashAlg {
	case "", HashXXHash64, HashXXHash32, HashLegacy, HashMixedPureJS, HashSHA1:
	default:
		return fmt.Errorf("livesync: unknown hash algorithm %q: %w", s.HashAlg, engine.ErrUnsupported)
	}
	if s.CustomChunkSize < 0 || s.MinimumChunkSize < 0 {
		return fmt.Errorf("livesync: negative chunk size setting: %w", engine.ErrUnsupported)
	}
	return nil
}

// FromTweakValues reads the format settings from a milestone's tweak-value
// set (for example its "PREFERRED" entry), as JSON fields. Keys that are
// absent keep the values of base, except that an absent E2EEAlgorithm or
// chunkSplitterVersion means "v2" and "v3-rabin-karp" as upstream's
// TweakValuesDefault says. Upstream's empty-string spellings map to
// E2EEV1, SplitterV1 and HashLegacy. The passphrase is never part of tweak
// values and is taken from base.
func FromTweakValues(base Settings, tv negotiate.TweakValues) (Settings, error) {
	s := base
	var err error
	get := func(key string, dst any) bool {
		raw, ok := tv.Get(key)
		if !ok || err != nil || string(raw) == "null" {
			return false
		}
		if e := json.Unmarshal(raw, dst); e != nil {
			err = fmt.Errorf("livesync: tweak value %q: %w", key, engine.ErrMalformed)
			return false
		}
		return true
	}
	get("handleFilenameCaseSensitive", &s.CaseSensitive)
	get("encrypt", &s.Encrypt)
	get("usePathObfuscation", &s.PathObfuscation)
	get("useDynamicIterationCount", &s.DynamicIterationCount)
	get("enableCompression", &s.Compression)
	get("customChunkSize", &s.CustomChunkSize)
	get("minimumChunkSize", &s.MinimumChunkSize)
	var str string
	if get("E2EEAlgorithm", &str) {
		switch str {
		case "":
			s.E2EEAlgorithm = E2EEV1
		default:
			s.E2EEAlgorithm = E2EEAlgorithm(str)
		}
	} else if !tv.Has("E2EEAlgorithm") {
		s.E2EEAlgorithm = E2EEV2
	}
	str = ""
	if get("chunkSplitterVersion", &str) {
		switch str {
		case "", "v1":
			s.Splitter = SplitterV1
		default:
			s.Splitter = Splitter(str)
		}
	} else if !tv.Has("chunkSplitterVersion") {
		s.Splitter = SplitterV3
	}
	str = ""
	if get("hashAlg", &str) {
		if str == "" {
			s.HashAlg = HashLegacy
		} else {
			s.HashAlg = HashAlg(str)
		}
	}
	if err != nil {
		return base, err
	}
	return s, s.Validate()
}

// TweakValues returns the tweak values of s in upstream's spelling, for
// writing into a milestone (negotiate.Milestone.Register): every key the
// plugin writes, starting from a new vault's (negotiate.NewVaultTweaks),
// with the must-match keys set from s. The passphrase is not part of
// them.
func (s Settings) TweakValues() negotiate.TweakValues {
	tv := negotiate.NewVaultTweaks()
	set := func(k string, v any) { _ = tv.Set(k, v) } // plain values always encode
	set("handleFilenameCaseSensitive", s.CaseSensitive)
	set("encrypt", s.Encrypt)
	set("usePathObfuscation", s.PathObfuscation)
	set("useDynamicIterationCount", s.DynamicIterationCount)
	set("enableCompression", s.Compression)
	set("customChunkSize", s.CustomChunkSize)
	// Customisation sync is not part of this engine; a new vault's
	// plugin writes usePluginSyncV2 true, and so do we.
	set("usePluginSyncV2", true)
	mcs := s.MinimumChunkSize
	if mcs == 0 {
		mcs = 20
	}
	set("minimumChunkSize", mcs)
	switch s.E2EEAlgorithm {
	case E2EEV1:
		set("E2EEAlgorithm", "")
	case E2EEForceV1:
		set("E2EEAlgorithm", "forceV1")
	default:
		set("E2EEAlgorithm", "v2")
	}
	switch s.Splitter {
	case "":
		set("chunkSplitterVersion", string(SplitterV3))
	default:
		set("chunkSplitterVersion", string(s.Splitter))
	}
	switch s.HashAlg {
	case "":
		set("hashAlg", string(HashXXHash64))
	case HashLegacy:
		set("hashAlg", "")
	default:
		set("hashAlg", string(s.HashAlg))
	}
	return tv
}
