//go:build !js

package nostrrelay

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// BenchmarkPublish measures events accepted per second on loopback by one
// connection: "pipelined" writes every event then reads the OKs, "sequential"
// waits for each OK (go-nostr's Publish does). Signing is outside the timer;
// the relay verifies each id and signature.
func BenchmarkPublish(b *testing.B) {
	for _, mode := range []string{"pipelined", "sequential"} {
		b.Run(mode, func(b *testing.B) {
			_, url := startRelay(b, Config{EventsPerMinute: 1 << 30})
			c := dial(b, url)
			key := nostr.GeneratePrivateKey()
			now := time.Now()
			msgs := make([][]byte, b.N)
			for i := range msgs {
				ev := event(b, key, KindAnnouncement, "room-"+strconv.Itoa(i), now, now.Add(time.Minute), "sealed announcement of about this size, base64 of an AES-GCM box")
				msgs[i], _ = json.Marshal([]any{"EVENT", ev})
			}
			b.ResetTimer()
			done := make(chan error, 1)
			readOKs := func(n int) error {
				for range n {
					_, data, err := c.ws.ReadMessage()
					if err != nil {
						return err
					}
					var m []any
					if json.Unmarshal(data, &m) != nil || len(m) != 4 || m[2] != true {
						b.Errorf("answer %s", data)
					}
				}
				return nil
			}
			if mode == "pipelined" {
				go func() { done <- readOKs(b.N) }()
			}
			for _, msg := range msgs {
				if err := c.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
					b.Fatal(err)
				}
				if mode == "sequential" {
					if err := readOKs(1); err != nil {
						b.Fatal(err)
					}
				}
			}
			if mode == "pipelined" {
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
