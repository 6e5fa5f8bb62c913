package holdback

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/hold"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/rawjson"
)

// kind is what the Store makes of one pushed document.
type kind uint8

const (
	// kindOther: not a file's metadata (version document, design
	// document, anything foreign) or not a valid replicated revision:
	// written through unjudged; the inner store decides.
	kindOther kind = iota
	// kindChunk: a live chunk; its id counts as present once written.
	kindChunk
	// kindMeta: file metadata (or a bodyless tombstone of a file id)
	// whose chunk list is known: held while chunks are missing.
	kindMeta
	// kindUnreadable: file metadata whose chunk list is encrypted and no
	// passphrase is configured: written through unjudged.
	kindUnreadable
	// kindUndecodable: file metadata the codec could not decode (wrong
	// passphrase, malformed fields): written through unjudged.
	kindUndecodable
)

// Markers of encrypted metadata left in a document after DecodeRemote
// (commonlib src/pouchdb/encryption.ts): an obfuscated path holding the
// encrypted properties, and the wrapped eden entries.
const (
	encryptedPathPrefix = "/\\:"
	edenKeyV2           = "h:++encrypted-hkdf"
	edenKeyV1           = "h:++encrypted"
)

// judged is the classification of one document.
type judged struct {
	kind kind
	id   string
	rev  string
	// note: a valid revision of a document that is not a chunk or a
	// system document. While its document is held, such a revision goes
	// through the purgatory whatever its kind (late binding).
	note bool
	r    hold.Revision // kindMeta only
	// missing: kindMeta with chunks neither stored nor in its batch
	// (set by BulkDocsFrom).
	missing bool
	err     error // kindUndecodable only
}

// classify reads one pushed document in its stored (remote) form. codec
// is never nil (a Codec without passphrase when none is configured).
// Documents are never modified.
func classify(codec *livesync.Codec, raw json.RawMessage) judged {
	if j, ok := classifyChunk(raw); ok {
		return j
	}
	d, err := livesync.ParseDoc(raw)
	if err != nil {
		return judged{kind: kindOther}
	}
	id := d.ID()
	rev, ok := replicatedRev(d)
	if !ok {
		return judged{kind: kindOther, id: id}
	}
	j := judged{kind: kindOther, id: id, rev: rev}
	switch {
	case docid.IsChunkID(id):
		var data string
		if raw, ok := d["data"]; ok && json.Unmarshal(raw, &data) == nil && !d.Deleted() {
			j.kind = kindChunk
		}
		return j
	case strings.HasPrefix(id, "_") || docid.IsSystemID(id):
		return j
	}
	j.note = true
	if !d.IsFileDoc() && !isBodylessTombstone(d) {
		return j
	}
	dec, err := codec.DecodeRemote(d)
	switch {
	case errors.Is(err, engine.ErrUnsupported):
		j.kind = kindUnreadable // needs a key this Store does not have
		return j
	case err != nil:
		j.kind, j.err = kindUndecodable, err
		return j
	}
	if encryptedLeft(dec) {
		j.kind = kindUnreadable
		return j
	}
	m, err := livesync.ParseMeta(dec)
	if err != nil {
		j.kind, j.err = kindUndecodable, err
		return j
	}
	j.kind = kindMeta
	j.r = hold.FromMeta(m)
	j.r.Doc, j.r.Rev = id, rev
	return j
}

// chunkMembers are the members classify reads of a chunk.
var chunkMembers = map[string]bool{"_id": true, "_rev": true, "_deleted": true, "deleted": true, "_revisions": true, "data": true}

// classifyChunk is classify for a chunk, the most common document of a
// push, without decoding it: only the members classify reads are taken
// from it. ok is false when raw is not a chunk (or not an object as far
// as a walk can tell); classify then decodes it.
func classifyChunk(raw json.RawMessage) (judged, bool) {
	d := make(livesync.Doc, 6)
	if !rawjson.Members(raw, func(k, v []byte) bool {
		if chunkMembers[string(k)] {
			d[string(k)] = v
		}
		return true
	}) {
		return judged{}, false
	}
	id := d.ID()
	if !docid.IsChunkID(id) {
		return judged{}, false
	}
	rev, ok := replicatedRev(d)
	if !ok {
		return judged{kind: kindOther, id: id}, true
	}
	j := judged{kind: kindOther, id: id, rev: rev}
	if data := d["data"]; len(data) >= 2 && data[0] == '"' && !d.Deleted() {
		j.kind = kindChunk
	}
	return j, true
}

// encryptedLeft reports metadata whose chunk list is still hidden after
// decoding: encrypted properties in the path, or wrapped eden entries
// (ids such as "i:f:…" that DecodeRemote does not treat as obfuscated).
func encryptedLeft(d livesync.Doc) bool {
	var path string
	if raw, ok := d["path"]; ok && json.Unmarshal(raw, &path) == nil && strings.HasPrefix(path, encryptedPathPrefix) {
		return true
	}
	if raw, ok := d["eden"]; ok && len(raw) > 2 {
		var eden map[string]json.RawMessage
		if json.Unmarshal(raw, &eden) != nil {
			return true
		}
		_, v1 := eden[edenKeyV1]
		_, v2 := eden[edenKeyV2]
		return v1 || v2
	}
	return false
}

// isBodylessTombstone reports a _deleted document without body fields
// (a deletion pushed by a foreign writer): it must pass the purgatory so
// that an older held revision is never released after it.
func isBodylessTombstone(d livesync.Doc) bool {
	if !d.Deleted() {
		return false
	}
	for k := range d {
		if len(k) == 0 || k[0] != '_' {
			return false
		}
	}
	return true
}

// replicatedRev returns the document's _rev if the document is a valid
// replicated revision as the Store contract states it (engine/store:
// ErrInvalid): a string _id, a "N-hash" _rev, a boolean _deleted if any,
// and a _revisions that matches _rev if any. A document this rejects is
// written through for the inner store to refuse; a document it accepts
// is accepted by the inner store when it is released.
func replicatedRev(d livesync.Doc) (string, bool) {
	if d.ID() == "" {
		return "", false
	}
	var rev string
	if raw, ok := d["_rev"]; !ok || json.Unmarshal(raw, &rev) != nil {
		return "", false
	}
	gen, hash, ok := splitRev(rev)
	if !ok {
		return "", false
	}
	if raw, ok := d["_deleted"]; ok {
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			return "", false
		}
	}
	if raw, ok := d["_revisions"]; ok {
		var rv struct {
			Start int      `json:"start"`
			IDs   []string `json:"ids"`
		}
		if json.Unmarshal(raw, &rv) != nil || len(rv.IDs) == 0 || rv.Start != gen || rv.IDs[0] != hash || rv.Start < len(rv.IDs) {
			return "", false
		}
		for _, h := range rv.IDs {
			if h == "" {
				return "", false
			}
		}
	}
	return rev, true
}

// splitRev splits "N-hash" with N ≥ 1 and a non-empty hash.
func splitRev(rev string) (int, string, bool) {
	i := strings.IndexByte(rev, '-')
	if i <= 0 || i == len(rev)-1 {
		return 0, "", false
	}
	n, err := strconv.Atoi(rev[:i])
	if err != nil || n <= 0 {
		return 0, "", false
	}
	return n, rev[i+1:], true
}
