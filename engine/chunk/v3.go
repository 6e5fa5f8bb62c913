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
// it runs three loops over the positions where upstream's test has a
// fixed outcome: first only the hash is updated (chunk shorter than
// min), then hash and test (min ≤ length < max), and finally a cut is
// forced (length ≥ max, until a text cut is safe).
func splitV3Rolling(data []byte, sz rkSizes, isText bool, emit func(start, end int) bool) {
	n := len(data)
	bd := newBoundary(uint32(sz.avg))
	var h uint32
	start, pos := 0, 0
	for pos < n {
		// Window filling: the first rkWindow bytes of a chunk are added
		// on top of the hash carried over from the previous chunk.
		// min > rkWindow always holds (min ≥ 128), so no test is due.
		fill := min(n, start+rkWindow)
		for _, b := range data[pos:fill] {
			h = h*rkPrime + uint32(b)
		}
		pos = fill

		// Rolling, no boundary test while length < min.
		lim := min(n, start+sz.min-1)
		if pos < lim {
			h = rollV3(h, data[pos-rkWindow:lim-rkWindow], data[pos:lim])
			pos = lim
		}

		// Rolling with the boundary test while length < max.
		lim = min(n, start+sz.max-1)
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

// The rolling step h' = (h − old·31^47)·31 + in is computed as
// h·31 + (in − old·31^48): the second term does not depend on h, which
// keeps the loop-carried dependency to one multiply and one add.

// rollV3 rolls h over in (old holds the bytes leaving the window, same
// length) and returns the new hash. Four steps are combined into
// h·31^4 + (((t0·31 + t1)·31 + t2)·31 + t3), which shortens the
// dependency chain through h fourfold.
func rollV3(h uint32, old, in []byte) uint32 {
	const p2 = rkPrime * rkPrime
	const p4 = p2 * p2
	old = old[:len(in)]
	i := 0
	for ; i+4 <= len(in); i += 4 {
		t0 := uint32(in[i]) - uint32(old[i])*rkPow31
		t1 := uint32(in[i+1]) - uint32(old[i+1])*rkPow31
		t2 := uint32(in[i+2]) - uint32(old[i+2])*rkPow31
		t3 := uint32(in[i+3]) - uint32(old[i+3])*rkPow31
		h = h*p4 + (((t0*rkPrime+t1)*rkPrime+t2)*rkPrime + t3)
	}
	for ; i < len(in); i++ {
		h = h*rkPrime + (uint32(in[i]) - uint32(old[i])*rkPow31)
	}
	return h
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
