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

func publishOne(ctx context.Context, url string, ev nostr.Event) error {
	relay, err := nostr.RelayConnect(ctx, url)
	if err != nil {
		return err
	}
	defer closeRelay(relay)
	return relay.Publish(ctx, ev)
}

// closeRelay closes a relay connection, surviving a known race in go-nostr
// v0.38.2 (nbd-wtf/go-nostr issue 130, fixed upstream in releases the module
// proxy does not serve): Relay.Close can dereference the connection that
// the library's own cleanup goroutine has just set to nil. Closing from our
// side first also makes the library's reader loop skip its own Close.
func closeRelay(relay *nostr.Relay) {
	defer func() { _ = recover() }()
	_ = relay.Close()
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
		relay, err := nostr.RelayConnect(ctx, url)
		if err != nil {
			errs = append(errs, fmt.Errorf("relay %s: %w", url, err))
			continue
		}
		sub, err := relay.Subscribe(ctx, nostr.Filters{filter})
		if err != nil {
			closeRelay(relay)
			errs = append(errs, fmt.Errorf("relay %s: %w", url, err))
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer closeRelay(relay)
			forward(ctx, url, relay.Context(), sub, room, now, seen, out)
		}()
	}
	if len(errs) == len(relayURLs) {
		return nil, errors.Join(append([]error{errors.New("discovery: no relay could be subscribed to")}, errs...)...)
	}
	go func() {
		wg.Wait()
		close(out)
	}()
	return out, nil
}

func forward(ctx context.Context, url string, conn context.Context, sub *nostr.Subscription, room *Room, now func() time.Time, seen *seenSet, out chan<- Discovered) {
	for {
		var ev *nostr.Event
		var ok bool
		select {
		case <-ctx.Done():
			return
		case <-conn.Done(): // connection lost
			return
		case ev, ok = <-sub.Events:
			if !ok {
				return
			}
		}
		if ev == nil || ev.Kind != KindAnnouncement || !seen.add(ev.ID) {
			continue
		}
		a, err := room.Open(ev.Content, now())
		if err != nil {
			continue
		}
		select {
		case out <- Discovered{Announcement: a, Relay: url}:
		case <-ctx.Done():
			return
		}
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
