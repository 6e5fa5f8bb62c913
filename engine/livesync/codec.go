package livesync

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/chunk"
	"github.com/livesync-go/livesync-go/engine/chunkid"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/e2ee"
)

// Config configures a Codec. The zero value is a codec for a new,
// unencrypted vault with default settings.
type Config struct {
	// Settings are the vault's format settings.
	Settings Settings
	// Salt is the remote's PBKDF2 salt (the pbkdf2salt of its sync
	// parameters, 32 bytes). It is needed only to encrypt or decrypt
	// remote documents when Settings.Encrypt is on; ids and local
	// documents do not depend on it.
	Salt []byte
	// Key, if set, is the E2EE V2 master key already derived from the
	// passphrase and Salt (for hosts that derive it with WebCrypto). It
	// takes precedence over deriving from Settings.Passphrase; such a
	// codec handles V2 ciphertext only, not the legacy V1 family.
	Key *e2ee.Key
	// Rand is the source of IVs and HKDF salts; nil means crypto/rand.
	// Tests inject a reader to reproduce upstream ciphertexts.
	Rand io.Reader
}

// Codec turns files into LiveSync documents and back, and converts
// documents between the local (plaintext) form and the remote form
// (encrypted chunks, obfuscated metadata, compressed data). A Codec is safe
// for concurrent use. The E2EE master key is derived once per Codec (and
// cached per passphrase and salt process-wide), never per chunk.
type Codec struct {
	s      Settings
	ids    *docid.Mapper
	hasher *chunkid.Hasher
	split  chunk.Settings
	cipher *e2ee.Cipher // nil unless Encrypt and a salt or key is known
}

// New returns a Codec for c.
func New(c Config) (*Codec, error) {
	s := c.Settings
	if err := s.Validate(); err != nil {
		return nil, err
	}
	idOpts := docid.Options{CaseSensitive: s.CaseSensitive}
	if s.PathObfuscation {
		idOpts.ObfuscationPassphrase = s.Passphrase
	}
	hasher, err := chunkid.New(s.hashAlg(), s.Encrypt, s.Passphrase)
	if err != nil {
		return nil, err
	}
	cd := &Codec{
		s:      s,
		ids:    docid.New(idOpts),
		hasher: hasher,
		split: chunk.Settings{
			Splitter:         s.splitter(),
			CustomChunkSize:  s.CustomChunkSize,
			MinimumChunkSize: s.MinimumChunkSize,
		},
	}
	if s.Encrypt && (c.Key != nil || c.Salt != nil) {
		opts := e2ee.Options{Rand: c.Rand, Algorithm: s.e2eeAlg(), DynamicIterationCount: s.DynamicIterationCount}
		if c.Key != nil {
			cd.cipher = e2ee.NewWithKey(c.Key, opts)
		} else {
			cd.cipher = e2ee.New(s.Passphrase, c.Salt, opts)
		}
	}
	return cd, nil
}

// Settings returns the codec's settings.
func (c *Codec) Settings() Settings { return c.s }

// DocID returns the document id of a vault path.
func (c *Codec) DocID(path string) string { return c.ids.FromPath(path) }

// ChunkID returns the id of a chunk piece.
func (c *Codec) ChunkID(piece string) string { return c.hasher.ID(piece) }

// FileDocs turns a file into its local documents: the metadata document
// and the chunks it references, each unique chunk once, in order of first
// use. Whether the file is text (a "plain" document) or binary ("newnote")
// is decided from its path as upstream decides (isPlainText). Text files
// are read as UTF-8; as in upstream, bytes that are not valid UTF-8 in a
// text file are replaced by U+FFFD.
func (c *Codec) FileDocs(path string, data []byte, ctime, mtime int64) (Meta, []Chunk, error) {
	isText := chunk.IsPlainText(path)
	typ := TypeNewNote
	if isText {
		typ = TypePlain
	}
	pieces, err := chunk.Split(path, data, isText, c.split)
	if err != nil {
		return Meta{}, nil, &engine.Error{Op: "split file", DocID: c.DocID(path), Stage: engine.StageEncode, Err: err}
	}
	m := Meta{
		ID:       c.DocID(path),
		Path:     path,
		Children: make([]string, 0, len(pieces)),
		CTime:    ctime,
		MTime:    mtime,
		Size:     int64(len(data)),
		Type:     typ,
	}
	var chunks []Chunk
	seen := make(map[string]struct{}, len(pieces))
	for _, p := range pieces {
		id := c.hasher.ID(p)
		m.Children = append(m.Children, id)
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		chunks = append(chunks, Chunk{ID: id, Data: p})
	}
	return m, chunks, nil
}

// ChunkGetter returns the plaintext data of a chunk by id. It returns an
// error wrapping engine.ErrNotFound when the chunk is not available.
type ChunkGetter func(id string) (string, error)

// ReadFile reassembles a file from its metadata and chunks (engine/FORMAT.md
// §3.6): eden entries first, then get for each child; text documents are
// joined and UTF-8 encoded, binary ones base64-decoded piece by piece
// (or decoded from the legacy "%" form). The result must have the size the
// metadata records (a size of 0 is not checked, as upstream does not);
// otherwise the error wraps engine.ErrSizeMismatch. Errors are
// *engine.Error naming the document and the stage.
func ReadFile(m Meta, get ChunkGetter) ([]byte, error) {
	fail := func(stage engine.Stage, err error) error {
		return &engine.Error{Op: "read file", DocID: m.ID, Stage: stage, Err: err}
	}
	var pieces []string
	if m.Type == TypeNotes || (m.Children == nil && m.Data != nil) {
		pieces = m.Data
	} else {
		pieces = make([]string, 0, len(m.Children))
		missing := 0
		var firstErr error
		for _, id := range m.Children {
			if e, ok := m.Eden[id]; ok {
				pieces = append(pieces, e.Data)
				continue
			}
			data, err := get(id)
			if err != nil {
				missing++
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			pieces = append(pieces, data)
		}
		if missing > 0 {
			return nil, fail(engine.StageDecode, fmt.Errorf("livesync: %d of %d chunks unavailable (first: %w)", missing, len(m.Children), wrapMissing(firstErr)))
		}
	}
	var out []byte
	if m.Type == TypePlain || (m.Type != TypeNewNote && chunk.IsPlainText(m.Path)) || (m.Type == TypeNotes && chunk.IsPlainText(m.Path)) {
		n := 0
		for _, p := range pieces {
			n += len(p)
		}
		out = make([]byte, 0, n)
		for _, p := range pieces {
			out = append(out, p...)
		}
	} else {
		var err error
		out, err = decodeBinary(pieces)
		if err != nil {
			return nil, fail(engine.StageDecode, err)
		}
	}
	if m.Size != 0 && int64(len(out)) != m.Size {
		return nil, fail(engine.StageSize, fmt.Errorf("livesync: reassembled %d bytes, metadata says %d: %w", len(out), m.Size, engine.ErrSizeMismatch))
	}
	return out, nil
}

func wrapMissing(err error) error {
	if err == nil {
		return engine.ErrMissingChunk
	}
	return fmt.Errorf("%w: %w", engine.ErrMissingChunk, err)
}

// decodeBinary mirrors octagonal-wheels src/binary/index.ts decodeBinary:
// the legacy "encodedUTF16" form when the first piece starts with "%",
// otherwise every piece is base64 decoded on its own and concatenated.
func decodeBinary(pieces []string) ([]byte, error) {
	if len(pieces) > 0 && strings.HasPrefix(pieces[0], "%") {
		var out []byte
		for i, p := range pieces {
			if i == 0 {
				p = p[1:]
			}
			for _, u := range utf16Units(p) {
				if u >= 0x26 && u <= 0x7e && u != 0x3a {
					out = append(out, byte(u))
				} else {
					out = append(out, byte(u-0xc0))
				}
			}
		}
		return out, nil
	}
	n := 0
	for _, p := range pieces {
		n += base64.StdEncoding.DecodedLen(len(p))
	}
	out := make([]byte, 0, n)
	for i, p := range pieces {
		dst := out[len(out):cap(out)]
		k, err := base64.StdEncoding.Decode(dst, []byte(p))
		if err != nil {
			return nil, fmt.Errorf("livesync: binary chunk %d of %d is not valid base64: %w", i+1, len(pieces), engine.ErrMalformed)
		}
		out = out[:len(out)+k]
	}
	return out, nil
}

func utf16Units(s string) []uint16 {
	out := make([]uint16, 0, len(s))
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			out = append(out, uint16(0xd800+(r>>10)), uint16(0xdc00+(r&0x3ff)))
		} else {
			out = append(out, uint16(r))
		}
	}
	return out
}

// Encrypted metadata markers (commonlib src/pouchdb/encryption.ts).
const (
	encryptedPathPrefix = "/\\:"
	edenKeyV2           = "h:++encrypted-hkdf"
	edenKeyV1           = "h:++encrypted"
)

func (c *Codec) encryptRemote() bool { return c.s.Encrypt && c.s.Passphrase != "" }

func (c *Codec) needCipher(id string) (*e2ee.Cipher, error) {
	if c.cipher == nil {
		return nil, &engine.Error{Op: "remote transform", DocID: id, Stage: engine.StageEncrypt,
			Err: fmt.Errorf("livesync: encryption is on but no salt or key was given: %w", engine.ErrUnsupported)}
	}
	return c.cipher, nil
}

// isPureTombstone reports a deletion without body fields, which
// transform-pouch passes through untouched.
func isPureTombstone(d Doc) bool {
	if !d.flag("_deleted") {
		return false
	}
	for k := range d {
		if !strings.HasPrefix(k, "_") {
			return false
		}
	}
	return true
}

// EncodeRemote converts a local document into the form a CouchDB remote
// stores (engine/FORMAT.md §4.4, §4.5): data compressed when Compression is on;
// with encryption, chunk and syncinfo data encrypted and flagged e_,
// non-empty eden wrapped, and the path, times, size and children of
// obfuscated (f:) metadata encrypted into path. _local documents and pure
// tombstones are returned unchanged. The input is not modified.
func (c *Codec) EncodeRemote(d Doc) (Doc, error) {
	id := d.ID()
	if strings.HasPrefix(id, "_local/") || isPureTombstone(d) {
		return d, nil
	}
	out := d.Clone()
	fail := func(stage engine.Stage, err error) (Doc, error) {
		return nil, &engine.Error{Op: "encode remote document", DocID: id, Stage: stage, Err: err}
	}
	if c.s.Compression {
		if data, ok := out.str("data"); ok && !strings.HasPrefix(data, compressedMark) && !out.flag("e_") {
			z, err := compressData(data)
			if err != nil {
				return fail(engine.StageEncode, err)
			}
			out.setString("data", z)
		}
	}
	if !c.encryptRemote() {
		return out, nil
	}
	cipher, err := c.needCipher(id)
	if err != nil {
		return nil, err
	}
	v1 := c.s.E2EEAlgorithm == E2EEV1 || c.s.E2EEAlgorithm == E2EEForceV1
	if strings.HasPrefix(id, "h:+") || id == "syncinfo" {
		if !out.flag("e_") {
			data, ok := out.str("data")
			if !ok {
				return fail(engine.StageEncode, fmt.Errorf("livesync: chunk data is not a string: %w", engine.ErrMalformed))
			}
			enc, err := cipher.EncryptString(data)
			if err != nil {
				return fail(engine.StageEncrypt, err)
			}
			out.setString("data", enc)
			out["e_"] = json.RawMessage("true")
		}
	}
	if raw, ok := out["eden"]; ok {
		var eden map[string]json.RawMessage
		if json.Unmarshal(raw, &eden) == nil {
			key := edenKeyV2
			if v1 {
				key = edenKeyV1
			}
			_, doneV1 := eden[edenKeyV1]
			_, doneV2 := eden[edenKeyV2]
			// V2 wraps only a non-empty eden; V1 always wraps it.
			if !doneV1 && !doneV2 && (len(eden) > 0 || v1) {
				enc, err := cipher.EncryptString(string(raw))
				if err != nil {
					return fail(engine.StageEncrypt, err)
				}
				out.setRaw("eden", map[string]EdenEntry{key: {Data: enc, Epoch: 999999}})
			}
		}
	}
	if strings.HasPrefix(id, "f:") && v1 {
		// V1 obfuscates only the path, deterministically; times, size
		// and children stay in plaintext.
		path, _ := out.str("path")
		if !(strings.HasPrefix(path, "%") && utf16Len(path) > 64) {
			enc, err := cipher.ObfuscatePathV1(path)
			if err != nil {
				return fail(engine.StageEncrypt, err)
			}
			out.setString("path", enc)
		}
		return out, nil
	}
	if strings.HasPrefix(id, "f:") {
		path, _ := out.str("path")
		if !strings.HasPrefix(path, encryptedPathPrefix) {
			plain, err := metaPlaintext(out)
			if err != nil {
				return fail(engine.StageEncode, err)
			}
			enc, err := cipher.EncryptString(plain)
			if err != nil {
				return fail(engine.StageEncrypt, err)
			}
			out.setString("path", encryptedPathPrefix+enc)
			out["mtime"] = json.RawMessage("0")
			out["ctime"] = json.RawMessage("0")
			out["size"] = json.RawMessage("0")
			out["children"] = json.RawMessage("[]")
		}
	}
	return out, nil
}

// metaPlaintext builds JSON.stringify({path, mtime, ctime, size, children})
// exactly, children omitted when absent (commonlib src/pouchdb/encryption.ts).
func metaPlaintext(d Doc) (string, error) {
	var b []byte
	b = append(b, `{"path":`...)
	path, _ := d.str("path")
	b = appendJSString(b, path)
	for _, k := range []string{"mtime", "ctime", "size"} {
		b = append(b, ',', '"')
		b = append(b, k...)
		b = append(b, '"', ':')
		raw, ok := d[k]
		if !ok {
			// JSON.stringify drops undefined properties.
			b = b[:len(b)-len(k)-4]
			continue
		}
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return "", fmt.Errorf("livesync: %s is not a number: %w", k, engine.ErrMalformed)
		}
		b = append(b, n...)
	}
	if raw, ok := d["children"]; ok {
		var children []string
		if err := json.Unmarshal(raw, &children); err != nil {
			return "", fmt.Errorf("livesync: children is not a list of strings: %w", engine.ErrMalformed)
		}
		b = append(b, `,"children":`...)
		b = appendJSStringArray(b, children)
	}
	b = append(b, '}')
	return string(b), nil
}

// mayBeCompressed returns the data of a document whose data may be
// compressed: compressedMark starts with a control character, which JSON
// always escapes, so a data string that does not start with an escape is
// not read (it is most of a chunk).
func mayBeCompressed(d Doc) (string, bool) {
	if raw := d["data"]; len(raw) < 2 || raw[0] != '"' || raw[1] != '\\' {
		return "", false
	}
	return d.str("data")
}

// DecodeRemote converts a document read from a CouchDB remote into the
// local plaintext form: e_ chunks and syncinfo decrypted (any scheme the
// upstream reader accepts), encrypted eden merged back, obfuscated f:
// metadata restored, and compressed data inflated. Documents that carry
// no ciphertext are returned with only decompression applied, even when
// no passphrase is configured. The input is not modified. Errors are
// *engine.Error with Stage decrypt or decode; a wrong passphrase wraps
// engine.ErrDecrypt.
func (c *Codec) DecodeRemote(d Doc) (Doc, error) {
	id := d.ID()
	if strings.HasPrefix(id, "_local/") || isPureTombstone(d) {
		return d, nil
	}
	out := d.Clone()
	fail := func(stage engine.Stage, err error) (Doc, error) {
		return nil, &engine.Error{Op: "decode remote document", DocID: id, Stage: stage, Err: err}
	}
	if out.flag("e_") {
		data, ok := out.str("data")
		if !ok {
			return fail(engine.StageDecode, fmt.Errorf("livesync: encrypted data is not a string: %w", engine.ErrMalformed))
		}
		cipher, err := c.needCipher(id)
		if err != nil {
			return nil, err
		}
		plain, err := cipher.DecryptString(data)
		if err != nil {
			return fail(engine.StageDecrypt, err)
		}
		out.setString("data", plain)
		delete(out, "e_")
	}
	if raw, ok := out["eden"]; ok && len(raw) > 2 {
		var eden map[string]json.RawMessage
		if err := json.Unmarshal(raw, &eden); err != nil {
			return fail(engine.StageDecode, fmt.Errorf("livesync: eden is not an object: %w", engine.ErrMalformed))
		}
		changed := false
		for _, key := range []string{edenKeyV2, edenKeyV1} {
			enc, ok := eden[key]
			if !ok {
				continue
			}
			var e EdenEntry
			if err := json.Unmarshal(enc, &e); err != nil {
				return fail(engine.StageDecode, fmt.Errorf("livesync: encrypted eden is malformed: %w", engine.ErrMalformed))
			}
			cipher, err := c.needCipher(id)
			if err != nil {
				return nil, err
			}
			plain, err := cipher.DecryptString(e.Data)
			if err != nil {
				return fail(engine.StageDecrypt, err)
			}
			var inner map[string]json.RawMessage
			if err := json.Unmarshal([]byte(plain), &inner); err != nil {
				return fail(engine.StageDecode, fmt.Errorf("livesync: decrypted eden is not an object: %w", engine.ErrMalformed))
			}
			delete(eden, key)
			for k, v := range inner {
				eden[k] = v
			}
			changed = true
		}
		if changed {
			out.setRaw("eden", eden)
		}
	}
	if strings.HasPrefix(id, "f:") {
		path, _ := out.str("path")
		switch {
		case strings.HasPrefix(path, encryptedPathPrefix):
			cipher, err := c.needCipher(id)
			if err != nil {
				return nil, err
			}
			plain, err := cipher.DecryptString(path[len(encryptedPathPrefix):])
			if err != nil {
				return fail(engine.StageDecrypt, err)
			}
			var props map[string]json.RawMessage
			if err := json.Unmarshal([]byte(plain), &props); err != nil {
				return fail(engine.StageDecode, fmt.Errorf("livesync: decrypted metadata is not a JSON object: %w", engine.ErrMalformed))
			}
			for _, k := range []string{"path", "mtime", "ctime", "size", "children"} {
				if v, ok := props[k]; ok {
					out[k] = v
				}
			}
		case strings.HasPrefix(path, "%") && utf16Len(path) > 64:
			cipher, err := c.needCipher(id)
			if err != nil {
				return nil, err
			}
			plain, err := cipher.DecryptString(path)
			if err != nil {
				return fail(engine.StageDecrypt, err)
			}
			out.setString("path", plain)
		}
	}
	if data, ok := mayBeCompressed(out); ok && strings.HasPrefix(data, compressedMark) {
		plain, err := decompressData(data)
		if err != nil {
			return fail(engine.StageDecode, err)
		}
		out.setString("data", plain)
	}
	return out, nil
}

func (s Settings) hashAlg() chunkid.HashAlg {
	switch s.HashAlg {
	case "", HashXXHash64:
		return chunkid.XXHash64
	case HashLegacy:
		return chunkid.Legacy
	default:
		return chunkid.HashAlg(s.HashAlg)
	}
}

func (s Settings) e2eeAlg() e2ee.Algorithm {
	switch s.E2EEAlgorithm {
	case E2EEV1:
		return e2ee.AlgV1
	case E2EEForceV1:
		return e2ee.AlgForceV1
	default:
		return e2ee.AlgV2
	}
}

func (s Settings) splitter() chunk.SplitterVersion {
	switch s.Splitter {
	case "":
		return chunk.SplitterVersion(SplitterV3)
	default:
		return chunk.SplitterVersion(s.Splitter)
	}
}
