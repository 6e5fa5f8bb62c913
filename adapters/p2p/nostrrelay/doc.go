// Package nostrrelay is a small in-process Nostr relay that serves exactly
// what peer discovery (package discovery) needs: peers of a sync group
// publish short-lived, sealed announcements (kind 30078, a "d" room tag and
// an NIP-40 "expiration" tag) and subscribe to the announcements of their
// room.
//
// Relay is an http.Handler. A websocket request speaks NIP-01 (EVENT, REQ,
// CLOSE from the client; EVENT, EOSE, OK, CLOSED, NOTICE from the relay); a
// plain GET with "Accept: application/nostr+json" gets the NIP-11
// information document, which lists the limits. The relay binary mounts it
// at /_nostr.
//
// What it keeps: events whose id and schnorr signature verify, of the kinds
// in Config.Kinds only, each with an expiration no further ahead than
// Config.MaxExpiry. Addressable events (kinds 30000-39999) are keyed by
// author, kind and "d" tag: a newer event replaces the older one (on equal
// created_at, the lower id wins, as NIP-01 says). Expired events are never
// stored or served, and are purged; when the store holds Config.MaxEvents
// events, the one expiring first makes room.
//
// What a hostile client gets: a clear refusal (OK false with an NIP-01
// prefix, "invalid:", "blocked:", "rate-limited:" or "error:"; CLOSED for a
// refused subscription; NOTICE for a malformed message; an HTTP 503 when the
// relay is full; a websocket close for a message over the size limit or a
// connection that does not read its answers) and nothing else: events per
// minute and requests per minute per connection are token buckets,
// subscriptions per connection, filters per REQ, values per filter and
// results per filter are bounded, and each connection has a bounded write
// queue, so a slow reader is disconnected and never blocks the others.
//
// It is our own rather than khatru with an eventstore because those modules
// are not available from the module proxy this project builds with, and
// discovery needs only this small subset; go-nostr supplies the event type,
// the id and signature checks and the filter matching.
package nostrrelay
