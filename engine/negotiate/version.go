package negotiate

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/jsstring"
)

// VersionDoc is the replicated versioning document
// {"_id":"obsydian_livesync_version","type":"versioninfo","version":12}
// Version holds the version as a JavaScript number: when
// the stored value is not a JSON number, ParseVersionDoc converts it as
// JavaScript's relational operators would (a numeric string to its value,
// "" / null / false to 0, true to 1, anything else or a missing version to
// NaN), because upstream compares it with < and ==. A Type that is not a
// JSON string decodes as "".
type VersionDoc struct {
	ID      string
	Rev     string
	Type    string
	Version float64
}

// NewVersionDoc returns the document upstream writes when it creates or
// bumps the versioning document (bumpRemoteVersion): this engine's
// DatabaseVersion. To bump an existing document, set Rev to its revision.
func NewVersionDoc() VersionDoc {
	return VersionDoc{ID: VersionDocID, Type: TypeVersionInfo, Version: DatabaseVersion}
}

// ParseVersionDoc decodes a versioning document. It fails with
// engine.ErrMalformed only if data is not a JSON object or _id/_rev are
// not strings.
func ParseVersionDoc(data []byte) (VersionDoc, error) {
	var d VersionDoc
	err := d.UnmarshalJSON(data)
	return d, err
}

// UnmarshalJSON decodes like ParseVersionDoc; on error *d is zero.
func (d *VersionDoc) UnmarshalJSON(data []byte) error {
	*d = VersionDoc{}
	m, err := decodeObject("version document", data)
	if err != nil {
		return err
	}
	id, err := decodeString("version document", "_id", m["_id"])
	if err != nil {
		return err
	}
	rev, err := decodeString("version document", "_rev", m["_rev"])
	if err != nil {
		return err
	}
	d.ID, d.Rev = id, rev
	if raw, ok := m["type"]; ok {
		_ = json.Unmarshal(raw, &d.Type) // a non-string type stays ""
	}
	d.Version = math.NaN()
	if raw, ok := m["version"]; ok {
		d.Version = jsToNumber(raw)
	}
	return nil
}

// MarshalJSON encodes the document as upstream writes it. It fails with
// engine.ErrMalformed if Version is NaN or infinite.
func (d VersionDoc) MarshalJSON() ([]byte, error) {
	if math.IsNaN(d.Version) || math.IsInf(d.Version, 0) {
		return nil, fmt.Errorf("negotiate: version document: version is not a finite number: %w", engine.ErrMalformed)
	}
	var w objWriter
	w.field("_id", d.ID)
	if d.Rev != "" {
		w.field("_rev", d.Rev)
	}
	w.field("type", d.Type)
	w.field("version", d.Version)
	return w.bytes("version document")
}

// VersionVerdict is the outcome of CheckVersion.
type VersionVerdict int

const (
	// VersionOK: the remote has exactly DatabaseVersion.
	VersionOK VersionVerdict = iota
	// VersionCreate: the document is missing; write NewVersionDoc().
	VersionCreate
	// VersionMigrate: the remote is older. Upstream's migration is a no-op
	// and then it bumps the document: write NewVersionDoc() with the old
	// document's Rev; the remote is then usable.
	VersionMigrate
	// VersionIncompatible: the type is not "versioninfo", or the version
	// is newer than DatabaseVersion (or not a number). Do not sync.
	VersionIncompatible
)

func (v VersionVerdict) String() string {
	switch v {
	case VersionOK:
		return "OK"
	case VersionCreate:
		return "CREATE"
	case VersionMigrate:
		return "MIGRATE"
	case VersionIncompatible:
		return "INCOMPATIBLE"
	}
	return "VersionVerdict(" + strconv.Itoa(int(v)) + ")"
}

// CheckVersion mirrors checkRemoteVersion (commonlib
// src/pouchdb/negotiation.ts) with upstream's barrier DatabaseVersion. doc
// is nil when the document does not exist. The error is non-nil exactly
// for VersionIncompatible; it wraps ErrIncompatible and
// engine.ErrUnsupported.
func CheckVersion(doc *VersionDoc) (VersionVerdict, error) {
	if doc == nil {
		return VersionCreate, nil
	}
	if doc.Type != TypeVersionInfo {
		return VersionIncompatible, fmt.Errorf("negotiate: version document: type is not %q: %w (%w)",
			TypeVersionInfo, ErrIncompatible, engine.ErrUnsupported)
	}
	switch {
	case doc.Version < DatabaseVersion:
		return VersionMigrate, nil
	case doc.Version == DatabaseVersion:
		return VersionOK, nil
	}
	return VersionIncompatible, fmt.Errorf("negotiate: remote database version %v is not %d or older: %w (%w)",
		doc.Version, DatabaseVersion, ErrIncompatible, engine.ErrUnsupported)
}

// jsToNumber converts a JSON value the way JavaScript's ToNumber does for
// the primitives JSON can hold; arrays and objects give NaN (JavaScript
// would stringify them first; no writer stores a version that way).
func jsToNumber(raw json.RawMessage) float64 {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return math.NaN()
	}
	switch x := v.(type) {
	case nil:
		return 0
	case bool:
		if x {
			return 1
		}
		return 0
	case float64:
		return x
	case string:
		return jsstring.Number(x)
	}
	return math.NaN()
}
