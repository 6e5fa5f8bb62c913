package negotiate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/livesync-go/livesync-go/engine"
)

// ReadMilestone reads the remote's milestone; nil (and no error) when the
// remote has none.
func ReadMilestone(ctx context.Context, p Port) (*Milestone, error) {
	m, _, err := readMilestone(ctx, p)
	return m, err
}

func readMilestone(ctx context.Context, p Port) (*Milestone, string, error) {
	raw, ver, err := p.Read(ctx, RecordMilestone)
	switch {
	case errors.Is(err, engine.ErrNotFound) && !errors.Is(err, ErrNoDatabase):
		return nil, "", nil
	case err != nil:
		return nil, "", err
	}
	m, err := ParseMilestone(raw)
	if err != nil {
		return nil, "", &engine.Error{Op: "read milestone", DocID: MilestoneDocID, Stage: engine.StageDecode, Err: err}
	}
	return m, ver, nil
}

// UpdateMilestone reads the milestone (a new one for node me, created
// now, when there is none), lets fn change it (found says whether it was
// read), and writes it back if fn says so, conditionally on the version
// read. When another client wrote it in between (ErrConflict), the round
// starts again from a fresh read, at most MilestoneTries rounds, then
// ErrMilestoneRace. fn may run more than once and must derive its changes
// from the milestone it is given. It returns the milestone as written (or
// as read, when fn wrote nothing). This is the one retry policy for races
// on the milestone, whatever the remote.
func UpdateMilestone(ctx context.Context, p Port, me string, now time.Time, fn func(m *Milestone, found bool) (write bool, err error)) (*Milestone, error) {
	for range MilestoneTries {
		m, ver, err := readMilestone(ctx, p)
		if err != nil {
			return nil, err
		}
		found := m != nil
		if !found {
			m = NewMilestone(me, now)
		}
		write, err := fn(m, found)
		if err != nil || !write {
			return m, err
		}
		raw, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		_, err = p.Write(ctx, RecordMilestone, raw, ver)
		if errors.Is(err, ErrConflict) {
			continue // another client wrote it since the read
		}
		if err != nil {
			return nil, err
		}
		return m, nil
	}
	return nil, &engine.Error{Op: "write milestone", DocID: MilestoneDocID, Stage: engine.StageStorage, Err: ErrMilestoneRace}
}

// Lock locks the remote for every node but me (upstream's
// markRemoteLocked): after a rebuild (cleaned false) or a clean-up
// (cleaned true), other nodes are refused until they fetch the remote
// again and join, or until it is unlocked. my is the chunk range me
// announces.
func Lock(ctx context.Context, p Port, me string, my ChunkRange, cleaned bool, now time.Time) (*Milestone, error) {
	return UpdateMilestone(ctx, p, me, now, func(m *Milestone, _ bool) (bool, error) {
		m.Lock(me, my, cleaned)
		return true, nil
	})
}

// Unlock clears the remote's lock (upstream's markRemoteLocked(false)):
// every node may sync with it again. wasLocked is false, and nothing is
// written, when the remote was not locked.
func Unlock(ctx context.Context, p Port, me string, my ChunkRange, now time.Time) (wasLocked bool, err error) {
	_, err = UpdateMilestone(ctx, p, me, now, func(m *Milestone, _ bool) (bool, error) {
		wasLocked = m.Locked
		if !m.Locked {
			return false, nil
		}
		m.Unlock(me, my)
		return true, nil
	})
	return wasLocked, err
}

// Join adds me to a locked remote's accepted nodes (upstream's
// markRemoteResolved), once this node fetched the rebuilt remote into an
// empty local database. A handshake with AllowJoin does the same as part
// of its registration.
func Join(ctx context.Context, p Port, me string, my ChunkRange, now time.Time) error {
	_, err := UpdateMilestone(ctx, p, me, now, func(m *Milestone, _ bool) (bool, error) {
		m.Accept(me, my)
		return true, nil
	})
	return err
}

// LockedFor reports whether a handshake verdict refuses this node because
// the remote is locked against it (rebuilt or cleaned up by another
// node): the caller decides whether to join (an empty local database may)
// or to refuse (one holding data from before the rebuild must not merge
// it).
func LockedFor(v Verdict) bool {
	return v.Kind == VerdictNodeLocked || v.Kind == VerdictNodeCleaned
}

// AcceptedDevices names the accepted nodes of m for people: the device
// name from node_info quoted, with the node id in parentheses, or the node
// id alone. nil for a nil milestone.
func AcceptedDevices(m *Milestone) []string {
	if m == nil {
		return nil
	}
	var out []string
	for _, id := range m.AcceptedNodes {
		if n, ok := m.NodeInfo[id]; ok && n.DeviceName != "" {
			out = append(out, fmt.Sprintf("%q (%s)", n.DeviceName, id))
		} else {
			out = append(out, id)
		}
	}
	return out
}
