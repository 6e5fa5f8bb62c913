//go:build js && wasm

// Command aesgcm measures AES-256-GCM on 1 KiB chunks inside a js/wasm
// module in a browser: Go's crypto/aes + crypto/cipher against the host's
// WebCrypto (crypto.subtle) called through syscall/js, each awaited as
// the engine would await it. The page calls globalThis.aesgcmBench(opts)
// (see run below); results are plain objects.
package main

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall/js"
	"time"

	"github.com/livesync-go/livesync-go/engine/e2ee"
)

const (
	chunkSize = 1024
	nChunks   = 512
	ivSize    = 12
	saltSize  = 32 // V2's per-chunk HKDF salt
)

// fixture is the key, the plaintexts and, for the decrypt runs, the
// ciphertexts of every implementation's layout.
type fixture struct {
	master  []byte
	aead    cipher.AEAD
	subtle  js.Value
	cKey    js.Value // the AES-GCM CryptoKey of master
	plain   [][]byte
	fixedCT [][]byte // iv | ct | tag under master
	v2CT    [][]byte // iv | hkdfSalt | ct | tag (engine/e2ee binary layout)
	v2      *e2ee.Cipher
}

func newFixture() (*fixture, error) {
	f := &fixture{master: make([]byte, 32)}
	rand.Read(f.master)
	block, err := aes.NewCipher(f.master)
	if err != nil {
		return nil, err
	}
	if f.aead, err = cipher.NewGCM(block); err != nil {
		return nil, err
	}
	k, err := e2ee.KeyFromMaster(f.master)
	if err != nil {
		return nil, err
	}
	f.v2 = e2ee.NewWithKey(k, e2ee.Options{})
	f.subtle = js.Global().Get("crypto").Get("subtle")
	if f.cKey, err = importAES(f.subtle, f.master); err != nil {
		return nil, err
	}
	for i := range nChunks {
		p := make([]byte, chunkSize)
		for j := range p {
			p[j] = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,\n"[(i*131+j*7+j*j)%66]
		}
		f.plain = append(f.plain, p)
		ct, err := f.goFixed(true, p)
		if err != nil {
			return nil, err
		}
		f.fixedCT = append(f.fixedCT, ct)
		if ct, err = f.v2.EncryptBinary(p); err != nil {
			return nil, err
		}
		f.v2CT = append(f.v2CT, ct)
	}
	return f, f.verify()
}

// verify checks that each implementation reads the other's output.
func (f *fixture) verify() error {
	for _, v2 := range []bool{false, true} {
		ct, err := f.webBatch(true, v2, f.plain[:4])
		if err != nil {
			return err
		}
		pt, err := f.webBatch(false, v2, ct)
		if err != nil {
			return err
		}
		for i := range pt {
			if !bytes.Equal(pt[i], f.plain[i]) {
				return errors.New("batched WebCrypto round trip differs")
			}
		}
		if v2 {
			if got, err := f.v2.DecryptBinary(ct[0]); err != nil || !bytes.Equal(got, f.plain[0]) {
				return fmt.Errorf("engine/e2ee cannot open batched WebCrypto's V2 ciphertext: %v", err)
			}
		}
	}
	for i := range 8 {
		p := f.plain[i]
		wc, err := f.webFixed(true, p)
		if err != nil {
			return err
		}
		if got, err := f.goFixed(false, wc); err != nil || !bytes.Equal(got, p) {
			return fmt.Errorf("Go cannot open WebCrypto's ciphertext: %v", err)
		}
		if got, err := f.webFixed(false, f.fixedCT[i]); err != nil || !bytes.Equal(got, p) {
			return fmt.Errorf("WebCrypto cannot open Go's ciphertext: %v", err)
		}
		wv, err := f.webV2(true, p)
		if err != nil {
			return err
		}
		if got, err := f.v2.DecryptBinary(wv); err != nil || !bytes.Equal(got, p) {
			return fmt.Errorf("engine/e2ee cannot open WebCrypto's V2 ciphertext: %v", err)
		}
		if got, err := f.webV2(false, f.v2CT[i]); err != nil || !bytes.Equal(got, p) {
			return fmt.Errorf("WebCrypto cannot open engine/e2ee's V2 ciphertext: %v", err)
		}
	}
	return nil
}

// goFixed seals or opens one chunk with Go's AES-GCM under master.
func (f *fixture) goFixed(enc bool, in []byte) ([]byte, error) {
	if enc {
		out := make([]byte, ivSize, ivSize+len(in)+16)
		rand.Read(out)
		return f.aead.Seal(out, out[:ivSize], in, nil), nil
	}
	if len(in) < ivSize {
		return nil, errors.New("short")
	}
	return f.aead.Open(nil, in[:ivSize], in[ivSize:], nil)
}

// webFixed does the same through crypto.subtle with one CryptoKey.
func (f *fixture) webFixed(enc bool, in []byte) ([]byte, error) {
	if enc {
		iv := make([]byte, ivSize)
		rand.Read(iv)
		ct, err := subtleAES(f.subtle, "encrypt", f.cKey, iv, in)
		return append(iv, ct...), err
	}
	return subtleAES(f.subtle, "decrypt", f.cKey, in[:ivSize], in[ivSize:])
}

// webV2 is V2 (engine/e2ee's layout) with WebCrypto's AES: the per-chunk
// HKDF key is derived in Go, imported, then used, as a hook in the engine
// would do it (two Promise round trips per chunk).
func (f *fixture) webV2(enc bool, in []byte) ([]byte, error) {
	var iv, salt, body []byte
	if enc {
		iv, salt, body = make([]byte, ivSize), make([]byte, saltSize), in
		rand.Read(salt)
		rand.Read(iv)
	} else {
		if len(in) < ivSize+saltSize {
			return nil, errors.New("short")
		}
		iv, salt, body = in[:ivSize], in[ivSize:ivSize+saltSize], in[ivSize+saltSize:]
	}
	ck, err := hkdf.Key(sha256.New, f.master, salt, "", 32)
	if err != nil {
		return nil, err
	}
	key, err := importAES(f.subtle, ck)
	if err != nil {
		return nil, err
	}
	op := "decrypt"
	if enc {
		op = "encrypt"
	}
	out, err := subtleAES(f.subtle, op, key, iv, body)
	if err != nil || !enc {
		return out, err
	}
	return append(append(iv, salt...), out...), nil
}

// batchJS runs one AES-GCM operation per chunk, all in flight at once,
// and settles when all have: the shape a batched hook would have (one
// Promise round trip into Go per batch). With derive, each chunk's key is
// the raw key given with it (imported first, as for V2's HKDF keys).
var batchJS = js.Global().Get("Function").New("subtle", "op", "key", "items", `
	return Promise.all(items.map(async (it) => {
		const k = it.raw ? await subtle.importKey("raw", it.raw, "AES-GCM", false, [op]) : key;
		return new Uint8Array(await subtle[op]({ name: "AES-GCM", iv: it.iv }, k, it.data));
	}));`)

// webBatch is webFixed (v2 false) or webV2 (v2 true) for a whole batch
// with one await.
func (f *fixture) webBatch(enc, v2 bool, ins [][]byte) ([][]byte, error) {
	items := make([]any, len(ins))
	heads := make([][]byte, len(ins))
	for i, in := range ins {
		it := js.Global().Get("Object").New()
		var iv, salt, body []byte
		switch {
		case enc && v2:
			iv, salt, body = make([]byte, ivSize), make([]byte, saltSize), in
			rand.Read(iv)
			rand.Read(salt)
		case enc:
			iv, body = make([]byte, ivSize), in
			rand.Read(iv)
		case v2:
			iv, salt, body = in[:ivSize], in[ivSize:ivSize+saltSize], in[ivSize+saltSize:]
		default:
			iv, body = in[:ivSize], in[ivSize:]
		}
		if v2 {
			ck, err := hkdf.Key(sha256.New, f.master, salt, "", 32)
			if err != nil {
				return nil, err
			}
			it.Set("raw", u8(ck))
		}
		heads[i] = append(append([]byte(nil), iv...), salt...)
		it.Set("iv", u8(iv))
		it.Set("data", u8(body))
		items[i] = it
	}
	op := "decrypt"
	if enc {
		op = "encrypt"
	}
	res, err := await(batchJS.Invoke(f.subtle, op, f.cKey, items))
	if err != nil {
		return nil, err
	}
	outs := make([][]byte, len(ins))
	for i := range outs {
		a := res.Index(i)
		out := make([]byte, a.Get("byteLength").Int())
		js.CopyBytesToGo(out, a)
		if enc {
			out = append(heads[i], out...)
		}
		outs[i] = out
	}
	return outs, nil
}

func importAES(subtle js.Value, raw []byte) (js.Value, error) {
	return await(subtle.Call("importKey", "raw", u8(raw), "AES-GCM", false, []any{"encrypt", "decrypt"}))
}

// subtleAES runs crypto.subtle.encrypt or decrypt and copies the result
// back into Go memory.
func subtleAES(subtle js.Value, op string, key js.Value, iv, data []byte) ([]byte, error) {
	params := js.Global().Get("Object").New()
	params.Set("name", "AES-GCM")
	params.Set("iv", u8(iv))
	buf, err := await(subtle.Call(op, params, key, u8(data)))
	if err != nil {
		return nil, err
	}
	out := make([]byte, buf.Get("byteLength").Int())
	js.CopyBytesToGo(out, js.Global().Get("Uint8Array").New(buf))
	return out, nil
}

func u8(b []byte) js.Value {
	a := js.Global().Get("Uint8Array").New(len(b))
	js.CopyBytesToJS(a, b)
	return a
}

// await waits for the Promise p, as wasm/webcrypto.go's await does.
func await(p js.Value) (js.Value, error) {
	type result struct {
		v   js.Value
		err error
	}
	ch := make(chan result, 1)
	ok := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- result{v: args[0]}
		return nil
	})
	fail := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- result{err: errors.New(args[0].Call("toString").String())}
		return nil
	})
	p.Call("then", ok, fail)
	r := <-ch
	ok.Release()
	fail.Release()
	return r.v, r.err
}

// run measures one implementation and direction with conc goroutines
// for at least d: operations per second and per-call latencies.
func (f *fixture) run(impl string, enc bool, conc int, d time.Duration) (map[string]any, error) {
	var do func(bool, []byte) ([]byte, error)
	inputs := f.plain
	switch impl {
	case "go":
		do = f.goFixed
		if !enc {
			inputs = f.fixedCT
		}
	case "webcrypto":
		do = f.webFixed
		if !enc {
			inputs = f.fixedCT
		}
	case "go-v2":
		do = func(enc bool, in []byte) ([]byte, error) {
			if enc {
				return f.v2.EncryptBinary(in)
			}
			return f.v2.DecryptBinary(in)
		}
		if !enc {
			inputs = f.v2CT
		}
	case "webcrypto-v2":
		do = f.webV2
		if !enc {
			inputs = f.v2CT
		}
	case "webcrypto-batch", "webcrypto-v2-batch":
		return f.runBatch(impl == "webcrypto-v2-batch", enc, conc, d)
	default:
		return nil, fmt.Errorf("unknown impl %q", impl)
	}
	var (
		mu    sync.Mutex
		lats  []time.Duration
		first error
		wg    sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for g := range conc {
		wg.Go(func() {
			var mine []time.Duration
			for i := g; time.Now().Before(deadline); i += conc {
				t := time.Now()
				if _, err := do(enc, inputs[i%len(inputs)]); err != nil {
					mu.Lock()
					first = cmp(first, err)
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if first != nil {
		return nil, first
	}
	slices.Sort(lats)
	q := func(p float64) float64 { return float64(lats[int(p*float64(len(lats)-1))]) / 1e3 }
	return map[string]any{
		"ops": len(lats), "ms": float64(elapsed) / 1e6,
		"opsPerSec": float64(len(lats)) / elapsed.Seconds(),
		"p50us":     q(0.5), "p99us": q(0.99),
	}, nil
}

// runBatch measures webBatch with batches of n chunks, one batch at a
// time; the latency reported is a batch's.
func (f *fixture) runBatch(v2, enc bool, n int, d time.Duration) (map[string]any, error) {
	inputs := f.plain
	switch {
	case !enc && v2:
		inputs = f.v2CT
	case !enc:
		inputs = f.fixedCT
	}
	var lats []time.Duration
	ops := 0
	start := time.Now()
	for i := 0; time.Since(start) < d; i += n {
		batch := make([][]byte, n)
		for j := range batch {
			batch[j] = inputs[(i+j)%len(inputs)]
		}
		t := time.Now()
		if _, err := f.webBatch(enc, v2, batch); err != nil {
			return nil, err
		}
		lats = append(lats, time.Since(t))
		ops += n
	}
	elapsed := time.Since(start)
	slices.Sort(lats)
	q := func(p float64) float64 { return float64(lats[int(p*float64(len(lats)-1))]) / 1e3 }
	return map[string]any{
		"ops": ops, "ms": float64(elapsed) / 1e6,
		"opsPerSec": float64(ops) / elapsed.Seconds(),
		"p50us":     q(0.5), "p99us": q(0.99),
	}, nil
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func main() {
	var (
		once sync.Once
		fx   *fixture
		ferr error
	)
	// aesgcmBench({impl, op: "encrypt"|"decrypt", conc, ms}) → Promise<result>
	js.Global().Set("aesgcmBench", js.FuncOf(func(_ js.Value, args []js.Value) any {
		o := args[0]
		impl, op := o.Get("impl").String(), o.Get("op").String()
		conc, ms := o.Get("conc").Int(), o.Get("ms").Int()
		exec := js.FuncOf(func(_ js.Value, pa []js.Value) any {
			resolve, reject := pa[0], pa[1]
			go func() {
				once.Do(func() { fx, ferr = newFixture() })
				if ferr != nil {
					reject.Invoke(js.Global().Get("Error").New(ferr.Error()))
					return
				}
				r, err := fx.run(impl, op == "encrypt", conc, time.Duration(ms)*time.Millisecond)
				if err != nil {
					reject.Invoke(js.Global().Get("Error").New(err.Error()))
					return
				}
				resolve.Invoke(js.ValueOf(r))
			}()
			return nil
		})
		defer exec.Release()
		return js.Global().Get("Promise").New(exec)
	}))
	select {}
}
