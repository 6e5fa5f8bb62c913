package dump

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// ErrNeedPassphrase means the dump's vault is end-to-end encrypted or
// obfuscates paths, and no passphrase was given.
var ErrNeedPassphrase = errors.New("dump: the vault is end-to-end encrypted, and no passphrase was given")

// Settings reads a dump's vault settings from the milestone's PREFERRED
// tweak values and the E2EE salt from the sync parameters. Without a
// milestone the new-vault defaults apply, with encryption turned on if
// any document carries ciphertext. passphrase is the vault's (""
// without one).
func Settings(docs, local []livesync.Doc, passphrase string) (livesync.Settings, []byte, error) {
	s := livesync.Settings{Passphrase: passphrase}
	var salt []byte
	haveMilestone := false
	for _, d := range local {
		switch d.ID() {
		case negotiate.SyncParametersDocID:
			p, err := negotiate.ParseSyncParameters(mustJSON(d))
			if err == nil {
				salt, err = p.Salt()
			}
			if err != nil {
				return s, nil, fmt.Errorf("the sync parameters document: %w", err)
			}
		case negotiate.MilestoneDocID:
			m, err := negotiate.ParseMilestone(mustJSON(d))
			if err != nil {
				return s, nil, fmt.Errorf("the milestone document: %w", err)
			}
			if pref, ok := m.TweakValues[negotiate.PreferredNode]; ok {
				ps, err := livesync.FromTweakValues(s, pref)
				if err != nil && !(errors.Is(err, engine.ErrUnsupported) && passphrase == "") {
					return s, nil, err
				}
				s, haveMilestone = ps, true
			}
		}
	}
	if !haveMilestone {
		for _, d := range docs {
			if _, ok := d["e_"]; ok {
				s.Encrypt = true
				break
			}
		}
	}
	if (s.Encrypt || s.PathObfuscation) && passphrase == "" {
		return s, nil, ErrNeedPassphrase
	}
	if s.Encrypt && salt == nil {
		return s, nil, fmt.Errorf("the vault is encrypted but the dump has no %s document (its salt): add it under \"local_docs\"", negotiate.SyncParametersDocID)
	}
	return s, salt, nil
}

func mustJSON(d livesync.Doc) []byte {
	b, _ := d.MarshalJSON()
	return b
}

// Vault is a dump's vault, every document decoded to its local form.
type Vault struct {
	// Files are the file metadata documents.
	Files []livesync.Meta
	// Broken are the file documents whose metadata does not parse.
	Broken []Broken
	plain  map[string]livesync.Doc
}

// Broken is a file document that does not parse.
type Broken struct {
	ID  string
	Err error
}

// Decode decodes every document of a dump (Settings gives the vault's
// settings; passphrase is the vault's). A wrong passphrase fails at the
// first encrypted document (an error wrapping engine.ErrDecrypt), before
// any file is read.
func Decode(docs, local []livesync.Doc, passphrase string) (*Vault, error) {
	s, salt, err := Settings(docs, local, passphrase)
	if err != nil {
		return nil, err
	}
	codec, err := livesync.New(livesync.Config{Settings: s, Salt: salt})
	if err != nil {
		return nil, err
	}
	v := &Vault{plain: make(map[string]livesync.Doc, len(docs))}
	for _, d := range docs {
		pd, err := codec.DecodeRemote(d)
		if err != nil {
			return nil, err
		}
		v.plain[pd.ID()] = pd
		if pd.IsFileDoc() {
			meta, err := livesync.ParseMeta(pd)
			if err != nil {
				v.Broken = append(v.Broken, Broken{ID: pd.ID(), Err: err})
				continue
			}
			v.Files = append(v.Files, meta)
		}
	}
	return v, nil
}

// ReadFile reassembles the content of the file m from the dump's chunks.
func (v *Vault) ReadFile(m livesync.Meta) ([]byte, error) {
	return livesync.ReadFile(m, func(id string) (string, error) {
		d, ok := v.plain[id]
		if !ok {
			return "", engine.ErrNotFound
		}
		c, err := livesync.ParseChunk(d)
		return c.Data, err
	})
}

// Builder makes the dump of a new vault from files.
type Builder struct {
	settings livesync.Settings
	salt     []byte
	codec    *livesync.Codec
	seen     map[string]bool
	chunks   []livesync.Doc
	metas    []livesync.Doc
}

// FileError is a file a Builder could not add.
type FileError struct {
	Path string
	Err  error
}

func (e *FileError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

// NewBuilder returns a Builder of a new vault with settings s (a random
// salt when it is encrypted).
func NewBuilder(s livesync.Settings) (*Builder, error) {
	var salt []byte
	if s.Encrypt {
		salt = make([]byte, 32)
		if _, err := rand.Read(salt); err != nil {
			return nil, err
		}
	}
	codec, err := livesync.New(livesync.Config{Settings: s, Salt: salt})
	if err != nil {
		return nil, err
	}
	return &Builder{settings: s, salt: salt, codec: codec, seen: map[string]bool{}}, nil
}

// Add adds the file at vault path p: its chunks (each once in the dump)
// and its metadata, both encoded as a remote holds them. A file that
// cannot be split is a *FileError.
func (b *Builder) Add(p string, data []byte, mtime time.Time) error {
	ms := mtime.UnixMilli()
	meta, chunks, err := b.codec.FileDocs(p, data, ms, ms)
	if err != nil {
		return &FileError{Path: p, Err: err}
	}
	for _, c := range chunks {
		if b.seen[c.ID] {
			continue
		}
		b.seen[c.ID] = true
		rd, err := b.codec.EncodeRemote(livesync.ChunkDoc(c))
		if err != nil {
			return err
		}
		b.chunks = append(b.chunks, rd)
	}
	rd, err := b.codec.EncodeRemote(meta.Doc())
	if err != nil {
		return err
	}
	b.metas = append(b.metas, rd)
	return nil
}

// Files and Chunks count the files and distinct chunks added.
func (b *Builder) Files() int  { return len(b.metas) }
func (b *Builder) Chunks() int { return len(b.chunks) }

// Write writes the dump: the chunks before the metadata naming them, the
// versioning document, and as _local documents the sync parameters (with
// the salt, when encrypting) and a milestone in which device, as a new
// node, is the only accepted one and the vault's settings are PREFERRED.
func (b *Builder) Write(w io.Writer, device negotiate.DeviceInfo, now time.Time) error {
	toDoc := func(v any) (livesync.Doc, error) {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		return livesync.ParseDoc(raw)
	}
	version, err := toDoc(negotiate.NewVersionDoc())
	if err != nil {
		return err
	}
	var local []livesync.Doc
	if b.salt != nil {
		p, err := toDoc(negotiate.NewSyncParameters(b.salt))
		if err != nil {
			return err
		}
		local = append(local, p)
	}
	node, err := negotiate.NewNodeID()
	if err != nil {
		return err
	}
	ms := negotiate.NewMilestone(node, now)
	ms.Register(node, negotiate.CouchDBChunkRange, device, b.settings.TweakValues(), now)
	m, err := toDoc(ms)
	if err != nil {
		return err
	}
	docs := append(append(append([]livesync.Doc(nil), b.chunks...), b.metas...), version)
	return Write(w, docs, append(local, m))
}
