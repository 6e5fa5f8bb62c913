package journal

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Fixed object keys and the pack suffix (engine/FORMAT.md §6.1), all relative to
// the bucket prefix.
const (
	// SyncParametersKey holds the sync parameters JSON (pbkdf2salt); it is
	// never encrypted (commonlib src/common/models/sync.definition.ts
	// DOCID_JOURNAL_SYNC_PARAMETERS; JournalSyncCore.ts
	// isEncryptionPrevented).
	SyncParametersKey = "_obsidian_livesync_journal_sync_parameters.json"
	// MilestoneKey holds the milestone JSON, uploaded unencrypted
	// (commonlib src/replication/journal/LiveSyncJournalReplicator.ts
	// MILSTONE_DOCID).
	MilestoneKey = "_00000000-milestone.json"
	// PackKeySuffix ends the name of every journal pack.
	PackKeySuffix = "-docs.jsonl.gz"
)

// PackKey returns the key of a pack uploaded at unixMillis:
// prefix + decimal milliseconds + PackKeySuffix (commonlib
// JournalSyncCore.ts, `${Date.now()}-docs.jsonl.gz`). unixMillis is
// expected to be >= 0, as Date.now() is.
func PackKey(prefix string, unixMillis int64) string {
	return prefix + strconv.FormatInt(unixMillis, 10) + PackKeySuffix
}

// ParsePackKey returns the milliseconds of a pack key written by PackKey.
// ok is true only when key is exactly PackKey(prefix, ms) for some
// ms >= 0 (canonical decimal, no sign, no leading zeros).
func ParsePackKey(prefix, key string) (ms int64, ok bool) {
	rest, found := strings.CutPrefix(key, prefix)
	if !found {
		return 0, false
	}
	digits, found := strings.CutSuffix(rest, PackKeySuffix)
	if !found || digits == "" || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	ms, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return ms, true
}

// IsPackListingCandidate reports whether a listed name (relative to the
// bucket prefix) is considered by a receiver: upstream drops every name
// starting with "_", which excludes SyncParametersKey and MilestoneKey
// (commonlib JournalSyncCore.ts _getRemoteJournals).
func IsPackListingCandidate(name string) bool {
	return !strings.HasPrefix(name, "_")
}

// ComparePackKeys orders object names as upstream sorts them:
// a.localeCompare(b, undefined, {numeric: true}) (commonlib
// JournalSyncCore.ts _getRemoteJournals). It returns -1, 0 or +1.
//
// It emulates the ICU root collation for ASCII: runs of ASCII digits
// compare by numeric value, control characters are ignored, other
// characters compare by primary weight in the order
// space, punctuation and symbols (" _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$"),
// numbers, then letters case-insensitively; a remaining tie is broken by
// lower case before upper case. Non-ASCII characters sort after all
// ASCII by code point (a simplification: upstream uses the runtime's
// locale). Where localeCompare would report equality for different
// strings (for example "01" and "1"), the byte order decides, so the
// result is 0 only for equal strings.
func ComparePackKeys(a, b string) int {
	if c := collate(a, b, false); c != 0 {
		return c
	}
	if c := collate(a, b, true); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// asciiOrder lists the ASCII characters that are not digits or letters
// by increasing primary weight, as ICU's root collation orders them.
const asciiOrder = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$"

var asciiWeight = func() (w [128]int) {
	for i, c := range []byte(asciiOrder) {
		w[c] = 1 + i
	}
	return w
}()

// element classes, in collation order.
const (
	classPunct = iota
	classNumber
	classLetter
	classOther
)

type element struct {
	class  int
	weight int    // punct, letter: weight; other: code point
	num    string // number: digits without leading zeros
	upper  bool   // letter: was upper case
}

// nextElement returns the element starting at s[i] and the index after
// it; ignorable characters are skipped. ok is false at the end.
func nextElement(s string, i int) (e element, next int, ok bool) {
	for i < len(s) {
		c := s[i]
		switch {
		case c < 0x20 || c == 0x7f:
			i++
			continue
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			num := strings.TrimLeft(s[i:j], "0")
			return element{class: classNumber, num: num}, j, true
		case c >= 'a' && c <= 'z':
			return element{class: classLetter, weight: int(c)}, i + 1, true
		case c >= 'A' && c <= 'Z':
			return element{class: classLetter, weight: int(c - 'A' + 'a'), upper: true}, i + 1, true
		case c < 0x80:
			return element{class: classPunct, weight: asciiWeight[c]}, i + 1, true
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			return element{class: classOther, weight: int(r)}, i + size, true
		}
	}
	return element{}, i, false
}

// collate compares element sequences; with tertiary set it compares only
// the case of letters.
func collate(a, b string, tertiary bool) int {
	i, j := 0, 0
	for {
		ea, ni, oka := nextElement(a, i)
		eb, nj, okb := nextElement(b, j)
		switch {
		case !oka && !okb:
			return 0
		case !oka:
			return -1
		case !okb:
			return 1
		}
		if tertiary {
			if ea.class == classLetter && eb.class == classLetter && ea.upper != eb.upper {
				if ea.upper {
					return 1
				}
				return -1
			}
		} else if c := compareElement(ea, eb); c != 0 {
			return c
		}
		i, j = ni, nj
	}
}

func compareElement(a, b element) int {
	if a.class != b.class {
		if a.class < b.class {
			return -1
		}
		return 1
	}
	if a.class == classNumber {
		if len(a.num) != len(b.num) {
			if len(a.num) < len(b.num) {
				return -1
			}
			return 1
		}
		return strings.Compare(a.num, b.num)
	}
	switch {
	case a.weight < b.weight:
		return -1
	case a.weight > b.weight:
		return 1
	}
	return 0
}
