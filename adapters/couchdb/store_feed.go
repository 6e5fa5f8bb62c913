package couchdb

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// Changes reads one page of the database's changes feed (see DB.Changes:
// style=all_docs, the selector as _selector, longpoll with Wait). The
// selector is checked first as the other Stores check it, so that one the
// server would take but they refuse is refused here too. A page that
// ends the feed (fewer rows than Limit, or no Limit) has Pending 0 when
// the server does not say. A row with several leaves lists them winner
// first: Apache CouchDB sends them so; for other servers the Store reads
// the row's leaves to order them.
func (s *Store) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	if len(req.Selector) > 0 {
		if err := store.CheckSelector(req.Selector); err != nil {
			return engine.ChangesPage{}, err
		}
	}
	if len(req.Selector) > 0 {
		req.Selector = existsForNegations(req.Selector)
	}
	var page engine.ChangesPage
	err := s.call(ctx, "changes", func(c context.Context) error {
		var err error
		page, err = s.db.Changes(c, req)
		if err != nil {
			return err
		}
		for _, ch := range page.Results {
			if ch.ID == "" || ch.Seq == "" || len(ch.Revs) == 0 || slices.Contains(ch.Revs, "") {
				return &engine.Error{Op: "changes", DocID: ch.ID, Stage: engine.StageProtocol,
					Err: fmt.Errorf("couchdb: a change without an id, a seq or revisions: %w", engine.ErrMalformed)}
			}
		}
		if page.Pending < 0 && (req.Limit == 0 || len(page.Results) < req.Limit) {
			page.Pending = 0
		}
		return s.orderLeaves(c, page.Results)
	})
	if err != nil {
		return engine.ChangesPage{}, err
	}
	return page, nil
}

// orderLeaves puts the winner first in each change with several leaves,
// unless the server is Apache CouchDB (which already does). The leaves
// of all such changes are read together (see leavesMany).
func (s *Store) orderLeaves(c context.Context, changes []engine.Change) error {
	var multi []int
	for i := range changes {
		if len(changes[i].Revs) > 1 {
			multi = append(multi, i)
		}
	}
	if len(multi) == 0 {
		return nil
	}
	if v, err := s.serverVendor(c); err != nil {
		return err
	} else if v == "couchdb" {
		return nil
	}
	ids := make([]string, len(multi))
	for k, i := range multi {
		ids[k] = changes[i].ID
	}
	all, err := s.leavesMany(c, ids)
	if err != nil {
		return err
	}
	for _, i := range multi {
		ch := &changes[i]
		leaves := all[ch.ID]
		deleted := make(map[string]bool, len(leaves))
		for _, l := range leaves {
			deleted[l.rev] = l.deleted
		}
		revs := ch.Revs
		sort.SliceStable(revs, func(a, b int) bool {
			ga, ha := splitRev(revs[a])
			gb, hb := splitRev(revs[b])
			return winsOver(deleted[revs[a]], ga, ha, deleted[revs[b]], gb, hb)
		})
	}
	return nil
}

// serverVendor reads, once, whether the server is Apache CouchDB (GET /
// answers {"couchdb":"Welcome", …}).
func (s *Store) serverVendor(c context.Context) (string, error) {
	s.vendorMu.Lock()
	v := s.vendor
	s.vendorMu.Unlock()
	if v != "" {
		return v, nil
	}
	var root map[string]json.RawMessage
	if err := s.db.do(c, "server info", "", http.MethodGet, s.db.base.String()+"/", nil, &root); err != nil {
		return "", err
	}
	v = "other"
	var vendor struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(root["vendor"], &vendor)
	if _, ok := root["couchdb"]; ok && strings.Contains(strings.ToLower(vendor.Name), "apache") {
		v = "couchdb"
	}
	s.vendorMu.Lock()
	s.vendor = v
	s.vendorMu.Unlock()
	return v, nil
}

// existsForNegations adds "$exists": true to every field condition with
// $ne or $nin and no $exists, in the selector and its $and lists. In
// CouchDB a missing field matches only {"$exists": false}, so this
// changes nothing there; PouchDB's filter lets documents without the
// field match $ne and $nin, and this makes it agree.
func existsForNegations(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return raw
	}
	changed := false
	for k, v := range m {
		if k == "$and" {
			var list []json.RawMessage
			if json.Unmarshal(v, &list) != nil {
				continue
			}
			for i := range list {
				list[i] = existsForNegations(list[i])
			}
			m[k], _ = json.Marshal(list)
			changed = true
			continue
		}
		var ops map[string]json.RawMessage
		if json.Unmarshal(v, &ops) != nil || ops == nil {
			continue
		}
		_, ne := ops["$ne"]
		_, nin := ops["$nin"]
		if _, ex := ops["$exists"]; (ne || nin) && !ex {
			ops["$exists"] = json.RawMessage("true")
			m[k], _ = json.Marshal(ops)
			changed = true
		}
	}
	if !changed {
		return raw
	}
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}
