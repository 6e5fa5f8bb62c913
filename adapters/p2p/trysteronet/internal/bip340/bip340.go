// Package bip340 signs with BIP-340 Schnorr signatures over secp256k1,
// as Nostr events are signed, in plain math/big: the js build of
// trysteronet signs its signalling events with it instead of linking a
// secp256k1 library with large precomputed tables.
//
// It is not constant-time. trysteronet uses a fresh key per room, which
// stands for nothing but that room's Nostr events, so timing reveals
// nothing worth having.
package bip340

import (
	"crypto/sha256"
	"errors"
	"io"
	"math/big"
)

var (
	fieldP = hexInt("fffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc2f")
	orderN = hexInt("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141")
	gen    = affine{hexInt("79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"),
		hexInt("483ada7726a3c4655da4fbfc0e1108a8fd17b448a68554199c47d08ffb10d4b8")}
)

var errBadKey = errors.New("bip340: the secret key is zero or not below the group order")

func hexInt(s string) *big.Int {
	n, ok := new(big.Int).SetString(s, 16)
	if !ok {
		panic("bip340: bad constant")
	}
	return n
}

// affine is a curve point; x == nil is the point at infinity.
type affine struct{ x, y *big.Int }

// jacobian is (X/Z², Y/Z³); Z == 0 is the point at infinity.
type jacobian struct{ x, y, z *big.Int }

func mod(a *big.Int) *big.Int { return a.Mod(a, fieldP) }

func mul(a, b *big.Int) *big.Int { return mod(new(big.Int).Mul(a, b)) }

func sub(a, b *big.Int) *big.Int { return mod(new(big.Int).Sub(a, b)) }

// double is 2·p on y² = x³ + 7 (a = 0).
func double(p jacobian) jacobian {
	if p.z.Sign() == 0 || p.y.Sign() == 0 {
		return jacobian{new(big.Int), new(big.Int), new(big.Int)}
	}
	yy := mul(p.y, p.y)
	s := mul(big.NewInt(4), mul(p.x, yy))
	m := mul(big.NewInt(3), mul(p.x, p.x))
	x := sub(mul(m, m), mul(big.NewInt(2), s))
	y := sub(mul(m, sub(s, x)), mul(big.NewInt(8), mul(yy, yy)))
	z := mul(big.NewInt(2), mul(p.y, p.z))
	return jacobian{x, y, z}
}

// addAffine is p + q for an affine q.
func addAffine(p jacobian, q affine) jacobian {
	if p.z.Sign() == 0 {
		return jacobian{new(big.Int).Set(q.x), new(big.Int).Set(q.y), big.NewInt(1)}
	}
	zz := mul(p.z, p.z)
	u2 := mul(q.x, zz)
	s2 := mul(q.y, mul(p.z, zz))
	h := sub(u2, p.x)
	r := sub(s2, p.y)
	if h.Sign() == 0 {
		if r.Sign() == 0 {
			return double(p)
		}
		return jacobian{new(big.Int), new(big.Int), new(big.Int)}
	}
	hh := mul(h, h)
	hhh := mul(hh, h)
	xhh := mul(p.x, hh)
	x := sub(sub(mul(r, r), hhh), mul(big.NewInt(2), xhh))
	y := sub(mul(r, sub(xhh, x)), mul(p.y, hhh))
	z := mul(p.z, h)
	return jacobian{x, y, z}
}

func (p jacobian) affine() affine {
	if p.z.Sign() == 0 {
		return affine{}
	}
	zi := new(big.Int).ModInverse(p.z, fieldP)
	zi2 := mul(zi, zi)
	return affine{mul(p.x, zi2), mul(p.y, mul(zi2, zi))}
}

// baseMul is k·G.
func baseMul(k *big.Int) affine {
	acc := jacobian{new(big.Int), new(big.Int), new(big.Int)}
	for i := k.BitLen() - 1; i >= 0; i-- {
		acc = double(acc)
		if k.Bit(i) == 1 {
			acc = addAffine(acc, gen)
		}
	}
	return acc.affine()
}

func bytes32(n *big.Int) []byte { return n.FillBytes(make([]byte, 32)) }

func taggedHash(tag string, parts ...[]byte) []byte {
	t := sha256.Sum256([]byte(tag))
	h := sha256.New()
	h.Write(t[:])
	h.Write(t[:])
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(nil)
}

// NewKey draws a secret key from r (a cryptographic source).
func NewKey(r io.Reader) ([32]byte, error) {
	var sk [32]byte
	for {
		if _, err := io.ReadFull(r, sk[:]); err != nil {
			return sk, err
		}
		d := new(big.Int).SetBytes(sk[:])
		if d.Sign() != 0 && d.Cmp(orderN) < 0 {
			return sk, nil
		}
	}
}

// PublicKey returns the x-only public key of sk.
func PublicKey(sk [32]byte) ([32]byte, error) {
	var pk [32]byte
	d := new(big.Int).SetBytes(sk[:])
	if d.Sign() == 0 || d.Cmp(orderN) >= 0 {
		return pk, errBadKey
	}
	copy(pk[:], bytes32(baseMul(d).x))
	return pk, nil
}

// Sign signs msg with sk and the auxiliary randomness aux (BIP-340's
// default signing algorithm).
func Sign(sk, msg, aux [32]byte) ([64]byte, error) {
	var sig [64]byte
	d := new(big.Int).SetBytes(sk[:])
	if d.Sign() == 0 || d.Cmp(orderN) >= 0 {
		return sig, errBadKey
	}
	p := baseMul(d)
	if p.y.Bit(0) == 1 {
		d.Sub(orderN, d)
	}
	px := bytes32(p.x)
	t := bytes32(d)
	for i, b := range taggedHash("BIP0340/aux", aux[:]) {
		t[i] ^= b
	}
	k := new(big.Int).SetBytes(taggedHash("BIP0340/nonce", t, px, msg[:]))
	k.Mod(k, orderN)
	if k.Sign() == 0 {
		return sig, errors.New("bip340: zero nonce")
	}
	r := baseMul(k)
	if r.y.Bit(0) == 1 {
		k.Sub(orderN, k)
	}
	rx := bytes32(r.x)
	e := new(big.Int).SetBytes(taggedHash("BIP0340/challenge", rx, px, msg[:]))
	e.Mod(e, orderN)
	s := e.Mul(e, d)
	s.Add(s, k)
	s.Mod(s, orderN)
	copy(sig[:32], rx)
	copy(sig[32:], bytes32(s))
	return sig, nil
}
