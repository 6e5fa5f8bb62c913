package negotiate

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/jsstring"
)

// SyncParameters is the sync-parameters document: on
// CouchDB the _local document SyncParametersDocID, on object storage the
// object JournalSyncParametersKey whose body is the same JSON (its _id is
// still SyncParametersDocID). It is never encrypted. PBKDF2Salt is the
// base64 of the vault's PBKDF2 salt, empty until a client creates one.
// ProtocolVersion 0 means the member is absent (upstream's UNSET); upstream
// writes ProtocolVersionAdvancedE2EE and never checks it. Members this type
// does not model are kept and written back unchanged.
type SyncParameters struct {
	ID              string
	Rev             string
	Type            string
	ProtocolVersion int64
	PBKDF2Salt      string

	extra map[string]json.RawMessage
}

// NewSyncParameters returns the document upstream creates
// (DEFAULT_SYNC_PARAMETERS) carrying salt in base64; a nil or empty salt
// gives the salt-less document upstream first writes when the document is
// absent.
func NewSyncParameters(salt []byte) SyncParameters {
	p := SyncParameters{
		ID:              SyncParametersDocID,
		Type:            TypeSyncParameters,
		ProtocolVersion: ProtocolVersionAdvancedE2EE,
	}
	if len(salt) > 0 {
		p.PBKDF2Salt = base64.StdEncoding.EncodeToString(salt)
	}
	return p
}

// ParseSyncParameters decodes a sync-parameters document or journal
// object. It fails with engine.ErrMalformed if data is not a JSON object
// or a modelled member has the wrong JSON type. It does not check the salt
// (see Salt) or the type.
func ParseSyncParameters(data []byte) (SyncParameters, error) {
	var p SyncParameters
	err := p.UnmarshalJSON(data)
	return p, err
}

// UnmarshalJSON decodes like ParseSyncParameters; on error *p is zero.
func (p *SyncParameters) UnmarshalJSON(data []byte) (err error) {
	const what = "sync parameters"
	*p = SyncParameters{}
	defer func() {
		if err != nil {
			*p = SyncParameters{}
		}
	}()
	m, err := decodeObject(what, data)
	if err != nil {
		return err
	}
	if p.ID, err = decodeString(what, "_id", m["_id"]); err != nil {
		return err
	}
	if p.Rev, err = decodeString(what, "_rev", m["_rev"]); err != nil {
		return err
	}
	if p.Type, err = decodeString(what, "type", m["type"]); err != nil {
		return err
	}
	if p.ProtocolVersion, err = decodeInt(what, "protocolVersion", m["protocolVersion"]); err != nil {
		return err
	}
	if p.PBKDF2Salt, err = decodeString(what, "pbkdf2salt", m["pbkdf2salt"]); err != nil {
		return err
	}
	for _, k := range []string{"_id", "_rev", "type", "protocolVersion", "pbkdf2salt"} {
		delete(m, k)
	}
	if len(m) > 0 {
		p.extra = m
	}
	return nil
}

// MarshalJSON encodes the document: _id, _rev (if set), type,
// protocolVersion (if set), pbkdf2salt, then the unmodelled members.
func (p SyncParameters) MarshalJSON() ([]byte, error) {
	var w objWriter
	w.field("_id", p.ID)
	if p.Rev != "" {
		w.field("_rev", p.Rev)
	}
	w.field("type", p.Type)
	if p.ProtocolVersion != 0 {
		w.field("protocolVersion", p.ProtocolVersion)
	}
	w.field("pbkdf2salt", p.PBKDF2Salt)
	w.extras(p.extra)
	return w.bytes("sync parameters")
}

// Salt decodes PBKDF2Salt. It returns ErrNoSalt if the salt is empty, and
// an error wrapping engine.ErrMalformed if it is not base64 or does not
// decode to SaltSize bytes. Decoding is forgiving like the browser's atob
// that upstream uses (white space ignored, padding optional). Upstream
// itself would silently use an empty salt for invalid base64 and any
// length; this engine refuses instead of deriving a key nobody else uses.
// Error messages never contain the salt.
func (p SyncParameters) Salt() ([]byte, error) {
	if p.PBKDF2Salt == "" {
		return nil, ErrNoSalt
	}
	salt, ok := jsstring.Atob(p.PBKDF2Salt)
	if !ok {
		return nil, fmt.Errorf("negotiate: pbkdf2salt: invalid base64: %w", engine.ErrMalformed)
	}
	if len(salt) != SaltSize {
		return nil, fmt.Errorf("negotiate: pbkdf2salt: %d bytes, want %d: %w", len(salt), SaltSize, engine.ErrMalformed)
	}
	return salt, nil
}

// SaltOf returns the salt of the sync-parameters document raw, nil when
// it has none (an empty pbkdf2salt). A document that does not parse or a
// salt that is not valid gives an error.
func SaltOf(raw []byte) ([]byte, error) {
	p, err := ParseSyncParameters(raw)
	if err != nil {
		return nil, err
	}
	salt, err := p.Salt()
	if errors.Is(err, ErrNoSalt) {
		return nil, nil
	}
	return salt, err
}

// NewSalt reads SaltSize bytes from r (crypto/rand.Reader if r is nil), as
// upstream's createPBKDF2Salt does. Call it only when NeedsNewSalt says so.
func NewSalt(r io.Reader) ([]byte, error) {
	if r == nil {
		r = rand.Reader
	}
	salt := make([]byte, SaltSize)
	if _, err := io.ReadFull(r, salt); err != nil {
		return nil, fmt.Errorf("negotiate: new salt: %w", err)
	}
	return salt, nil
}

// NeedsNewSalt decides, from the result of reading the sync parameters,
// whether this client must create the vault's salt. It encodes the rule
// this engine follows (commonlib src/replication/SyncParamsHandler.ts,
// hardened after obsidian-livesync issue #1147): a new salt is created ONLY when
// the document is proven absent (readErr wraps engine.ErrNotFound) or is
// present with an empty pbkdf2salt. Any other read error is returned
// (wrapped) with false: a transport, auth or decode failure never leads to
// a new salt, because a second salt splits the vault into two key spaces.
// A nil doc with a nil readErr is an error wrapping engine.ErrMalformed.
//
// Lifecycle: when true, write NewSyncParameters(salt) with salt from
// NewSalt (with doc's Rev and members when doc is present; upstream first
// writes a salt-less document and then fills it, which is equivalent),
// treat a conflict (409) as a failed attempt, then read the document again
// and use the salt that is stored, which may be another client's.
func NeedsNewSalt(doc *SyncParameters, readErr error) (bool, error) {
	if readErr != nil {
		if errors.Is(readErr, engine.ErrNotFound) {
			return true, nil
		}
		return false, fmt.Errorf("negotiate: read sync parameters: %w", readErr)
	}
	if doc == nil {
		return false, fmt.Errorf("negotiate: read sync parameters: no document and no error: %w", engine.ErrMalformed)
	}
	return doc.PBKDF2Salt == "", nil
}

// JournalEpoch returns "<protocolVersion>:<pbkdf2salt>", the identity of a
// bucket's lifetime that object-storage checkpoints record (
// commonlib src/replication/journal/JournalSyncCore.ts). An absent
// protocolVersion formats as "undefined", as JavaScript does.
func JournalEpoch(p SyncParameters) string {
	v := "undefined"
	if p.ProtocolVersion != 0 {
		v = strconv.FormatInt(p.ProtocolVersion, 10)
	}
	return v + ":" + p.PBKDF2Salt
}
