package negotiate_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

func ExampleNeedsNewSalt() {
	// A transport failure never leads to a new salt (obsidian-livesync issue #1147).
	need, err := negotiate.NeedsNewSalt(nil, &engine.Error{Op: "get", Stage: engine.StageTransport, Err: errors.New("timeout")})
	fmt.Println(need, err != nil)
	// A proven absence does.
	need, err = negotiate.NeedsNewSalt(nil, engine.ErrNotFound)
	fmt.Println(need, err)
	// Output:
	// false true
	// true <nil>
}

func ExampleCheck() {
	now := time.UnixMilli(1700000000000)
	mine := negotiate.ShouldMatchTemplate()

	// Another device created the vault with E2EE on.
	m := negotiate.NewMilestone("other", now)
	theirs := mine.Clone()
	_ = theirs.Set("encrypt", true)
	m.Register("other", negotiate.CouchDBChunkRange, negotiate.DeviceInfo{DeviceName: "laptop"}, theirs, now)

	// This device registers and checks.
	m.Register("me", negotiate.CouchDBChunkRange, negotiate.DeviceInfo{DeviceName: "phone"}, mine, now)
	v := negotiate.Check(m, "me", negotiate.CouchDBChunkRange, mine, negotiate.CheckOptions{})
	fmt.Println(v.Kind)
	var tm *negotiate.TweakMismatchError
	if errors.As(v.Err(), &tm) {
		for _, d := range tm.Diffs {
			fmt.Println(d.Key, string(d.Preferred), string(d.Current), d.Impact)
		}
	}
	// Output:
	// MISMATCHED
	// encrypt true false breaking
}
