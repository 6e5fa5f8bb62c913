// Command gobench is the Go half of the side-by-side E2EE V2 benchmark
// (see ../run.sh). It decrypts the "%=" chunks that LiveSync's own
// JavaScript library wrote (DIR/js-ciphertexts.json), checking every
// plaintext, writes DIR/go-ciphertexts.json for the JavaScript side to
// check, and times key derivation and decryption with engine/e2ee the way
// ../bench.mjs times the library: sequentially (one chunk at a time) and
// with a number of decrypts in flight. Results are JSON lines.
package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livesync-go/livesync-go/engine/e2ee"
)

type ctFile struct {
	Producer   string `json:"producer"`
	Passphrase string `json:"passphrase"`
	SaltBase64 string `json:"pbkdf2SaltBase64"`
	Sets       []struct {
		Size        int      `json:"size"`
		Ciphertexts []string `json:"ciphertexts"`
		PlainSHA256 []string `json:"plaintextSha256"`
	} `json:"sets"`
}

type result struct {
	Impl         string  `json:"impl"`
	Go           string  `json:"go"`
	GOMAXPROCS   int     `json:"gomaxprocs"`
	Op           string  `json:"op"`
	Size         int     `json:"size"`
	Mode         string  `json:"mode"`
	ChunksPerSec float64 `json:"chunksPerSec,omitempty"`
	SecondsPerOp float64 `json:"secondsPerOp,omitempty"`
	Verified     int     `json:"verified,omitempty"`
}

func emit(r result) {
	r.Impl, r.Go, r.GOMAXPROCS = "go", runtime.Version(), runtime.GOMAXPROCS(0)
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
}

func main() {
	dir := flag.String("dir", "", "directory with js-ciphertexts.json; go-ciphertexts.json is written there")
	minDur := flag.Duration("min", 1500*time.Millisecond, "minimum timing per measurement")
	conc := flag.Int("concurrency", 40, "decrypts in flight for the concurrent mode")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "usage: gobench -dir DIR")
		os.Exit(2)
	}
	if err := run(*dir, *minDur, *conc); err != nil {
		fmt.Fprintln(os.Stderr, "gobench:", err)
		os.Exit(1)
	}
}

func run(dir string, minDur time.Duration, conc int) error {
	raw, err := os.ReadFile(dir + "/js-ciphertexts.json")
	if err != nil {
		return err
	}
	var in ctFile
	if err := json.Unmarshal(raw, &in); err != nil {
		return err
	}
	salt, err := base64.StdEncoding.DecodeString(in.SaltBase64)
	if err != nil {
		return err
	}

	// Key derivation, uncached: fresh random salts defeat DeriveKey's cache.
	const runs = 3
	start := time.Now()
	for range runs {
		s := make([]byte, 32)
		rand.Read(s)
		if _, err := e2ee.DeriveKey(in.Passphrase, s); err != nil {
			return err
		}
	}
	perOp := time.Since(start).Seconds() / runs
	emit(result{Op: "derive-key (PBKDF2 310000)", Mode: "seq", ChunksPerSec: 1 / perOp, SecondsPerOp: perOp})

	c := e2ee.New(in.Passphrase, salt, e2ee.Options{})
	// Cross-compatibility: every JS ciphertext must open to its plaintext.
	n := 0
	for _, set := range in.Sets {
		for i, ct := range set.Ciphertexts {
			p, err := c.DecryptString(ct)
			if err != nil {
				return fmt.Errorf("Go could not decrypt JS ciphertext size %d #%d: %w", set.Size, i, err)
			}
			if sum := sha256.Sum256([]byte(p)); hex.EncodeToString(sum[:]) != set.PlainSHA256[i] {
				return fmt.Errorf("JS ciphertext size %d #%d: plaintext differs", set.Size, i)
			}
			n++
		}
	}
	emit(result{Op: "verify js ciphertexts", Mode: "check", Verified: n})

	// Go ciphertexts for the JS side.
	out := ctFile{Producer: "livesync-go engine/e2ee " + runtime.Version(), Passphrase: in.Passphrase, SaltBase64: in.SaltBase64}
	out.Sets = make([]struct {
		Size        int      `json:"size"`
		Ciphertexts []string `json:"ciphertexts"`
		PlainSHA256 []string `json:"plaintextSha256"`
	}, len(in.Sets))
	for si, set := range in.Sets {
		out.Sets[si].Size = set.Size
		for i := range min(len(set.Ciphertexts), 200) {
			p := plain(set.Size, i)
			ct, err := c.EncryptString(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256([]byte(p))
			out.Sets[si].Ciphertexts = append(out.Sets[si].Ciphertexts, ct)
			out.Sets[si].PlainSHA256 = append(out.Sets[si].PlainSHA256, hex.EncodeToString(sum[:]))
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dir+"/go-ciphertexts.json", b, 0o644); err != nil {
		return err
	}

	for _, set := range in.Sets {
		emit(result{Op: "decrypt", Size: set.Size, Mode: "seq", ChunksPerSec: timeSeq(c, set.Ciphertexts, minDur)})
		emit(result{Op: "decrypt", Size: set.Size, Mode: fmt.Sprintf("conc%d", conc), ChunksPerSec: timeConc(c, set.Ciphertexts, conc, minDur)})
	}
	p := plain(1024, 7)
	runtime.GC()
	cnt := 0
	start = time.Now()
	for time.Since(start) < minDur {
		for range 1000 {
			if _, err := c.EncryptString(p); err != nil {
				return err
			}
			cnt++
		}
	}
	emit(result{Op: "encrypt", Size: 1024, Mode: "seq", ChunksPerSec: float64(cnt) / time.Since(start).Seconds()})
	return nil
}

// plain returns n bytes of printable text.
func plain(n, seed int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,\n"
	var sb strings.Builder
	sb.Grow(n)
	x := uint32(seed*2654435761) | 1
	for range n {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		sb.WriteByte(alphabet[x%uint32(len(alphabet))])
	}
	return sb.String()
}

func timeSeq(c *e2ee.Cipher, cts []string, minDur time.Duration) float64 {
	for _, ct := range cts[:min(50, len(cts))] {
		c.DecryptString(ct) // warm-up
	}
	runtime.GC()
	n := 0
	start := time.Now()
	for time.Since(start) < minDur {
		for _, ct := range cts {
			if _, err := c.DecryptString(ct); err != nil {
				panic(err)
			}
			n++
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

// timeConc keeps k decrypts in flight: k goroutines take the next chunk.
func timeConc(c *e2ee.Cipher, cts []string, k int, minDur time.Duration) float64 {
	runtime.GC()
	var n atomic.Int64
	start := time.Now()
	for time.Since(start) < minDur {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range min(k, len(cts)) {
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= int64(len(cts)) {
						return
					}
					if _, err := c.DecryptString(cts[i]); err != nil {
						panic(err)
					}
					n.Add(1)
				}
			})
		}
		wg.Wait()
	}
	return float64(n.Load()) / time.Since(start).Seconds()
}
