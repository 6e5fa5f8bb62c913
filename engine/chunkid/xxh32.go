package chunkid

import "math/bits"

// XXH32 primes (xxHash specification, XXH32 algorithm description).
const (
	prime32x1 uint32 = 0x9E3779B1
	prime32x2 uint32 = 0x85EBCA77
	prime32x3 uint32 = 0xC2B2AE3D
	prime32x4 uint32 = 0x27D4EB2F
	prime32x5 uint32 = 0x165667B1
)

// XXH32 returns the 32-bit xxHash of b with the given seed, as specified
// by the xxHash specification (the value xxhash-wasm's h32/h32Raw
// return, which LiveSync's xxhash32 and legacy hash modes use).
func XXH32(b []byte, seed uint32) uint32 {
	var d xxh32
	d.reset(seed)
	xxh32Write(&d, b)
	return d.sum()
}

// xxh32 is a streaming XXH32 state. The zero value is not ready: call
// reset first.
type xxh32 struct {
	v     [4]uint32
	seed  uint32
	total uint64
	mem   [16]byte
	n     int // bytes buffered in mem
}

func (d *xxh32) reset(seed uint32) {
	*d = xxh32{seed: seed}
	d.v = [4]uint32{seed + prime32x1 + prime32x2, seed + prime32x2, seed, seed - prime32x1}
}

func round32(acc, lane uint32) uint32 {
	return bits.RotateLeft32(acc+lane*prime32x2, 13) * prime32x1
}

func le32[T string | []byte](b T, i int) uint32 {
	return uint32(b[i]) | uint32(b[i+1])<<8 | uint32(b[i+2])<<16 | uint32(b[i+3])<<24
}

// xxh32Write feeds b (a string or a byte slice, without copying) to d.
func xxh32Write[T string | []byte](d *xxh32, b T) {
	d.total += uint64(len(b))
	if d.n > 0 {
		c := copy(d.mem[d.n:], b)
		d.n += c
		b = b[c:]
		if d.n < 16 {
			return
		}
		d.stripe16(d.mem[:])
		d.n = 0
	}
	for len(b) >= 16 {
		d.v[0] = round32(d.v[0], le32(b, 0))
		d.v[1] = round32(d.v[1], le32(b, 4))
		d.v[2] = round32(d.v[2], le32(b, 8))
		d.v[3] = round32(d.v[3], le32(b, 12))
		b = b[16:]
	}
	d.n = copy(d.mem[:], b)
}

func (d *xxh32) stripe16(p []byte) {
	d.v[0] = round32(d.v[0], le32(p, 0))
	d.v[1] = round32(d.v[1], le32(p, 4))
	d.v[2] = round32(d.v[2], le32(p, 8))
	d.v[3] = round32(d.v[3], le32(p, 12))
}

// sum returns the digest of everything written so far; d is unchanged.
func (d *xxh32) sum() uint32 {
	var h uint32
	if d.total >= 16 {
		h = bits.RotateLeft32(d.v[0], 1) + bits.RotateLeft32(d.v[1], 7) +
			bits.RotateLeft32(d.v[2], 12) + bits.RotateLeft32(d.v[3], 18)
	} else {
		h = d.seed + prime32x5
	}
	h += uint32(d.total) // the specification adds the length modulo 2^32
	p := d.mem[:d.n]
	for len(p) >= 4 {
		h = bits.RotateLeft32(h+le32(p, 0)*prime32x3, 17) * prime32x4
		p = p[4:]
	}
	for _, c := range p {
		h = bits.RotateLeft32(h+uint32(c)*prime32x5, 11) * prime32x1
	}
	h ^= h >> 15
	h *= prime32x2
	h ^= h >> 13
	h *= prime32x3
	h ^= h >> 16
	return h
}
