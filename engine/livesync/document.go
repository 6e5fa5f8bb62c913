package livesync

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/rawjson"
)

// Document types (the "type" field), engine/FORMAT.md §1.2, commonlib
// src/common/models/db.const.ts.
const (
	TypeNotes    = "notes"   // legacy inline note
	TypeNewNote  = "newnote" // binary file metadata
	TypePlain    = "plain"   // text file metadata
	TypeLeaf     = "leaf"    // chunk
	TypeVersion  = "versioninfo"
	TypeSyncInfo = "syncinfo"
)

// Doc is a CouchDB document as its JSON fields. It keeps every field
// verbatim, so a document read from a remote and written back loses
// nothing this engine does not model (_revisions, _conflicts, fields of
// future plugin versions). The zero value is an empty document.
type Doc map[string]json.RawMessage

// ParseDoc decodes one JSON object. The object must have a string "_id".
func ParseDoc(b []byte) (Doc, error) {
	var d Doc
	if err := json.Unmarshal(b, &d); err != nil || d == nil {
		return nil, fmt.Errorf("livesync: document is not a JSON object: %w", engine.ErrMalformed)
	}
	id, ok := d.str("_id")
	if !ok || id == "" {
		return nil, fmt.Errorf("livesync: document without a string _id: %w", engine.ErrMalformed)
	}
	return d, nil
}

// ID returns the document's _id ("" if absent or not a string).
func (d Doc) ID() string { s, _ := d.str("_id"); return s }

// Rev returns the document's _rev ("" if absent).
func (d Doc) Rev() string { s, _ := d.str("_rev"); return s }

// Type returns the document's type field ("" if absent).
func (d Doc) Type() string { s, _ := d.str("type"); return s }

// Deleted reports whether the document is a tombstone (_deleted) or a
// soft-deleted file (deleted), as commonlib src/common/utils.ts
// isDeletedEntry decides.
func (d Doc) Deleted() bool { return d.flag("_deleted") || d.flag("deleted") }

// Clone returns a shallow copy whose field map can be changed freely.
func (d Doc) Clone() Doc {
	c := make(Doc, len(d))
	for k, v := range d {
		c[k] = v
	}
	return c
}

// MarshalJSON encodes the document; a nil Doc encodes as {}.
func (d Doc) MarshalJSON() ([]byte, error) {
	if d == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(map[string]json.RawMessage(d))
}

// str reads a string member. A Doc's values are JSON already checked
// (ParseDoc, or what an endpoint checked), so the string is only
// unquoted, not decoded (engine/rawjson).
func (d Doc) str(key string) (string, bool) {
	raw, ok := d[key]
	if !ok {
		return "", false
	}
	return rawjson.String(raw)
}

func (d Doc) flag(key string) bool {
	raw, ok := d[key]
	return ok && string(raw) == "true"
}

func (d Doc) setString(key, v string) {
	d[key] = appendJSString(nil, v)
}

func (d Doc) setRaw(key string, v any) {
	b, _ := json.Marshal(v) // only called with plain values that always encode
	d[key] = b
}

// IsFileDoc reports whether the document holds a file's metadata or a
// legacy inline note: the documents a reader turns into files. Chunks,
// the version and syncinfo documents, design and local documents are not
// (commonlib ReplicateResultProcessor.ts skips them).
func (d Doc) IsFileDoc() bool {
	id := d.ID()
	if id == "" || docid.IsChunkID(id) || docid.IsSystemID(id) {
		return false
	}
	switch d.Type() {
	case TypePlain, TypeNewNote, TypeNotes:
		return true
	case "":
		_, hasData := d["data"]
		return hasData // a legacy note may lack a type
	}
	return false
}

// EdenEntry is one chunk embedded in a metadata document by the obsolete
// "eden" feature (engine/FORMAT.md §1.9).
type EdenEntry struct {
	Data  string  `json:"data"`
	Epoch float64 `json:"epoch"`
}

// Meta is the metadata document of a file (engine/FORMAT.md §1.3), in the local
// (plaintext) form.
type Meta struct {
	ID       string
	Rev      string
	Path     string   // vault path with its original case
	Children []string // ordered chunk ids, duplicates allowed
	CTime    int64    // milliseconds since the epoch
	MTime    int64    // milliseconds since the epoch
	Size     int64    // bytes of the file
	Type     string   // TypePlain or TypeNewNote (TypeNotes for legacy notes)
	Eden     map[string]EdenEntry
	Deleted  bool // soft deletion (deleted: true) or tombstone

	// Data holds the inline content of a legacy "notes" document.
	Data []string
}

// ParseMeta reads the file metadata of a document. Errors name the
// document and wrap engine.ErrMalformed.
func ParseMeta(d Doc) (Meta, error) {
	id := d.ID()
	var m struct {
		Path     *string              `json:"path"`
		Children []string             `json:"children"`
		CTime    *json.Number         `json:"ctime"`
		MTime    *json.Number         `json:"mtime"`
		Size     *json.Number         `json:"size"`
		Type     string               `json:"type"`
		Eden     map[string]EdenEntry `json:"eden"`
		Data     json.RawMessage      `json:"data"`
	}
	fields := map[string]any{"path": &m.Path, "children": &m.Children, "ctime": &m.CTime, "mtime": &m.MTime,
		"size": &m.Size, "type": &m.Type, "eden": &m.Eden, "data": &m.Data}
	if err := decodeFields(d, fields); err != nil {
		return Meta{}, &engine.Error{Op: "parse metadata", DocID: id, Stage: engine.StageDecode,
			Err: fmt.Errorf("livesync: metadata fields have wrong types: %w", engine.ErrMalformed)}
	}
	out := Meta{ID: id, Rev: d.Rev(), Children: m.Children, Type: m.Type, Eden: m.Eden, Deleted: d.Deleted()}
	if m.Path != nil {
		out.Path = *m.Path
	} else if p, ok := docid.ToPath(id); ok {
		out.Path = p
	}
	num := func(n *json.Number, dst *int64, name string) error {
		if n == nil {
			return nil
		}
		v, err := n.Float64()
		if err != nil || v != float64(int64(v)) {
			return &engine.Error{Op: "parse metadata", DocID: id, Stage: engine.StageDecode,
				Err: fmt.Errorf("livesync: %s is not an integer: %w", name, engine.ErrMalformed)}
		}
		*dst = int64(v)
		return nil
	}
	if err := num(m.CTime, &out.CTime, "ctime"); err != nil {
		return Meta{}, err
	}
	if err := num(m.MTime, &out.MTime, "mtime"); err != nil {
		return Meta{}, err
	}
	if err := num(m.Size, &out.Size, "size"); err != nil {
		return Meta{}, err
	}
	if out.Size < 0 {
		return Meta{}, &engine.Error{Op: "parse metadata", DocID: id, Stage: engine.StageDecode,
			Err: fmt.Errorf("livesync: negative size: %w", engine.ErrMalformed)}
	}
	if len(m.Data) > 0 && string(m.Data) != "null" {
		var one string
		if json.Unmarshal(m.Data, &one) == nil {
			out.Data = []string{one}
		} else if json.Unmarshal(m.Data, &out.Data) != nil {
			return Meta{}, &engine.Error{Op: "parse metadata", DocID: id, Stage: engine.StageDecode,
				Err: fmt.Errorf("livesync: inline data is neither a string nor a list of strings: %w", engine.ErrMalformed)}
		}
	}
	if out.Type == "" && out.Data != nil {
		out.Type = TypeNotes
	}
	return out, nil
}

// decodeFields decodes the members of d that fields name into the
// pointers it holds, as json.Unmarshal of the whole document into a
// struct with those json tags would, without encoding the document to
// decode it again: a key matches a field exactly or case-insensitively,
// and of several keys matching one field the last in sorted order (the
// order json.Marshal writes a map) wins.
func decodeFields(d Doc, fields map[string]any) error {
	var keys []string
	for k := range d {
		if _, ok := fields[k]; ok {
			keys = append(keys, k)
			continue
		}
		for f := range fields {
			if strings.EqualFold(k, f) {
				keys = append(keys, k)
				break
			}
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		dst, ok := fields[k]
		if !ok {
			for f, p := range fields {
				if strings.EqualFold(k, f) {
					dst = p
				}
			}
		}
		if err := json.Unmarshal(d[k], dst); err != nil {
			return err
		}
	}
	return nil
}

// Doc returns the metadata as a document in upstream's shape (children,
// _id, path, ctime, mtime, size, type, eden; deleted when set). Rev is
// included when non-empty.
func (m Meta) Doc() Doc {
	d := Doc{}
	children := m.Children
	if children == nil {
		children = []string{}
	}
	d["children"] = appendJSStringArray(nil, children)
	d.setString("_id", m.ID)
	if m.Rev != "" {
		d.setString("_rev", m.Rev)
	}
	d.setString("path", m.Path)
	d["ctime"] = appendJSInt(nil, m.CTime)
	d["mtime"] = appendJSInt(nil, m.MTime)
	d["size"] = appendJSInt(nil, m.Size)
	d.setString("type", m.Type)
	if m.Eden == nil {
		d["eden"] = json.RawMessage("{}")
	} else {
		d.setRaw("eden", m.Eden)
	}
	if m.Deleted {
		d["deleted"] = json.RawMessage("true")
	}
	return d
}

// Chunk is a chunk ("leaf") in the local, plaintext form: Data is the
// piece exactly as stored (text, or base64 for binary files). It is the
// engine's Chunk, so chunks flow unchanged between documents and the
// retrieval ports.
type Chunk = engine.Chunk

// ParseChunk reads a chunk document. Encrypted (e_) chunks must be
// decoded with Codec.DecodeRemote first; ParseChunk refuses them.
func ParseChunk(d Doc) (Chunk, error) {
	id := d.ID()
	if !docid.IsChunkID(id) {
		return Chunk{}, &engine.Error{Op: "parse chunk", DocID: id, Stage: engine.StageDecode,
			Err: fmt.Errorf("livesync: not a chunk id: %w", engine.ErrMalformed)}
	}
	if t := d.Type(); t != TypeLeaf {
		return Chunk{}, &engine.Error{Op: "parse chunk", DocID: id, Stage: engine.StageDecode,
			Err: fmt.Errorf("livesync: chunk has type %q, want leaf: %w", t, engine.ErrMalformed)}
	}
	if d.flag("e_") {
		return Chunk{}, &engine.Error{Op: "parse chunk", DocID: id, Stage: engine.StageDecrypt,
			Err: fmt.Errorf("livesync: chunk is still encrypted: %w", engine.ErrDecrypt)}
	}
	data, ok := d.str("data")
	if !ok {
		return Chunk{}, &engine.Error{Op: "parse chunk", DocID: id, Stage: engine.StageDecode,
			Err: fmt.Errorf("livesync: chunk data is not a string: %w", engine.ErrMalformed)}
	}
	return Chunk{ID: id, Data: data}, nil
}

// ChunkDoc returns a chunk as a local leaf document {_id, data, type}.
func ChunkDoc(c Chunk) Doc {
	d := Doc{}
	d.setString("_id", c.ID)
	d.setString("data", c.Data)
	d.setString("type", TypeLeaf)
	return d
}
