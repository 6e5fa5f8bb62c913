// Package dump reads and writes LiveSync database dumps: what CouchDB
// answers to GET /{db}/_all_docs?include_docs=true, plus an optional
// "local_docs" list holding the database's _local documents (the sync
// parameters with the E2EE salt, and the milestone with the vault's
// settings), which _all_docs does not include. A plain JSON array of
// documents and a {"docs": [...]} object (a _bulk_docs body) are read
// too.
//
// Decode turns a dump into its files (the documents in their local,
// decrypted form); a Builder makes the dump of a new vault from files.
package dump

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/livesync-go/livesync-go/engine/livesync"
)

// file is the dump as written: an _all_docs answer with local_docs.
type file struct {
	TotalRows int            `json:"total_rows"`
	Offset    int            `json:"offset"`
	Rows      []row          `json:"rows"`
	LocalDocs []livesync.Doc `json:"local_docs,omitempty"`
}

type row struct {
	ID    string       `json:"id"`
	Key   string       `json:"key"`
	Value rowValue     `json:"value"`
	Doc   livesync.Doc `json:"doc"`
}

type rowValue struct {
	Rev     string `json:"rev"`
	Deleted bool   `json:"deleted,omitempty"`
}

// Read parses a dump and returns its documents and its _local documents.
func Read(r io.Reader) (docs, local []livesync.Doc, err error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, nil, err
	}
	var arr []livesync.Doc
	if json.Unmarshal(raw, &arr) == nil {
		return splitLocal(arr)
	}
	var obj struct {
		Rows      []row          `json:"rows"`
		Docs      []livesync.Doc `json:"docs"`
		LocalDocs []livesync.Doc `json:"local_docs"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, nil, fmt.Errorf("the dump is not JSON in a known shape (CouchDB _all_docs?include_docs=true, a _bulk_docs body, or an array of documents): %v", err)
	}
	all := obj.Docs
	for i, row := range obj.Rows {
		if row.Doc == nil {
			if row.Value.Deleted {
				continue
			}
			return nil, nil, fmt.Errorf("row %d (%q) has no doc: dump with include_docs=true", i, row.ID)
		}
		all = append(all, row.Doc)
	}
	docs, local, err = splitLocal(all)
	return docs, append(local, obj.LocalDocs...), err
}

func splitLocal(all []livesync.Doc) (docs, local []livesync.Doc, err error) {
	for i, d := range all {
		id := d.ID()
		if id == "" {
			return nil, nil, fmt.Errorf("document %d has no _id", i)
		}
		if len(id) > 7 && id[:7] == "_local/" {
			local = append(local, d)
		} else {
			docs = append(docs, d)
		}
	}
	return docs, local, nil
}

// Write writes documents as a CouchDB _all_docs?include_docs=true
// answer, sorted by id as CouchDB sorts ASCII ids, with local as
// local_docs. Documents without a _rev get a deterministic "1-<md5>"
// revision computed from their JSON.
func Write(w io.Writer, docs, local []livesync.Doc) error {
	out := file{LocalDocs: local}
	for _, d := range docs {
		if d.Rev() == "" {
			d = d.Clone()
			b, err := json.Marshal(d)
			if err != nil {
				return err
			}
			sum := md5.Sum(b)
			d["_rev"] = json.RawMessage(`"1-` + hex.EncodeToString(sum[:]) + `"`)
		}
		out.Rows = append(out.Rows, row{ID: d.ID(), Key: d.ID(), Value: rowValue{Rev: d.Rev()}, Doc: d})
	}
	sort.Slice(out.Rows, func(i, j int) bool { return out.Rows[i].ID < out.Rows[j].ID })
	out.TotalRows = len(out.Rows)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}
