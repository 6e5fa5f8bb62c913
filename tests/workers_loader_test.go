package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWorkersOverlap: one Go instance serves the isolate's requests
// concurrently (wasm/workers/loader/worker.mjs). Longpolls stay open while
// other requests come and go, and answer (woken by a write, or at their
// timeout) instead of hanging: workerd cancels a request it thinks hung,
// and drops the timers and D1 queries Go started in the context of a
// request that ended; bodies larger than the loader's buffers go both
// ways intact while others run; a HEAD answer has no body; a Cron Trigger
// event runs in the same instance meanwhile.
func TestWorkersOverlap(t *testing.T) {
	w := startWorker(t, nil)
	db := openDB(t, w.server(), dbName(t), true, nil)
	base := w.env.url + "/" + db.Name()
	ctx, cancel := context.WithTimeout(ctxT(t), 2*time.Minute)
	defer cancel()
	// A fresh connection per request: a kept-alive one that workerd
	// closes as the client reuses it (EOF, reset) is seen with either
	// loader and is not what this test is about.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	do := func(method, url string, body []byte) (int, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth(w.env.user, w.env.password)
		res, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, b, err
	}

	const polls, pollMs = 3, 2500
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range polls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			code, b, err := do("GET", fmt.Sprintf("%s/_changes?feed=longpoll&since=now&timeout=%d", base, pollMs), nil)
			var feed struct {
				LastSeq any `json:"last_seq"`
			}
			switch {
			case err != nil:
				errs <- fmt.Errorf("longpoll %d: %v", i, err)
			case code != http.StatusOK || json.Unmarshal(b, &feed) != nil || feed.LastSeq == nil:
				errs <- fmt.Errorf("longpoll %d: %d %.200s", i, code, b)
			case time.Since(start) > pollMs*time.Millisecond+20*time.Second:
				errs <- fmt.Errorf("longpoll %d answered after %v", i, time.Since(start))
			}
		}()
	}

	// Two bodies of 1.8 MB each (18 documents of 100 kB), over the
	// loader's 1 MB read-ahead and answer buffer, at the same time.
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var docs []string
			for j := range 18 {
				docs = append(docs, fmt.Sprintf(`{"_id":"big%d-%02d","type":"leaf","data":"%s"}`, i, j, strings.Repeat(string(rune('a'+j)), 100_000)))
			}
			code, b, err := do("POST", base+"/_bulk_docs", []byte(`{"docs":[`+strings.Join(docs, ",")+`]}`))
			if err != nil || code != http.StatusCreated {
				errs <- fmt.Errorf("bulk_docs %d: %d %.200s %v", i, code, b, err)
				return
			}
			code, b, err = do("GET", fmt.Sprintf(`%s/_all_docs?include_docs=true&startkey="big%d"&endkey="big%d~"`, base, i, i), nil)
			var all struct {
				Rows []struct {
					Doc struct {
						ID   string `json:"_id"`
						Data string `json:"data"`
					} `json:"doc"`
				} `json:"rows"`
			}
			if err != nil || code != http.StatusOK || json.Unmarshal(b, &all) != nil || len(all.Rows) != 18 {
				errs <- fmt.Errorf("all_docs %d: %d, %d bytes, %v", i, code, len(b), err)
				return
			}
			for j, r := range all.Rows {
				if r.Doc.Data != strings.Repeat(string(rune('a'+j)), 100_000) {
					errs <- fmt.Errorf("all_docs %d: %s came back changed", i, r.Doc.ID)
				}
			}
		}()
	}

	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 20 {
			code, b, err := do("PUT", fmt.Sprintf("%s/small%02d", base, i), []byte(`{"n":1}`))
			if err != nil || code != http.StatusCreated {
				errs <- fmt.Errorf("put small%02d: %d %.200s %v", i, code, b, err)
				return
			}
			code, b, err = do("HEAD", fmt.Sprintf("%s/small%02d", base, i), nil)
			if err != nil || code != http.StatusOK || len(b) != 0 {
				errs <- fmt.Errorf("head small%02d: %d, %d bytes, %v", i, code, len(b), err)
				return
			}
		}
		code, b, err := do("GET", w.env.url+"/cdn-cgi/handler/scheduled?cron=*+*+*+*+*", nil)
		if err != nil || code != http.StatusOK {
			errs <- fmt.Errorf("cron event: %d %.200s %v", code, b, err)
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
