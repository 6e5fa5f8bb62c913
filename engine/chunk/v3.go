package chunk

// The V3 splitter mirrors commonlib src/string_and_binary/chunks.ts
// splitPiecesRabinKarp: a 48-byte Rabin–Karp rolling hash (base 31,
// uint32 wrap-around arithmetic as JavaScript's Math.imul and |0) cuts
// where hash mod avg == 1 once a chunk has min bytes, and always at max
// bytes. FORMAT.md §3.2 lists the quirks kept here: the hash is never
// reset at a boundary, text boundaries move forward past UTF-8
// continuation bytes (possibly beyond max), and text of 4 MiB or more is
// split with the binary sizes.

const (
	rkWindow = 48 // bytes in the rolling window
	rkPrime  = 31 // multiplier of the rolling hash

	// rkPlainLimit is the size from which text is no longer split with
	// the small text sizes.
	rkPlainLimit = 4 * 1024 * 1024
	// rkMaxPlainChunks is upstream MAX_CHUNK_COUNT: the text unit grows
	// until size / (4 × unit) ≤ 500.
	rkMaxPlainChunks = 500
	// rkBinaryUnit is 256 KiB, the binary unit (min; avg ×4; max ×16).
	rkBinaryUnit = 256 * 1024
	// rkMaxFloor is the lower bound applied to pieceSize (30 KiB).
	rkMaxFloor = 30 * 1024
)

// rkPow is 31^(rkWindow−1) mod 2^32 (upstream P_pow_w), the weight of
// the byte leaving the window; rkPow31 = rkPow·31 mod 2^32 is its weight
// after the next multiply. TestRKPow checks both against upstream's
// Math.imul loop.
const (
	rkPow   uint32 = rkPowValue
	rkPow31 uint32 = rkPowValue * rkPrime % (1 << 32)

	rkPowValue = 0x39CAA1DF
)

// rkSizes are the boundary parameters of one V3 split.
type rkSizes struct {
	min, avg, max int
}

// v3Sizes derives the V3 chunk sizes for a blob of n bytes.
func v3Sizes(n int, p params) rkSizes {
	plain := p.plainSplit || p.isText
	if plain && n >= rkPlainLimit {
		plain = false
	}
	var fixedAvg, fixedMax, fixedMin int
	if plain {
		// Smallest unit = 64 + 32k with n / (4 × unit) ≤ 500.
		unit := 64
		if over := n - 4*rkMaxPlainChunks*unit; over > 0 {
			step := 4 * rkMaxPlainChunks * 32
			unit += 32 * ((over + step - 1) / step)
		}
		fixedAvg, fixedMax, fixedMin = unit*4, unit*16, unit*2
	} else {
		fixedAvg, fixedMax, fixedMin = rkBinaryUnit*4, rkBinaryUnit*16, rkBinaryUnit
	}
	maxC := min(fixedMax, max(p.pieceSize, rkMaxFloor))
	minC := min(max(fixedMin, p.minimum), maxC)
	avgC := min(max(fixedAvg, minC), maxC)
	return rkSizes{min: minC, avg: avgC, max: maxC}
}

// splitV3 emits the V3 ranges of data (len(data) > 0). Ranges are never
// empty.
func splitV3(data []byte, p params, emit func(start, end int) bool) {
	sz := v3Sizes(len(data), p)
	if sz.min == sz.max {
		// Every cut is forced at max bytes; the hash cannot move a
		// boundary and is not needed at all (the binary default: fixed
		// 100 KiB chunks).
		splitV3Fixed(data, sz.max, p.isText, emit)
		return
	}
	splitV3Rolling(data, sz, p.isText, emit)
}

// splitV3Fixed cuts every size bytes, moving a text cut forward past
// UTF-8 continuation bytes.
func splitV3Fixed(data []byte, size int, isText bool, emit func(start, end int) bool) {
	n := len(data)
	start := 0
	for n-start > size {
		end := start + size
		if isText {
			for end < n && data[end]&0xC0 == 0x80 {
				end++
			}
		}
		if !emit(start, end) {
			return
		}
		start = end
	}
	if start < n {
		emit(start, n)
	}
}

// boundary tests upstream's boundary condition hash % avg == 1 for a
// uint32 hash without a division. A mask test on the low bits comes
// first: avg's power-of-two factor g (at least 128 for every avg the
// default sizes produce) divides avg, so hash ≡ 1 (mod avg) implies
// hash & (g−1) == 1 & (g−1), and only one hash in g reaches the exact
// test. That is Lemire, Kaser and Kurz's divisibility test ("Faster
// remainder by direct computation", 2019): for d ≥ 2, x−1 is a multiple
// of d iff (x−1)·c mod 2^64 < c with c = ⌊(2^64−1)/d⌋ + 1.
type boundary struct {
	mask, want uint32 // low-bit prefilter
	c          uint64 // divisibility constant for avg
}

func newBoundary(avg uint32) boundary {
	g := min(avg&-avg, 1<<16)
	return boundary{mask: g - 1, want: 1 & (g - 1), c: ^uint64(0)/uint64(avg) + 1}
}

// isOne reports x % avg == 1 (avg ≥ 2).
func (bd boundary) isOne(x uint32) bool {
	return x&bd.mask == bd.want && uint64(x-1)*bd.c < bd.c && x != 0
}

// splitV3Rolling is the content-defined case (min < max). For each chunk
// it jumps to the first position where upstream's boundary test is due
// (length min), then scans with hash and test while length < max, and
// finally forces a cut (length ≥ max, until a text cut is safe).
//
// The jump. Let S_p = Σ_{i<48} b_{p−i}·31^i (mod 2^32) be the plain hash
// of the 48 bytes ending at p (b_j = 0 for j < 0), which obeys
// S_p = 31·S_{p−1} − b_{p−48}·31^48 + b_p at every p. Upstream's hash h_p
// obeys the same recurrence once p ≥ start+48, but for the first 48
// bytes of a chunk it only adds (h_p = 31·h_{p−1} + b_p: the hash is
// never reset). The difference r_p = h_p − S_p therefore follows
// r_p = 31·r_{p−1} + b_{p−48}·31^48 for start ≤ p < start+48 and
// r_p = 31·r_{p−1} after. Unrolling the first 48 steps (h_{start+47} =
// h_{start−1}·31^48 + S_{start+47}, the chunk's first 48 bytes added to
// the carried hash) gives r_{start+47} = h_{start−1}·31^48, and then
// r_p = h_{start−1}·31^(p−start+1). So, for L = p−start+1 ≥ 48,
//
//	h_p = S_p + h_{start−1}·31^L   (mod 2^32)
//
// which needs only the 48 bytes ending at p and the hash carried into
// the chunk: the bytes between start and p−47 are never read.
// TestV3MatchesReference checks this against the byte-by-byte oracle.
func splitV3Rolling(data []byte, sz rkSizes, isText bool, emit func(start, end int) bool) {
	n := len(data)
	bd := newBoundary(uint32(sz.avg))
	// The scan resumes at length min, so the jump lands on length
	// min−1, which must be ≥ rkWindow (min ≥ 128 for every size
	// v3Sizes derives).
	if sz.min-1 < rkWindow {
		panic("chunk: V3 minimum chunk size below the rolling window")
	}
	powJump := pow31(sz.min - 1)
	var h uint32 // hash of the byte before start (upstream's carried hash)
	start := 0
	for {
		// Jump to the position of length min−1; if the data ends before
		// a boundary test is due, the rest is the last chunk.
		pos := start + sz.min - 1
		if pos >= n {
			break
		}
		h = windowHash(data[pos-rkWindow:pos]) + h*powJump

		// Rolling with the boundary test while length < max.
		lim := min(n, start+sz.max-1)
		cut := -1
		for pos < lim {
			var hit bool
			h, hit, pos = scanV3(h, data, pos, lim, bd)
			if !hit {
				break
			}
			// pos is the candidate's last byte.
			if !isText || pos+1 == n || data[pos+1]&0xC0 != 0x80 {
				cut = pos + 1
				pos++
				break
			}
			pos++
		}

		// Forced: length ≥ max; a text cut waits for a safe position.
		if cut < 0 && pos < n {
			for {
				h = (h-uint32(data[pos-rkWindow])*rkPow)*rkPrime + uint32(data[pos])
				pos++
				if !isText || pos == n || data[pos]&0xC0 != 0x80 {
					cut = pos
					break
				}
			}
		}
		if cut < 0 {
			break
		}
		if !emit(start, cut) {
			return
		}
		start = cut
	}
	if start < n {
		emit(start, n)
	}
}

// pow31 returns 31^k mod 2^32 (square and multiply).
func pow31(k int) uint32 {
	r, b := uint32(1), uint32(rkPrime)
	for ; k > 0; k >>= 1 {
		if k&1 != 0 {
			r *= b
		}
		b *= b
	}
	return r
}

// windowHash returns the plain hash Σ w[len(w)−1−i]·31^i of the window
// w, evaluated as four interleaved Horner chains over the bytes
// i ≡ 0, 1, 2, 3 (mod 4) with multiplier 31^4, combined as
// ((c0·31 + c1)·31 + c2)·31 + c3; len(w) must be a multiple of 4.
func windowHash(w []byte) uint32 {
	const p2 = rkPrime * rkPrime
	const p4 = p2 * p2
	var c0, c1, c2, c3 uint32
	for ; len(w) >= 4; w = w[4:] {
		c0 = c0*p4 + uint32(w[0])
		c1 = c1*p4 + uint32(w[1])
		c2 = c2*p4 + uint32(w[2])
		c3 = c3*p4 + uint32(w[3])
	}
	return ((c0*rkPrime+c1)*rkPrime+c2)*rkPrime + c3
}

// rkOut[b] is b·31^48 mod 2^32, the term of a byte b leaving the window
// (a table load is cheaper here than a second multiply per byte).
var rkOut = func() (t [256]uint32) {
	for b := range t {
		t[b] = uint32(b) * rkPow31
	}
	return t
}()

// scanV3 rolls h over data[pos:lim] (pos ≥ rkWindow) until the hash is
// ≡ 1 mod avg. It returns the hash, whether it hit, and the position of
// the hit (or lim). The step is written as (h<<5) + (t − h) = h·31 + t,
// a two-instruction dependency through h, and unrolled twice.
func scanV3(h uint32, data []byte, pos, lim int, bd boundary) (uint32, bool, int) {
	in := data[pos:lim]
	old := data[pos-rkWindow : lim-rkWindow]
	old = old[:len(in)]
	out := &rkOut
	mask, want := bd.mask, bd.want
	i := 0
	for ; i+2 <= len(in); i += 2 {
		t0 := uint32(in[i]) - out[old[i]]
		t1 := uint32(in[i+1]) - out[old[i+1]]
		h0 := h<<5 + (t0 - h)
		h = h0<<5 + (t1 - h0)
		if h0&mask == want && bd.isOne(h0) {
			return h0, true, pos + i
		}
		if h&mask == want && bd.isOne(h) {
			return h, true, pos + i + 1
		}
	}
	for ; i < len(in); i++ {
		h = h<<5 + (uint32(in[i]) - out[old[i]] - h)
		if h&mask == want && bd.isOne(h) {
			return h, true, pos + i
		}
	}
	return h, false, lim
}
