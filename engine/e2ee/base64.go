package e2ee

// Fast path of the standard base64 decoder for the hot V2 read: it reads
// straight from the string (no copy into a byte slice) and decodes a
// 4-character group with four table look-ups and no branches, in the style
// of modp_b64. An invalid character sets bit 24 in its table entry; one
// test after the loop rejects the whole input, which then goes to the
// forgiving decoder (decodeBase64Loose) that also accepts what atob does.

const b64Bad = 1 << 24

var b64Dec [4][256]uint32

func init() {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for t := range b64Dec {
		for i := range b64Dec[t] {
			b64Dec[t][i] = b64Bad
		}
	}
	for v := range len(alphabet) {
		c := alphabet[v]
		b64Dec[0][c] = uint32(v) << 18
		b64Dec[1][c] = uint32(v) << 12
		b64Dec[2][c] = uint32(v) << 6
		b64Dec[3][c] = uint32(v)
	}
}

// decodeBase64Fast decodes canonical padded standard base64 from s into
// dst, which must hold base64.StdEncoding.DecodedLen(len(s)) bytes. It
// reports false for anything else (the caller then tries the forgiving
// decoder); non-zero padding bits are accepted, as by encoding/base64.
func decodeBase64Fast(dst []byte, s string) (int, bool) {
	if len(s)%4 != 0 || len(dst) < len(s)/4*3 {
		return 0, false
	}
	if len(s) == 0 {
		return 0, true
	}
	body := len(s) - 4 // the last group may carry padding
	var acc uint32
	i, j := 0, 0
	for ; i < body; i += 4 {
		q := s[i : i+4]
		x := b64Dec[0][q[0]] | b64Dec[1][q[1]] | b64Dec[2][q[2]] | b64Dec[3][q[3]]
		acc |= x
		d := dst[j : j+3 : j+3]
		d[0], d[1], d[2] = byte(x>>16), byte(x>>8), byte(x)
		j += 3
	}
	q := s[body:]
	switch {
	case q[2] == '=' && q[3] == '=':
		x := b64Dec[0][q[0]] | b64Dec[1][q[1]]
		acc |= x
		dst[j] = byte(x >> 16)
		j++
	case q[3] == '=':
		x := b64Dec[0][q[0]] | b64Dec[1][q[1]] | b64Dec[2][q[2]]
		acc |= x
		dst[j], dst[j+1] = byte(x>>16), byte(x>>8)
		j += 2
	default:
		x := b64Dec[0][q[0]] | b64Dec[1][q[1]] | b64Dec[2][q[2]] | b64Dec[3][q[3]]
		acc |= x
		dst[j], dst[j+1], dst[j+2] = byte(x>>16), byte(x>>8), byte(x)
		j += 3
	}
	if acc&b64Bad != 0 {
		return 0, false
	}
	return j, true
}
