//go:build !js

package nostrrelay

import (
	"container/heap"
	"slices"
	"strconv"

	"github.com/nbd-wtf/go-nostr"
)

// store holds the accepted events in memory, at most max of them. Every
// event has an expiry (unix seconds); none is returned at or after it. It
// is not safe for concurrent use: the relay guards it.
type store struct {
	max    int
	byID   map[string]*entry
	byAddr map[string]*entry            // replaceable and addressable events by address
	byD    map[string]map[string]*entry // addressable events by "d" tag, then id
	exp    expiryHeap
}

type entry struct {
	ev      *nostr.Event
	json    []byte // the event's JSON, encoded once
	expires int64
	addr    string
	index   int // in the expiry heap
}

// putResult says what put did with an event.
type putResult int

const (
	putStored    putResult = iota + 1 // stored (perhaps replacing an older version)
	putDuplicate                      // this very event is already stored
	putOlder                          // a newer version of its address is stored
)

func newStore(max int) *store {
	return &store{max: max, byID: map[string]*entry{}, byAddr: map[string]*entry{}, byD: map[string]map[string]*entry{}}
}

func (s *store) len() int { return len(s.byID) }

// address is the key under which a replaceable event (kinds 0, 3,
// 10000-19999: author and kind) or an addressable event (30000-39999:
// author, kind and "d" tag) replaces its older versions; "" for others.
func address(ev *nostr.Event) string {
	switch {
	case ev.IsAddressable():
		return ev.PubKey + ":" + strconv.Itoa(ev.Kind) + ":" + ev.Tags.GetD()
	case ev.IsReplaceable():
		return ev.PubKey + ":" + strconv.Itoa(ev.Kind)
	}
	return ""
}

// newer reports whether a supersedes b: later created_at, or on a tie the
// lower id (NIP-01).
func newer(a, b *nostr.Event) bool {
	if a.CreatedAt != b.CreatedAt {
		return a.CreatedAt > b.CreatedAt
	}
	return a.ID < b.ID
}

// put stores ev, whose JSON is evJSON, until expires. now (unix seconds)
// purges what has expired first; when the store is full the event expiring
// first makes room. It returns what it did and how many events it removed
// to make room.
func (s *store) put(ev *nostr.Event, evJSON []byte, expires, now int64) (putResult, int) {
	s.purge(now)
	if _, ok := s.byID[ev.ID]; ok {
		return putDuplicate, 0
	}
	addr := address(ev)
	if addr != "" {
		if old, ok := s.byAddr[addr]; ok {
			if !newer(ev, old.ev) {
				return putOlder, 0
			}
			s.remove(old)
		}
	}
	evicted := 0
	for len(s.byID) >= s.max && len(s.exp) > 0 {
		s.remove(s.exp[0])
		evicted++
	}
	e := &entry{ev: ev, json: evJSON, expires: expires, addr: addr}
	s.byID[ev.ID] = e
	if addr != "" {
		s.byAddr[addr] = e
	}
	if ev.IsAddressable() {
		d := ev.Tags.GetD()
		if s.byD[d] == nil {
			s.byD[d] = map[string]*entry{}
		}
		s.byD[d][ev.ID] = e
	}
	heap.Push(&s.exp, e)
	return putStored, evicted
}

func (s *store) remove(e *entry) {
	heap.Remove(&s.exp, e.index)
	delete(s.byID, e.ev.ID)
	if e.addr != "" && s.byAddr[e.addr] == e {
		delete(s.byAddr, e.addr)
	}
	if e.ev.IsAddressable() {
		d := e.ev.Tags.GetD()
		delete(s.byD[d], e.ev.ID)
		if len(s.byD[d]) == 0 {
			delete(s.byD, d)
		}
	}
}

// purge removes the events expired at now and returns how many.
func (s *store) purge(now int64) int {
	n := 0
	for len(s.exp) > 0 && s.exp[0].expires <= now {
		s.remove(s.exp[0])
		n++
	}
	return n
}

// query returns the JSON of the unexpired stored events that match any of
// the filters: per filter the newest first, at most its limit, an event
// matched by several filters once.
func (s *store) query(filters nostr.Filters, now int64) [][]byte {
	var out [][]byte
	seen := map[string]bool{}
	for _, f := range filters {
		if f.LimitZero {
			continue
		}
		var hits []*entry
		for _, e := range s.candidates(f) {
			if e.expires > now && f.Matches(e.ev) {
				hits = append(hits, e)
			}
		}
		slices.SortFunc(hits, func(a, b *entry) int {
			if newer(a.ev, b.ev) {
				return -1
			}
			return 1
		})
		for _, e := range hits[:min(len(hits), f.Limit)] {
			if !seen[e.ev.ID] {
				seen[e.ev.ID] = true
				out = append(out, e.json)
			}
		}
	}
	return out
}

// candidates narrows the scan when the filter names ids, or "d" tags and
// only addressable kinds (a discovery subscription does).
func (s *store) candidates(f nostr.Filter) []*entry {
	var out []*entry
	switch {
	case f.IDs != nil:
		for _, id := range f.IDs {
			if e, ok := s.byID[id]; ok {
				out = append(out, e)
			}
		}
	case f.Tags["d"] != nil && f.Kinds != nil && allAddressable(f.Kinds):
		for _, d := range f.Tags["d"] {
			for _, e := range s.byD[d] {
				out = append(out, e)
			}
		}
	default:
		out = make([]*entry, 0, len(s.byID))
		for _, e := range s.byID {
			out = append(out, e)
		}
	}
	return out
}

func allAddressable(kinds []int) bool {
	for _, k := range kinds {
		if !(&nostr.Event{Kind: k}).IsAddressable() {
			return false
		}
	}
	return true
}

// expiryHeap orders entries by expiry, the first to expire on top.
type expiryHeap []*entry

// Len, Less, Swap, Push and Pop implement heap.Interface, earliest
// expiry first.
func (h expiryHeap) Len() int { return len(h) }
func (h expiryHeap) Less(i, j int) bool {
	if h[i].expires != h[j].expires {
		return h[i].expires < h[j].expires
	}
	return h[i].ev.CreatedAt < h[j].ev.CreatedAt
}
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *expiryHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
