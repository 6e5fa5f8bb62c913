package replicate_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
)

// memEP is a small in-memory CouchDB-like endpoint: revision trees as sets
// of known revisions and leaves, a changes feed with integer sequences,
// _local documents, call counters and fault hooks. It stands in for
// engine/store's memory store.
type memEP struct {
	name string

	mu      sync.Mutex
	docs    map[string]*fdoc
	seq     int
	changed chan struct{} // closed and replaced on every write
	locals  map[string]json.RawMessage

	// counters
	changesCalls  int
	limits        []int // Limit of every Changes call
	bulkGetCalls  int
	bulkGetDocs   int
	bulkDocsCalls int
	bulkDocsDocs  int // documents of successful BulkDocs calls
	putLocalCalls int

	// fault hooks, called with mu not held
	onChanges  func(req engine.ChangesRequest) error
	onBulkDocs func(docs []json.RawMessage) error
}

type fdoc struct {
	bodies map[string]json.RawMessage // rev → full document with _revisions
	known  map[string]bool            // every revision of the tree, ancestors included
	leaves map[string]bool
	seq    int
}

func newMem(name string) *memEP {
	return &memEP{name: name, docs: map[string]*fdoc{}, locals: map[string]json.RawMessage{}, changed: make(chan struct{})}
}

type revisions struct {
	Start int      `json:"start"`
	IDs   []string `json:"ids"`
}

func revGen(rev string) int {
	n, _ := strconv.Atoi(rev[:strings.IndexByte(rev, '-')])
	return n
}

// putLocked stores one revision (new_edits=false semantics).
func (m *memEP) putLocked(raw json.RawMessage) error {
	var head struct {
		ID        string     `json:"_id"`
		Rev       string     `json:"_rev"`
		Revisions *revisions `json:"_revisions"`
	}
	if err := json.Unmarshal(raw, &head); err != nil || head.ID == "" || head.Rev == "" {
		return fmt.Errorf("bad doc %s", raw)
	}
	d := m.docs[head.ID]
	if d == nil {
		d = &fdoc{bodies: map[string]json.RawMessage{}, known: map[string]bool{}, leaves: map[string]bool{}}
		m.docs[head.ID] = d
	}
	if _, ok := d.bodies[head.Rev]; ok {
		return nil
	}
	d.bodies[head.Rev] = slices.Clone(raw)
	if !d.known[head.Rev] {
		d.leaves[head.Rev] = true
	}
	d.known[head.Rev] = true
	if head.Revisions != nil {
		for i := 1; i < len(head.Revisions.IDs); i++ {
			anc := fmt.Sprintf("%d-%s", head.Revisions.Start-i, head.Revisions.IDs[i])
			d.known[anc] = true
			delete(d.leaves, anc)
		}
	}
	m.seq++
	d.seq = m.seq
	close(m.changed)
	m.changed = make(chan struct{})
	return nil
}

func deletedBody(raw json.RawMessage) bool {
	var b struct {
		Deleted bool `json:"_deleted"`
	}
	_ = json.Unmarshal(raw, &b)
	return b.Deleted
}

// leavesLocked returns the leaves, winner first (CouchDB's rule).
func (m *memEP) leavesLocked(d *fdoc) []string {
	var ls []string
	for l := range d.leaves {
		ls = append(ls, l)
	}
	slices.SortFunc(ls, func(a, b string) int {
		da, db := deletedBody(d.bodies[a]), deletedBody(d.bodies[b])
		if da != db {
			if da {
				return 1
			}
			return -1
		}
		if ga, gb := revGen(a), revGen(b); ga != gb {
			return gb - ga
		}
		return strings.Compare(b, a)
	})
	return ls
}

// write creates a new revision of id on top of its winner (new_edits=true),
// returning the new rev. body must not carry _id/_rev.
func (m *memEP) write(id string, body map[string]any) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var parent revisions
	if d := m.docs[id]; d != nil {
		w := m.leavesLocked(d)[0]
		_ = json.Unmarshal(mustField(d.bodies[w], "_revisions"), &parent)
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	revs := revisions{Start: parent.Start + 1, IDs: append([]string{h}, parent.IDs...)}
	doc := map[string]any{}
	for k, v := range body {
		doc[k] = v
	}
	rev := fmt.Sprintf("%d-%s", revs.Start, h)
	doc["_id"], doc["_rev"], doc["_revisions"] = id, rev, revs
	raw, _ := json.Marshal(doc)
	if err := m.putLocked(raw); err != nil {
		panic(err)
	}
	return rev
}

func mustField(raw json.RawMessage, k string) json.RawMessage {
	var d map[string]json.RawMessage
	_ = json.Unmarshal(raw, &d)
	if v, ok := d[k]; ok {
		return v
	}
	return json.RawMessage("null")
}

// winner returns the winning revision's body without _revisions, or nil.
func (m *memEP) winner(id string) map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.docs[id]
	if d == nil {
		return nil
	}
	var out map[string]any
	_ = json.Unmarshal(d.bodies[m.leavesLocked(d)[0]], &out)
	delete(out, "_revisions")
	return out
}

func (m *memEP) leaves(id string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := m.docs[id]; d != nil {
		return m.leavesLocked(d)
	}
	return nil
}

func (m *memEP) ids() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []string
	for id := range m.docs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (m *memEP) Info(ctx context.Context) (engine.EndpointInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return engine.EndpointInfo{Name: m.name, UpdateSeq: strconv.Itoa(m.seq), DocCount: int64(len(m.docs))}, nil
}

// excludeType reads the {"type":{"$ne":X}} selector, the only one the
// fake understands.
func excludeType(sel json.RawMessage) (string, bool) {
	if len(sel) == 0 {
		return "", false
	}
	var s struct {
		Type struct {
			Ne *string `json:"$ne"`
		} `json:"type"`
	}
	if json.Unmarshal(sel, &s) != nil || s.Type.Ne == nil {
		panic("fake: unsupported selector " + string(sel))
	}
	return *s.Type.Ne, true
}

func (m *memEP) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	m.mu.Lock()
	m.changesCalls++
	m.limits = append(m.limits, req.Limit)
	hook := m.onChanges
	m.mu.Unlock()
	if hook != nil {
		if err := hook(req); err != nil {
			return engine.ChangesPage{}, err
		}
	}
	since := 0
	if req.Since != "" {
		since, _ = strconv.Atoi(req.Since)
	}
	not, filtered := excludeType(req.Selector)
	for {
		m.mu.Lock()
		type row struct {
			seq int
			ch  engine.Change
		}
		var rows []row
		for id, d := range m.docs {
			if d.seq <= since {
				continue
			}
			ls := m.leavesLocked(d)
			if filtered {
				var t struct {
					Type string `json:"type"`
				}
				_ = json.Unmarshal(d.bodies[ls[0]], &t)
				if t.Type == not {
					continue
				}
			}
			rows = append(rows, row{d.seq, engine.Change{Seq: strconv.Itoa(d.seq), ID: id, Revs: ls, Deleted: deletedBody(d.bodies[ls[0]])}})
		}
		slices.SortFunc(rows, func(a, b row) int { return a.seq - b.seq })
		page := engine.ChangesPage{LastSeq: strconv.Itoa(m.seq)}
		if req.Limit > 0 && len(rows) > req.Limit {
			page.Pending = len(rows) - req.Limit
			rows = rows[:req.Limit]
			page.LastSeq = rows[len(rows)-1].ch.Seq
		}
		for _, r := range rows {
			page.Results = append(page.Results, r.ch)
		}
		wait := m.changed
		m.mu.Unlock()
		if len(page.Results) > 0 || !req.Wait {
			return page, nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return engine.ChangesPage{}, ctx.Err()
		}
	}
}

func (m *memEP) RevsDiff(ctx context.Context, revs map[string][]string) (map[string][]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]string{}
	for id, rs := range revs {
		d := m.docs[id]
		for _, r := range rs {
			if d == nil || !d.known[r] {
				out[id] = append(out[id], r)
			}
		}
	}
	return out, nil
}

func (m *memEP) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bulkGetCalls++
	var out []json.RawMessage
	for _, r := range revs {
		if d := m.docs[r.ID]; d != nil {
			if b, ok := d.bodies[r.Rev]; ok {
				out = append(out, slices.Clone(b))
			}
		}
	}
	m.bulkGetDocs += len(out)
	return out, nil
}

func (m *memEP) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	m.mu.Lock()
	m.bulkDocsCalls++
	hook := m.onBulkDocs
	m.mu.Unlock()
	if hook != nil {
		if err := hook(docs); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, raw := range docs {
		if err := m.putLocked(raw); err != nil {
			return nil, err
		}
	}
	m.bulkDocsDocs += len(docs)
	return nil, nil // CouchDB answers [] to new_edits=false
}

func (m *memEP) GetLocal(ctx context.Context, id string) (json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d, ok := m.locals[id]; ok {
		return slices.Clone(d), nil
	}
	return nil, engine.ErrNotFound
}

func (m *memEP) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.locals[id] = slices.Clone(doc)
	m.putLocalCalls++
	return nil
}

func (m *memEP) counts() (bulkGetDocs, bulkDocsDocs int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bulkGetDocs, m.bulkDocsDocs
}

var transportErr = &engine.Error{Op: "fake", Stage: engine.StageTransport, Err: fmt.Errorf("connection reset")}
