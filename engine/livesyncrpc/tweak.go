package livesyncrpc

import (
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// PassphraseBucket is the lifetime of the passphrase hash peers exchange
// in legacy/getTweakSettings: three minutes.
const PassphraseBucket = 180 * time.Second

// SHA1B64 is octagonal-wheels' sha1 (src/hash/purejs.ts): the standard
// base64 of the SHA-1 of s's UTF-8 bytes.
func SHA1B64(s string) string {
	sum := sha1.Sum([]byte(s))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// PassphraseHash is the "passphrase" member of legacy/getTweakSettings
// (commonlib src/replication/trystero/TrysteroReplicator.ts
// getHashedStringWithCurrentTime): sha1b64(sha1b64(b) + passphrase),
// where b is floor(now in ms / 180000) in base 36. Two peers agree on it
// only within the same three-minute bucket.
func PassphraseHash(now time.Time, passphrase string) string {
	// ~~x truncates toward zero to a 32-bit integer, as Go's integer
	// division and int32 conversion do.
	bucket := int32(now.UnixMilli() / PassphraseBucket.Milliseconds())
	return SHA1B64(SHA1B64(strconv.FormatInt(int64(bucket), 36)) + passphrase)
}

// TweakSettings is the answer to legacy/getTweakSettings: the members of
// tweaks named by the must-match keys (negotiate.ShouldMatchKeys, which
// include "encrypt"), in that order, then "passphrase" as PassphraseHash
// of passphrase at now.
func TweakSettings(tweaks negotiate.TweakValues, passphrase string, now time.Time) json.RawMessage {
	buf := []byte{'{'}
	for _, k := range negotiate.ShouldMatchKeys() {
		v, ok := tweaks.Get(k)
		if !ok || k == "passphrase" {
			continue
		}
		kb, _ := json.Marshal(k)
		buf = append(append(append(buf, kb...), ':'), v...)
		buf = append(buf, ',')
	}
	hb, _ := json.Marshal(PassphraseHash(now, passphrase))
	buf = append(append(buf, `"passphrase":`...), hb...)
	return append(buf, '}')
}

// tweakDifferences compares two getTweakSettings answers as
// octagonal-wheels' isObjectDifferent does (every key of either side,
// values compared as JSON values) and returns the keys that differ,
// sorted.
func tweakDifferences(a, b json.RawMessage) ([]string, error) {
	var ma, mb map[string]any
	if err := json.Unmarshal(a, &ma); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &mb); err != nil {
		return nil, err
	}
	var diff []string
	for k, va := range ma {
		if vb, ok := mb[k]; !ok || !reflect.DeepEqual(va, vb) {
			diff = append(diff, k)
		}
	}
	for k := range mb {
		if _, ok := ma[k]; !ok {
			diff = append(diff, k)
		}
	}
	slices.Sort(diff)
	return diff, nil
}
