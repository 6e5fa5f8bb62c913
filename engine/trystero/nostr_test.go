package trystero

import (
	"encoding/hex"
	"strings"
	"testing"
)

// An announcement event published by trystero 0.25.3's Nostr strategy
// (createEvent) with a fixed key and time.
func TestNostrEventMatchesTrystero(t *testing.T) {
	const (
		topic   = "3f6c39494h2c5593ng1h1m3w1s3i215i2v116x"
		content = `{"peerId":"0123456789AaBbCcDdEe"}`
		pubkey  = "0a45d1d01c96367c5252b06024bd3277565c496a2ace31d89498932bbcd0052a"
		id      = "880e204126e72372ac23a285918d851df02d1be7e7afa994a405e6aad5851f8c"
		sig     = "45ac8dffbb5b2e735197c0689c91cd037a4bcfef9876d9151198b7aa6f489658a31861fc9e92e79bcc00f29459aee828fdb9fbbc7fec67ffb7605046c206ffe7"
	)
	got := NostrEventID(pubkey, 1796202000, topic, content)
	if hex.EncodeToString(got[:]) != id {
		t.Errorf("NostrEventID = %x", got)
	}
	s, _ := hex.DecodeString(sig)
	want := `["EVENT",{"kind":22753,"tags":[["x","` + topic + `"]],"created_at":1796202000,"content":"{\"peerId\":\"0123456789AaBbCcDdEe\"}","pubkey":"` + pubkey + `","id":"` + id + `","sig":"` + sig + `"}]`
	if msg := string(NostrEventMessage(pubkey, 1796202000, topic, content, s)); msg != want {
		t.Errorf("NostrEventMessage =\n%s\nwant\n%s", msg, want)
	}
}

func TestNostrSubscribe(t *testing.T) {
	sub := strings.Repeat("0", 64)
	got := string(NostrSubscribe(sub, []string{"3f6c39494h2c5593ng1h1m3w1s3i215i2v116x"}, 1796202000))
	want := `["REQ","` + sub + `",{"kinds":[22753],"since":1796202000,"#x":["3f6c39494h2c5593ng1h1m3w1s3i215i2v116x"]}]`
	if got != want {
		t.Errorf("NostrSubscribe = %s", got)
	}
	// Kinds are distinct, in topic order: "ab" and "ba" share a kind.
	got = string(NostrSubscribe("s", []string{"ab", "c", "ba"}, 1))
	if want := `["REQ","s",{"kinds":[20195,20099],"since":1,"#x":["ab","c","ba"]}]`; got != want {
		t.Errorf("NostrSubscribe = %s, want %s", got, want)
	}
	if n := len(NewSubscriptionID(nil)); n != SubscriptionIDLen {
		t.Errorf("subscription id of %d chars", n)
	}
}
