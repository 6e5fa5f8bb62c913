package fetch_test

import (
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine/fetch"
)

// Obligation: "an autonomous two-second retry after a first successful
// omission, with bounded remote activity retained throughout".
// "A successful first omission schedules a two-second retry even if
// finite replication is already inactive."
func TestAutonomousTwoSecondRetryAfterFirstOmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, fetch.Config{}, newSource(true))
		rd := r.read(ids("h:a"), fetch.ReadOptions{})
		synctest.Wait()
		// Probe the bounded count every 100 ms until the read ends.
		for range 19 {
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			if st := r.act.State(); st.Bounded != 1 || st.Finite != 0 {
				t.Fatalf("at %v: activity %+v, want one bounded chunk-fetch", r.now(), st)
			}
			if s := r.f.Stats(); s.Retrying != 1 || s.InFlight != 0 {
				t.Fatalf("at %v: %+v, want one retrying id in backoff", r.now(), s)
			}
		}
		res := rd.wait(t)
		if want := []time.Duration{0, 2 * time.Second}; !slices.Equal(r.src.callTimes(), want) {
			t.Errorf("requests at %v, want %v", r.src.callTimes(), want)
		}
		if !errors.Is(res[0].Err, fetch.ErrRemoteMissing) || rd.at != 2*time.Second {
			t.Errorf("result %+v at %v, want remote-missing at 2s", res[0], rd.at)
		}
		synctest.Wait()
		if st := r.act.State(); st.Bounded != 0 {
			t.Errorf("bounded activity after terminal result: %+v", st)
		}
	})
}

// Obligation: "per-identifier 2, 4, 6, 8, 10, 10, ... backoff while
// finite replication is active".
// "There is no attempt limit or absolute elapsed limit while finite
// replication continues."
func TestPerIdentifierBackoffSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, fetch.Config{}, newSource(true))
		end := r.finite()
		rd := r.read(ids("h:a"), fetch.ReadOptions{WaitForReady: true})
		time.Sleep(10*time.Minute - time.Second) // twice the fuse: omissions are progress
		synctest.Wait()
		got := r.src.callTimes()
		var gaps []time.Duration
		for i := 1; i < len(got); i++ {
			gaps = append(gaps, got[i]-got[i-1])
		}
		want := []time.Duration{2 * time.Second, 4 * time.Second, 6 * time.Second, 8 * time.Second}
		for len(want) < len(gaps) {
			want = append(want, 10*time.Second)
		}
		if got[0] != 0 || !slices.Equal(gaps, want) || len(gaps) != 5+(590-30)/10 {
			t.Fatalf("request times %v\ngaps %v", got, gaps)
		}
		if rd.finished() {
			t.Fatal("read ended while finite replication is active")
		}
		if s := r.f.Stats(); s.Retrying != 1 || s.Stalls != 0 || s.RemoteMissing != 0 {
			t.Errorf("stats %+v", s)
		}
		// Quiescence: backoff is interrupted, and the final probe at once
		// is terminal.
		end()
		res := rd.wait(t)
		calls := r.src.callTimes()
		if last := calls[len(calls)-1]; last != 10*time.Minute-time.Second || !errors.Is(res[0].Err, fetch.ErrRemoteMissing) {
			t.Errorf("final probe at %v, result %+v", last, res[0])
		}
	})
}

// "Joining a different batch does not reset its retry stage."
func TestJoiningAnotherBatchKeepsRetryStage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, fetch.Config{}, newSource(true))
		defer r.finite()()
		r.read(ids("h:a"), fetch.ReadOptions{})
		time.Sleep(5 * time.Second) // a: 0s, 2s; next at 6s
		r.read(ids("h:b", "h:a"), fetch.ReadOptions{})
		// b joins now (5s) alone; a keeps its stage: at 6s a alone,
		// then 12s; b at 5s, 7s, 11s, ...
		time.Sleep(8 * time.Second)
		synctest.Wait()
		want := "[0s[h:a] 2s[h:a] 5s[h:b] 6s[h:a] 7s[h:b] 11s[h:b] 12s[h:a]]"
		if got := callString(r.src.getCalls()); got != want {
			t.Errorf("calls %s\nwant  %s", got, want)
		}
	})
}

func callString(cs []call) string {
	s := "["
	for i, c := range cs {
		if i > 0 {
			s += " "
		}
		s += c.String()
	}
	return s + "]"
}
