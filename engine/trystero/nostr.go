package trystero

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strconv"

	"github.com/livesync-go/livesync-go/engine/jsstring"
)

// Trystero's Nostr strategy (@trystero-p2p/nostr dist index.mjs) publishes
// each signalling message as an ephemeral event of kind TopicKind(topic)
// with the single tag ["x", topic], signed (BIP-340 Schnorr over
// secp256k1) by a key pair generated once per process, and subscribes to
// topics in batches of at most MaxTopicsPerSubscription. The helpers
// below build those messages byte for byte; signing is the transport's.

// SubscriptionIDLen is the length of the ids of Trystero's Nostr
// subscriptions, drawn from the id alphabet (NewID).
const SubscriptionIDLen = 64

// NostrEventID is the NIP-01 id of the event Trystero publishes: the
// SHA-256 of JSON.stringify([0, pubkey, createdAt, TopicKind(topic),
// [["x", topic]], content]), where pubkey is the 64-hex-digit x-only
// public key and createdAt Unix seconds.
func NostrEventID(pubkey string, createdAt int64, topic, content string) [32]byte {
	b := []byte("[0,")
	b = jsstring.AppendJSONString(b, pubkey)
	b = append(b, ',')
	b = strconv.AppendInt(b, createdAt, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(TopicKind(topic)), 10)
	b = append(b, `,[["x",`...)
	b = jsstring.AppendJSONString(b, topic)
	b = append(b, `]],`...)
	b = jsstring.AppendJSONString(b, content)
	b = append(b, ']')
	return sha256.Sum256(b)
}

// NostrEventMessage is the relay message Trystero sends to publish
// content on topic: ["EVENT", {"kind", "tags", "created_at", "content",
// "pubkey", "id", "sig"}] in that key order, with the id of
// NostrEventID and sig the 64-byte Schnorr signature of that id.
func NostrEventMessage(pubkey string, createdAt int64, topic, content string, sig []byte) []byte {
	id := NostrEventID(pubkey, createdAt, topic, content)
	b := []byte(`["EVENT",{"kind":`)
	b = strconv.AppendInt(b, int64(TopicKind(topic)), 10)
	b = append(b, `,"tags":[["x",`...)
	b = jsstring.AppendJSONString(b, topic)
	b = append(b, `]],"created_at":`...)
	b = strconv.AppendInt(b, createdAt, 10)
	b = append(b, `,"content":`...)
	b = jsstring.AppendJSONString(b, content)
	b = append(b, `,"pubkey":`...)
	b = jsstring.AppendJSONString(b, pubkey)
	b = append(b, `,"id":"`...)
	b = hex.AppendEncode(b, id[:])
	b = append(b, `","sig":"`...)
	b = hex.AppendEncode(b, sig)
	return append(b, `"}]`...)
}

// NostrSubscribe is the REQ Trystero sends for one batch of at most
// MaxTopicsPerSubscription topics: ["REQ", subID, {"kinds": the distinct
// kinds of the topics in order, "since": Unix seconds, "#x": topics}].
// subID is NewID(r, SubscriptionIDLen), kept per batch across updates.
func NostrSubscribe(subID string, topics []string, since int64) []byte {
	b := []byte(`["REQ",`)
	b = jsstring.AppendJSONString(b, subID)
	b = append(b, `,{"kinds":[`...)
	seen := make(map[int]bool, len(topics))
	for _, t := range topics {
		k := TopicKind(t)
		if seen[k] {
			continue
		}
		if len(seen) > 0 {
			b = append(b, ',')
		}
		seen[k] = true
		b = strconv.AppendInt(b, int64(k), 10)
	}
	b = append(b, `],"since":`...)
	b = strconv.AppendInt(b, since, 10)
	b = append(b, `,"#x":[`...)
	for i, t := range topics {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsstring.AppendJSONString(b, t)
	}
	return append(b, `]}]`...)
}

// NewSubscriptionID returns a fresh Nostr subscription id (see NewID).
func NewSubscriptionID(r io.Reader) string { return NewID(r, SubscriptionIDLen) }
