//go:build !js && !wasip1

package boltstore

import (
	"fmt"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// maxGroup caps the calls one group commit runs, so that a writer that
// leads a group under a flood of writes answers after a bounded
// transaction; the calls left over form the next group.
const maxGroup = 256

// committer runs write transactions as group commits. bbolt commits one
// read-write transaction at a time, each with its own syncs, so writers
// arriving together would queue for one commit each. Instead, a writer
// that finds no commit in progress runs its function at once, alone (no
// delay is added when there is no contention). Writers that arrive while
// a commit is in progress queue; when it ends, the first of them leads
// the next commit, which runs every queued function, in arrival order,
// in one transaction with one pair of syncs. Each caller is answered
// only after the commit holding its writes has returned, synced.
//
// A function that fails makes bbolt roll the shared transaction back, so
// it is taken out and the rest run again, as the Backend contract allows
// (functions set what they report afresh on each run). The failed
// function's error stands as is when it ran first in the transaction,
// on the committed state; otherwise it runs again alone, first, so that
// its result is that of a transaction of its own. A group whose commit
// fails (a full disk, an I/O error) is run again one function per
// transaction, so each caller gets the result it would have had alone.
type committer struct {
	db *bolt.DB

	mu      sync.Mutex
	queue   []*call
	running bool // a leader is committing; the queue waits for it

	commits atomic.Int64 // read-write transactions committed or tried
}

// call is one Update waiting for its group.
type call struct {
	fn   func(*bolt.Tx) error
	done chan outcome // one outcome: lead, or the result
}

type outcome struct {
	lead     bool // the caller is to lead the next group
	err      error
	panicked bool // fn panicked with panicVal; the caller panics again
	panicVal any
}

// update runs fn in a write transaction shared with concurrent callers
// and returns once the transaction holding fn's writes is committed (or
// fn's error, with none of fn's writes committed).
func (c *committer) update(fn func(*bolt.Tx) error) error {
	me := &call{fn: fn, done: make(chan outcome, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, me)
	lead := !c.running
	c.running = true
	c.mu.Unlock()
	if !lead {
		if o := <-me.done; !o.lead {
			return o.result()
		}
	}
	c.lead()
	return (<-me.done).result()
}

func (o outcome) result() error {
	if o.panicked {
		panic(o.panicVal)
	}
	return o.err
}

// lead commits the queued calls as one group and passes the lead to the
// first call queued meanwhile, or ends it if none is.
func (c *committer) lead() {
	c.mu.Lock()
	n := min(len(c.queue), maxGroup)
	group := c.queue[:n:n]
	c.queue = c.queue[n:]
	c.mu.Unlock()

	c.run(group)

	c.mu.Lock()
	if len(c.queue) == 0 {
		c.running = false
		c.queue = nil
	} else {
		c.queue[0].done <- outcome{lead: true}
	}
	c.mu.Unlock()
}

// run commits group, answering every call in it.
func (c *committer) run(group []*call) {
	for len(group) > 0 {
		failed, o := -1, outcome{}
		c.commits.Add(1)
		err := c.db.Update(func(tx *bolt.Tx) error {
			for i, cl := range group {
				if o = safeCall(cl.fn, tx); o.err != nil || o.panicked {
					failed = i
					return errFnFailed
				}
			}
			return nil
		})
		switch {
		case failed == 0:
			// It ran on the committed state, as it would have alone.
			group[0].done <- o
			group = group[1:]
		case failed > 0:
			alone := group[failed]
			group = append(group[:failed:failed], group[failed+1:]...)
			c.run([]*call{alone})
		case err != nil && len(group) > 1:
			// The commit failed: each function gets its own try.
			for _, cl := range group {
				c.run([]*call{cl})
			}
			return
		default:
			for _, cl := range group {
				cl.done <- outcome{err: err}
			}
			return
		}
	}
}

// errFnFailed rolls a group's transaction back when one of its functions
// failed; it is never returned to a caller.
var errFnFailed = fmt.Errorf("boltstore: a function of the group failed")

// safeCall runs fn, turning a panic into an outcome, so that a panicking
// function neither leaves the other callers of its group waiting nor
// escapes on the leader's goroutine; its own caller panics again.
func safeCall(fn func(*bolt.Tx) error, tx *bolt.Tx) (o outcome) {
	defer func() {
		if p := recover(); p != nil {
			o = outcome{panicked: true, panicVal: p}
		}
	}()
	return outcome{err: fn(tx)}
}
