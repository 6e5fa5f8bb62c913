//go:build !js

package nostrrelay

import "time"

// bucket is a token bucket: it holds at most perMinute tokens, starts
// full and refills at perMinute tokens a minute. It is deterministic: the
// caller passes the time. Credit is kept in token-nanoseconds (one token
// is a minute's worth), so the arithmetic is exact.
type bucket struct {
	perMinute int64
	credit    int64 // tokens × time.Minute
	last      time.Time
}

// maxPerMinute keeps the credit arithmetic within int64; a larger rate is
// as good as unlimited.
const maxPerMinute = 1 << 27

func newBucket(perMinute int, now time.Time) bucket {
	n := int64(min(perMinute, maxPerMinute))
	return bucket{perMinute: n, credit: n * int64(time.Minute), last: now}
}

// take spends one token if there is one at now.
func (b *bucket) take(now time.Time) bool {
	full := b.perMinute * int64(time.Minute)
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.credit = min(full, b.credit+int64(min(elapsed, time.Minute))*b.perMinute)
		b.last = now
	}
	if b.credit < int64(time.Minute) {
		return false
	}
	b.credit -= int64(time.Minute)
	return true
}
