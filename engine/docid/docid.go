package docid

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/livesync-go/livesync-go/engine/jsstring"
)

// Id prefixes and fixed ids of the LiveSync format (commonlib
// src/common/models/shared.const.behabiour.ts, fileaccess.const.ts,
// db.const.ts).
const (
	// PrefixObfuscated starts the id of a file whose path is obfuscated
	// ("f:<64 hex>"); behind a namespace prefix it follows that prefix
	// ("i:f:<64 hex>").
	PrefixObfuscated = "f:"
	// PrefixChunk starts every chunk id ("h:<hash>", "h:+<hash>").
	PrefixChunk = "h:"
	// PrefixHiddenFile starts the path, and unless obfuscated the id, of a
	// file stored by Hidden File Sync ("i:.obsidian/app.json").
	PrefixHiddenFile = "i:"
	// PrefixCustomization starts the path and id of a Customisation Sync
	// document ("ix:<device>/<CATEGORY>/…").
	PrefixCustomization = "ix:"
	// PrefixPluginContainer starts the obsolete plug-in sync container
	// ("ps:"), still accepted by IsTargetPath.
	PrefixPluginContainer = "ps:"
	// VersionDocID is the id of the database version document; the typo
	// "obsydian" is part of the format.
	VersionDocID = "obsydian_livesync_version"
	// SyncInfoID is the id of the legacy "can I decrypt?" document.
	SyncInfoID = "syncinfo"
)

// Options selects how a vault derives ids from paths. The zero value is
// the default of a new vault: case-insensitive ids, no path obfuscation.
type Options struct {
	// CaseSensitive is LiveSync's handleFilenameCaseSensitive. When false
	// (the default, and what migrated vaults are forced to) paths are
	// lower-cased with JavaScript toLowerCase before the id is formed, so
	// "Note.md" and "note.md" share one id.
	CaseSensitive bool
	// ObfuscationPassphrase turns path obfuscation on when non-empty. The
	// plug-in uses the E2EE passphrase when usePathObfuscation is set.
	// It is hashed once by New and never logged.
	ObfuscationPassphrase string
}

// Mapper derives document ids for one vault configuration. It holds the
// hashed obfuscation passphrase, never the passphrase itself, is
// immutable after New and safe for concurrent use.
type Mapper struct {
	caseSensitive bool
	obfuscate     bool
	// hashedPassphrase is hex(SHA-256(passphrase)) followed by ':', the
	// fixed head of every hash input (path.ts path2id_base).
	hashedPassphrase [sha256.Size*2 + 1]byte
}

// New returns a Mapper for o, hashing the obfuscation passphrase once.
func New(o Options) *Mapper {
	m := &Mapper{caseSensitive: o.CaseSensitive, obfuscate: o.ObfuscationPassphrase != ""}
	if m.obfuscate {
		sum := sha256.Sum256([]byte(o.ObfuscationPassphrase))
		hex.Encode(m.hashedPassphrase[:], sum[:])
		m.hashedPassphrase[len(m.hashedPassphrase)-1] = ':'
	}
	return m
}

// FromPath returns the document id of path under o. It is
// New(o).FromPath(path); use a Mapper to hash the passphrase only once.
func FromPath(path string, o Options) string {
	return New(o).FromPath(path)
}

// HiddenFileID returns the id Hidden File Sync stores path under. It is
// New(o).HiddenFileID(path).
func HiddenFileID(path string, o Options) string {
	return New(o).HiddenFileID(path)
}

// FromPath returns the document id of path, which may carry a namespace
// prefix such as "i:" or "ix:". It follows commonlib
// src/services/base/PathService.ts path2id with the headless path
// normalisation and src/string_and_binary/path.ts path2id_base:
//
//  1. Normalize(path);
//  2. a result starting with "f:" is returned unchanged;
//  3. unless case-sensitive, jsstring.ToLower of the whole string;
//  4. without obfuscation: "/" is prepended when it starts with '_';
//  5. with obfuscation: prefix + "f:" + hex(SHA-256(hex(SHA-256(
//     passphrase)) + ":" + s)), where s is the string of step 3 (without
//     the '/' of step 4) and prefix is the text up to and including the
//     first ':' when JavaScript split(":", 2) yields a non-empty second
//     part, else "".
//
// FromPath never fails; any string is a valid input.
func (m *Mapper) FromPath(path string) string {
	p := Normalize(path)
	if strings.HasPrefix(p, PrefixObfuscated) {
		return p
	}
	if !m.caseSensitive {
		p = jsstring.ToLower(p)
	}
	if !m.obfuscate {
		if strings.HasPrefix(p, "_") {
			return "/" + p
		}
		return p
	}
	// path2id_base takes the namespace prefix from the string with the
	// '/' already prepended, but hashes the string without it. Its
	// "already hashed" test on the body can never succeed (split(":", 2)
	// leaves no ':' in the body), so it is not reproduced.
	prefix := namespacePrefix(p)
	if prefix != "" && p[0] == '_' {
		prefix = "/" + prefix
	}
	var sum [sha256.Size]byte
	if len(p) <= 256 {
		var buf [len(m.hashedPassphrase) + 256]byte
		sum = sha256.Sum256(append(append(buf[:0], m.hashedPassphrase[:]...), p...))
	} else {
		h := sha256.New()
		h.Write(m.hashedPassphrase[:])
		h.Write([]byte(p))
		h.Sum(sum[:0])
	}
	var hexSum [sha256.Size * 2]byte
	hex.Encode(hexSum[:], sum[:])
	var sb strings.Builder
	sb.Grow(len(prefix) + len(PrefixObfuscated) + len(hexSum))
	sb.WriteString(prefix)
	sb.WriteString(PrefixObfuscated)
	sb.Write(hexSum[:])
	return sb.String()
}

// HiddenFileID returns the id Hidden File Sync stores the vault file path
// (e.g. ".obsidian/app.json") under: FromPath("i:" + path), the "i:" not
// doubled when path already has it (plugin
// src/features/HiddenFileSync/CmdHiddenFileSync.ts with commonlib
// path.ts addPrefix). With obfuscation the hashed string includes "i:"
// and the id has the form "i:f:<64 hex>".
func (m *Mapper) HiddenFileID(path string) string {
	if !strings.HasPrefix(path, PrefixHiddenFile) {
		path = PrefixHiddenFile + path
	}
	return m.FromPath(path)
}

// namespacePrefix returns what commonlib path.ts expandFilePathPrefix
// calls the prefix of s: with [a, b] = s.split(":", 2) in JavaScript, it
// is a + ":" when b is non-empty and "" otherwise.
func namespacePrefix(s string) string {
	i := strings.IndexByte(s, ':')
	if i < 0 {
		return ""
	}
	rest := s[i+1:]
	if j := strings.IndexByte(rest, ':'); j >= 0 {
		rest = rest[:j]
	}
	if rest == "" {
		return ""
	}
	return s[:i+1]
}

// Normalize applies the headless path service's normalisation
// (commonlib src/services/implements/injectable/InjectablePathService.ts
// normalizePath, as called by PathService.ts) to the part of path after
// its last ':': every '\' becomes '/' and every run of '/' becomes one.
// Nothing else changes: no trimming, no Unicode normalisation. Normalize
// returns path itself when it is already normal and is idempotent.
func Normalize(path string) string {
	head, tail := "", path
	if i := strings.LastIndexByte(path, ':'); i >= 0 {
		head, tail = path[:i+1], path[i+1:]
	}
	if !strings.Contains(tail, `\`) && !strings.Contains(tail, "//") {
		return path
	}
	var sb strings.Builder
	sb.Grow(len(path))
	sb.WriteString(head)
	slash := false
	for i := 0; i < len(tail); i++ {
		c := tail[i]
		if c == '\\' {
			c = '/'
		}
		if c == '/' {
			if slash {
				continue
			}
			slash = true
		} else {
			slash = false
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

// ToPath returns the path that id names, for ids that carry their path:
// commonlib path.ts id2path_base without a document, followed by the
// normalisation of PathService.ts id2path. The leading '/' of an id is
// dropped ("/_notes/a.md" is "_notes/a.md"); any other id is its own
// path. A case-insensitive vault yields the lower-cased path.
//
// ok is false, and path empty, where the id does not determine the path
// and a reader must use the document's path field instead: obfuscated
// ids ("f:…", "i:f:…"), chunk ids ("h:…"), system ids (IsSystemID), and
// ids that id2path_base would truncate or mangle because of its
// split(":", 2) — a second ':', nothing between the first ':' and the
// next, or a '/' right after a namespace prefix. An id that yields an
// empty path ("" or "/") is not a file either.
func ToPath(id string) (path string, ok bool) {
	if IsObfuscated(id) || IsChunkID(id) || IsSystemID(id) {
		return "", false
	}
	if i := strings.IndexByte(id, ':'); i >= 0 {
		body := id[i+1:]
		if body == "" || strings.IndexByte(body, ':') >= 0 || body[0] == '/' {
			return "", false
		}
		return Normalize(id), true
	}
	path = Normalize(strings.TrimPrefix(id, "/"))
	return path, path != ""
}
