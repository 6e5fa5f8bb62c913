package chunk

// The V3 splitter mirrors commonlib src/string_and_binary/chunks.ts
// splitPiecesRabinKarp: a 48-byte Rabin–Karp rolling hash (base 31,
// uint32 wrap-around arithmetic as JavaScript's Math.imul and |0) cuts
// where hash mod avg == 1 once a chunk has min bytes, and always at max
// bytes. engine/FORMAT.md §3.2 lists the quirks kept here: the hash is never
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
	return x&bd.mask == bd.want && isZeroY(x-1, bd.c)
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

// rkOutY[b] is b·31^48 − 30 mod 2^32, the term of a byte b leaving the
// window in the recurrence of y = h − 1 (see scanV3); a table load is
// cheaper here than a multiply per byte.
var rkOutY = func() (t [256]uint32) {
	for b := range t {
		t[b] = uint32(b)*rkPow31 - (rkPrime - 1)
	}
	return t
}()

// scanBlock is the length of each of the two streams of scanPair.
const scanBlock = 1024

// rkPowBlock and rkPow2Block are 31^scanBlock and 31^(2·scanBlock)
// mod 2^32.
var rkPowBlock, rkPow2Block = pow31(scanBlock), pow31(2 * scanBlock)

// scanV3 rolls h over data[pos:lim] until the hash is ≡ 1 mod avg. It
// returns the hash, whether it hit, and the position of the hit (or
// lim). Position pos−1 must be at least rkWindow−1 bytes into its chunk
// (the scan starts at length min), so that h_q = S_q + r_q with
// r_q = 31·r_{q−1} from pos−1 on (see splitV3Rolling).
//
// The loops carry y = h − 1 instead of h: h ≡ 1 (mod avg) becomes
// y ≡ 0, whose low-bit prefilter y & mask == 0 is one test instruction.
// From h' = 31·h + in − old·31^48,
// y' = 31·(y + 1) + in − old·31^48 − 1 = 31·y + in − (old·31^48 − 30),
// so only the table of leaving bytes changes (rkOutY).
//
// One step, y' = (y<<5) + ((in − out) − y), is a two-cycle dependency
// through y, longer than its throughput cost; so the range is scanned
// as pairs of adjacent blocks, [p, p+scanBlock) and
// [p+scanBlock, p+2·scanBlock), rolled in lockstep as two independent
// chains. The second chain starts from
// h_{p+scanBlock−1} = S_{p+scanBlock−1} + r_{p−1}·31^scanBlock, a plain
// hash of the 48 bytes before it plus the carried residual.
func scanV3(h uint32, data []byte, pos, lim int, bd boundary) (uint32, bool, int) {
	y := h - 1
	// The two streams return at every prefilter hit; with a weak
	// prefilter (avg with a small power-of-two factor, never from the
	// default sizes) a single stream that tests in place is faster.
	if lim-pos >= 2*scanBlock && bd.mask >= 63 {
		r := h - windowHash(data[pos-rkWindow:pos]) // r_{pos−1}
		for lim-pos >= 2*scanBlock {
			mid := pos + scanBlock
			ya := y
			yb := windowHash(data[mid-rkWindow:mid]) + r*rkPowBlock - 1
			w := data[pos-rkWindow:][:2*scanBlock+rkWindow]
			for i := 0; ; i++ {
				ya, yb, i = scanPair(ya, yb, w, i, bd.mask)
				if i == scanBlock {
					break
				}
				if ya&bd.mask == 0 && isZeroY(ya, bd.c) {
					return ya + 1, true, pos + i
				}
				if yb&bd.mask == 0 && isZeroY(yb, bd.c) {
					// The second block hits at mid+i; the first one has
					// been scanned up to pos+i and may still hit before
					// mid.
					if ya, hit, at := scan1(ya, data, pos+i+1, mid, bd); hit {
						return ya + 1, true, at
					}
					return yb + 1, true, mid + i
				}
			}
			y = yb
			r *= rkPow2Block
			pos += 2 * scanBlock
		}
	}
	y, hit, pos := scan1(y, data, pos, lim, bd)
	return y + 1, hit, pos
}

// scanPair rolls two y chains in lockstep from offset i on, ya over
// w[rkWindow:][:scanBlock] and yb over w[rkWindow+scanBlock:] (w[k]
// leaves the window when w[k+rkWindow] enters). It stops at the first
// offset where ya or yb passes the prefilter y & mask == 0, returning
// both chains' values there and the offset, or scanBlock.
func scanPair(ya, yb uint32, w []byte, i int, mask uint32) (uint32, uint32, int) {
	w = w[:2*scanBlock+rkWindow]
	for k := uint(i); k < scanBlock; k++ {
		da := uint32(w[k+rkWindow]) - rkOutY[w[k]] - ya
		db := uint32(w[k+scanBlock+rkWindow]) - rkOutY[w[k+scanBlock]] - yb
		ya = ya<<5 + da
		yb = yb<<5 + db
		if ya&mask == 0 || yb&mask == 0 {
			return ya, yb, int(k)
		}
		if k++; k == scanBlock {
			break
		}
		da = uint32(w[k+rkWindow]) - rkOutY[w[k]] - ya
		db = uint32(w[k+scanBlock+rkWindow]) - rkOutY[w[k+scanBlock]] - yb
		ya = ya<<5 + da
		yb = yb<<5 + db
		if ya&mask == 0 || yb&mask == 0 {
			return ya, yb, int(k)
		}
	}
	return ya, yb, scanBlock
}

// scan1 rolls y over data[pos:lim] alone, stopping where y ≡ 0 mod avg;
// it returns y, whether it hit, and the position (lim without a hit).
func scan1(y uint32, data []byte, pos, lim int, bd boundary) (uint32, bool, int) {
	out := &rkOutY
	mask, c := bd.mask, bd.c
	// w[k] leaves the window when w[k+rkWindow] enters it.
	w := data[pos-rkWindow : lim]
	for len(w) > rkWindow {
		y = y<<5 + (uint32(w[rkWindow]) - out[w[0]] - y)
		w = w[1:]
		if y&mask == 0 && isZeroY(y, c) {
			return y, true, lim - (len(w) - rkWindow) - 1
		}
	}
	return y, false, lim
}

// isZeroY completes the boundary test on y = h − 1 once the prefilter
// passed: y is a multiple of avg (boundary's test with c), and h did not
// wrap to 0 (h = 0 gives y = 2^32 − 1, a multiple of some avg).
func isZeroY(y uint32, c uint64) bool {
	return uint64(y)*c < c && y != ^uint32(0)
}
