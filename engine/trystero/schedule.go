package trystero

import "time"

// Timing of Trystero's signalling (trystero core dist strategy.mjs,
// signal-handler.mjs, offer-pool.mjs). A transport driving a room uses
// these to match the plug-in's behaviour.
const (
	// AnnounceInterval is the steady period of announcements on the root
	// topic, per relay.
	AnnounceInterval = 5333 * time.Millisecond
	// OfferTTL is how long an unanswered offer stays valid.
	OfferTTL = 57333 * time.Millisecond
	// OfferPostAnswerTTL is how long an answered offer may take to
	// connect before it is dropped.
	OfferPostAnswerTTL = 23333 * time.Millisecond
	// AnsweringTTL is how long an answering connection may take to
	// connect before it is dropped.
	AnsweringTTL = 23333 * time.Millisecond
	// DisconnectedPeerGrace is how long a connected peer may look
	// unhealthy before a new signal from it replaces the connection.
	DisconnectedPeerGrace = 7533 * time.Millisecond
	// SharedPeerIdle is how long a connection no room uses is kept.
	SharedPeerIdle = 123333 * time.Millisecond
	// LeaveDelay is how long Trystero waits after sending ActionLeave
	// before closing its connections.
	LeaveDelay = 99 * time.Millisecond
	// MaxTopicsPerSubscription is how many topics the Nostr strategy puts
	// into one REQ; more topics take more subscriptions.
	MaxTopicsPerSubscription = 250
)

// announceWarmup are the delays after the first, second and third
// announcement, before the steady AnnounceInterval.
var announceWarmup = [...]time.Duration{233 * time.Millisecond, 533 * time.Millisecond, 1333 * time.Millisecond}

// AnnounceDelays returns the warm-up delays: the waits after the first,
// second and third announcement (233, 533 and 1333 ms); every later wait
// is AnnounceInterval.
func AnnounceDelays() []time.Duration { return append([]time.Duration(nil), announceWarmup[:]...) }

// NextAnnounce returns the wait after announcement n (counted from 0,
// the announcement sent as soon as the room's subscriptions are in
// place) before announcement n+1: the warm-up delay for n < 3, else
// AnnounceInterval. Trystero restarts the count when a passive room
// becomes active.
func NextAnnounce(n int) time.Duration {
	if n >= 0 && n < len(announceWarmup) {
		return announceWarmup[n]
	}
	return AnnounceInterval
}

// OfferPrune is how long an offer sent in reply to an announcement on
// one relay stays pending before Trystero forgets it and may offer again:
// 0.9 of the announce interval.
const OfferPrune = AnnounceInterval * 9 / 10
