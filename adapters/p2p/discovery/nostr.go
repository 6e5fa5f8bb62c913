package discovery

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// KindAnnouncement is the Nostr event kind of an announcement: 30078, the
// addressable "application-specific data" kind of NIP-78. Being addressable
// (30000-39999), a relay keeps only the newest event per (author key, kind,
// "d" tag), so a peer that re-announces replaces its previous announcement,
// and a peer that joins later still finds the stored announcements of the
// others (an ephemeral 2xxxx kind would only reach peers already listening).
// Relays commonly accept 30078 because it is a standard kind. The "d" tag
// is the room tag; an "expiration" tag (NIP-40) lets relays drop the event
// once the announcement has expired.
const KindAnnouncement = nostr.KindApplicationSpecificData

// NewNostrKey returns a fresh Nostr secret key (hex) for signing
// announcements. It need not be stable: the announcement itself, not the
// Nostr author, identifies the peer.
func NewNostrKey() string { return nostr.GeneratePrivateKey() }

// AnnouncementEvent builds and signs the Nostr event carrying a sealed
// announcement for the room.
func AnnouncementEvent(room *Room, nostrKey string, a Announcement, now time.Time) (nostr.Event, error) {
	content, err := room.Seal(a, now)
	if err != nil {
		return nostr.Event{}, err
	}
	ev := nostr.Event{
		CreatedAt: nostr.Timestamp(now.Unix()),
		Kind:      KindAnnouncement,
		Tags: nostr.Tags{
			{"d", room.Tag()},
			{"expiration", strconv.FormatInt(a.Expires.Unix(), 10)},
		},
		Content: content,
	}
	if err := ev.Sign(nostrKey); err != nil {
		return nostr.Event{}, fmt.Errorf("discovery: sign announcement: %w", err)
	}
	return ev, nil
}

// Publish announces a on every relay. It returns how many relays accepted
// the event; err joins the per-relay failures and is non-nil only when no
// relay accepted it.
func Publish(ctx context.Context, relayURLs []string, room *Room, nostrKey string, a Announcement, now time.Time) (accepted int, err error) {
	ev, err := AnnouncementEvent(room, nostrKey, a, now)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, url := range relayURLs {
		if err := publishOne(ctx, url, ev); err != nil {
			errs = append(errs, fmt.Errorf("relay %s: %w", url, err))
			continue
		}
		accepted++
	}
	if accepted == 0 {
		return 0, errors.Join(append([]error{errors.New("discovery: no relay accepted the announcement")}, errs...)...)
	}
	return accepted, nil
}

// Discovered is a valid, unexpired announcement found on a relay.
type Discovered struct {
	Announcement
	Relay string // URL of the relay that delivered it
}

// Subscribe asks every relay for the room's announcements, stored and
// live, and delivers the valid, unexpired ones on the returned channel.
// Events that do not open (another group, a wrong passphrase, forged,
// stale) are dropped. now is the clock used to judge expiry. The channel
// is closed once ctx is done and every relay connection has been closed.
// It fails only when no relay could be subscribed to.
func Subscribe(ctx context.Context, relayURLs []string, room *Room, now func() time.Time) (<-chan Discovered, error) {
	filter := nostr.Filter{Kinds: []int{KindAnnouncement}, Tags: nostr.TagMap{"d": {room.Tag()}}}
	out := make(chan Discovered)
	seen := newSeenSet()
	var wg sync.WaitGroup
	var errs []error
	for _, url := range relayURLs {
		sub, err := subscribe(ctx, url, filter)
		if err != nil {
			errs = append(errs, fmt.Errorf("relay %s: %w", url, err))
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub.events(ctx, func(ev *nostr.Event) bool { return deliver(ctx, url, ev, room, now, seen, out) })
		}()
	}
	if len(errs) == len(relayURLs) {
		return nil, errors.Join(append([]error{errNoRelay}, errs...)...)
	}
	go func() {
		wg.Wait()
		close(out)
	}()
	return out, nil
}

// deliver opens one event and sends the announcement on out; false when
// ctx ended.
func deliver(ctx context.Context, url string, ev *nostr.Event, room *Room, now func() time.Time, seen *seenSet, out chan<- Discovered) bool {
	if ev.Kind != KindAnnouncement || !seen.add(ev.ID) {
		return true
	}
	a, err := room.Open(ev.Content, now())
	if err != nil {
		return true // another group, a wrong passphrase, stale or forged
	}
	select {
	case out <- Discovered{Announcement: a, Relay: url}:
		return true
	case <-ctx.Done():
		return false
	}
}

// seenSet drops an event delivered by several relays. It forgets
// everything once it holds maxSeen ids, bounding memory on long runs.
type seenSet struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

const maxSeen = 4096

func newSeenSet() *seenSet { return &seenSet{ids: map[string]struct{}{}} }

func (s *seenSet) add(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.ids[id]; ok {
		return false
	}
	if len(s.ids) >= maxSeen {
		clear(s.ids)
	}
	s.ids[id] = struct{}{}
	return true
}
