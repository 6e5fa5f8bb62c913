package chunkid

import (
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"io"
	"strconv"

	"github.com/cespare/xxhash/v2"
	"github.com/livesync-go/livesync-go/engine"
)

// HashAlg is the vault setting hashAlg: which hash chunk ids are made
// with. Its values are exactly upstream's setting strings (commonlib
// src/common/models/setting.const.ts HashAlgorithms).
type HashAlg string

// The hash algorithms a vault can use.
const (
	// XXHash64 is the default for new vaults: base36(XXH64(piece-len)).
	XXHash64 HashAlg = "xxhash64"
	// XXHash32 is obsolete: base36(XXH32(piece-len)), computed upstream by
	// the FallbackWasmHashManager.
	XXHash32 HashAlg = "xxhash32"
	// Legacy is upstream's empty setting: the signed int32
	// XXH32(piece) ^ len in base 36, so ids may start with "-".
	Legacy HashAlg = ""
	// MixedPureJS is the pure-JS hash: MixedEach(piece-len).
	MixedPureJS HashAlg = "mixed-purejs"
	// SHA1 is base64(SHA-1(piece-len)); ids contain '+', '/' and '='.
	SHA1 HashAlg = "sha1"
)

// saltOfID is commonlib's SALT_OF_ID (src/common/models/shared.const.behabiour.ts).
const saltOfID = "a83hrf7f\u0003y7sa8g31"

// seedMurmurHash is commonlib's SEED_MURMURHASH, the seed of hp32.
const seedMurmurHash = 0x12345678

// Hasher computes chunk ids for one vault configuration. It is immutable
// after New and safe for concurrent use; ID never fails and never panics.
type Hasher struct {
	alg     HashAlg
	encrypt bool
	hp      string // MixedEach of the passphrase material (ASCII)
	hp32    uint32 // MixedHash of the passphrase material, seed 0x12345678
}

// New returns a Hasher for the hash algorithm alg. encrypt is the vault's
// E2EE setting (not path obfuscation): when true ids are "h:+" followed
// by a hash keyed with passphrase. The passphrase material is computed
// once here, as commonlib src/managers/HashManager/HashManagerCore.ts
// applyOptions does: pfh = SALT_OF_ID + the first floor(3/4 × length)
// UTF-16 units of passphrase, hp = MixedEach(pfh), hp32 =
// MixedHash(pfh, 0x12345678). It is computed even when encrypt is false
// (upstream does too); it is then unused.
//
// New fails with an error wrapping engine.ErrUnsupported when alg is not
// one of the HashAlg constants. (Upstream would silently fall back to the
// xxhash32 formula for an unknown setting; refusing is safer.)
func New(alg HashAlg, encrypt bool, passphrase string) (*Hasher, error) {
	switch alg {
	case XXHash64, XXHash32, Legacy, MixedPureJS, SHA1:
	default:
		return nil, fmt.Errorf("chunkid: unknown hash algorithm %q: %w", string(alg), engine.ErrUnsupported)
	}
	pass := utf16Units(passphrase)
	pfh := append(utf16Units(saltOfID), pass[:len(pass)*3/4]...)
	hp32, _ := MixedHash(pfh, seedMurmurHash)
	return &Hasher{alg: alg, encrypt: encrypt, hp: mixedEachUTF16(pfh), hp32: hp32}, nil
}

// Alg returns the hash algorithm h was made for.
func (h *Hasher) Alg() HashAlg { return h.alg }

// Encrypt reports whether h makes E2EE ("h:+") ids.
func (h *Hasher) Encrypt() bool { return h.encrypt }

// HashedPassphrase returns upstream's hashedPassphrase: MixedEach of the
// passphrase material, the key mixed into E2EE ids (ASCII, base 36).
func (h *Hasher) HashedPassphrase() string { return h.hp }

// HashedPassphrase32 returns upstream's hashedPassphrase32: the 32-bit
// MixedHash of the passphrase material with seed 0x12345678, the key
// mixed into E2EE ids of the Legacy algorithm.
func (h *Hasher) HashedPassphrase32() uint32 { return h.hp32 }

// ID returns the chunk id of piece: "h:" + H(piece), or "h:+" + H(piece)
// keyed with the passphrase when h encrypts (engine/FORMAT.md §3.5; commonlib
// src/managers/HashManager/XXHashHashManager.ts, PureJSHashManager.ts).
// piece is the chunk's data exactly as stored (text, or base64 for
// binary). Its length is taken in UTF-16 code units and it is hashed as
// the UTF-8 (or, for MixedPureJS, UTF-16) of the JavaScript string it
// stands for; see the package documentation for invalid UTF-8.
//
// ID is deterministic, allocates only the returned string for XXHash64,
// XXHash32, Legacy and MixedPureJS on valid UTF-8, and is safe for
// concurrent use.
func (h *Hasher) ID(piece string) string {
	units, valid := utf16Len(piece)
	if !valid {
		piece = sanitize(piece)
	}
	var numBuf [20]byte
	num := strconv.AppendUint(numBuf[:0], uint64(units), 10)

	var out [48]byte
	b := append(out[:0], "h:"...)
	if h.encrypt {
		b = append(b, '+')
	}
	switch h.alg {
	case XXHash64:
		var d xxhash.Digest
		d.Reset()
		_, _ = d.WriteString(piece)
		_, _ = d.WriteString("-")
		if h.encrypt {
			_, _ = d.WriteString(h.hp)
			_, _ = d.WriteString("-")
		}
		_, _ = d.Write(num)
		b = strconv.AppendUint(b, d.Sum64(), 36)
	case XXHash32:
		var d xxh32
		d.reset(0)
		xxh32Write(&d, piece)
		xxh32Write(&d, "-")
		if h.encrypt {
			xxh32Write(&d, h.hp)
			xxh32Write(&d, "-")
		}
		xxh32Write(&d, num)
		b = strconv.AppendUint(b, uint64(d.sum()), 36)
	case Legacy:
		var d xxh32
		d.reset(0)
		xxh32Write(&d, piece)
		v := d.sum() ^ uint32(units)
		if h.encrypt {
			v ^= h.hp32
		}
		// JavaScript's ^ yields a signed int32; Number.toString(36)
		// prints a negative value as "-" and its magnitude.
		b = strconv.AppendInt(b, int64(int32(v)), 36)
	case MixedPureJS:
		// fallbackMixedHashEach(s) hashes decimal(len(s)) + s, where s is
		// piece + "-" + len, or piece + hp + len (no dashes) when keyed.
		total := units + len(num) + 1
		if h.encrypt {
			total = units + len(h.hp) + len(num)
		}
		var m mixer
		m.reset(1)
		var totBuf [20]byte
		m.ascii(strconv.AppendUint(totBuf[:0], uint64(total), 10))
		m.str(piece)
		if h.encrypt {
			m.str(h.hp)
		} else {
			m.unit('-')
		}
		m.ascii(num)
		b = m.appendEach(b)
	case SHA1:
		d := sha1.New()
		_, _ = io.WriteString(d, piece)
		_, _ = io.WriteString(d, "-")
		if h.encrypt {
			_, _ = io.WriteString(d, h.hp)
			_, _ = io.WriteString(d, "-")
		}
		_, _ = d.Write(num)
		var sum [sha1.Size]byte
		b = base64.StdEncoding.AppendEncode(b, d.Sum(sum[:0]))
	}
	return string(b)
}
