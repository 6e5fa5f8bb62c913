package e2ee

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

// fuzzCiphers are Ciphers for the vector vault that need no 310000-round
// PBKDF2 (the master key is preset) and use 1000 rounds instead of 100000
// for legacy keys, so that a fuzz iteration stays cheap.
func fuzzCiphers(tb testing.TB) []*Cipher {
	var cs []*Cipher
	for _, o := range []Options{
		{},
		{Algorithm: AlgV1, DynamicIterationCount: true},
		{Algorithm: AlgForceV1},
	} {
		c := passCipher(tb, o)
		c.legacyIter = 1000
		cs = append(cs, c)
	}
	return append(cs, NewWithKey(vectorKey(tb), Options{}))
}

// FuzzDecryptString: no input panics, and a success returns no error.
func FuzzDecryptString(f *testing.F) {
	v, up := vectors(f)
	for _, tc := range v.HKDFString {
		f.Add(tc.Ciphertext)
		f.Add(tc.CiphertextRand)
	}
	for _, tc := range v.LegacyV1.Vectors {
		f.Add(tc.Ciphertext)
	}
	for _, tc := range up.V3 {
		f.Add(tc.Ciphertext)
	}
	for _, tc := range up.JSONForm {
		f.Add(tc.Ciphertext)
	}
	for _, tc := range up.Salted {
		f.Add(tc.Ciphertext)
	}
	f.Add(v.Documents.Docs[0].RemoteMetaDet.Path[len(EncryptedMetaPrefix):])
	for _, s := range []string{"", "%", "%=", "%$", "%~", "[", "[]", `[","]`, `["","",""]`, "%=====", "%= \n"} {
		f.Add(s)
	}
	cs := fuzzCiphers(f)
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range cs {
			if out, err := c.DecryptString(s); err != nil && out != "" {
				t.Fatalf("result %q with error %v", out, err)
			}
		}
		if out, err := decryptSetup(s, "vector-passphrase", 1000, 1000); err != nil && out != "" {
			t.Fatalf("setup: result %q with error %v", out, err)
		}
	})
}

// FuzzDecryptBinary: no input panics; the input is never modified.
func FuzzDecryptBinary(f *testing.F) {
	v, up := vectors(f)
	for _, tc := range v.HKDFBinary {
		f.Add(unhex(f, tc.OutputHex))
	}
	for _, tc := range up.LegacyBinary {
		f.Add(unhex(f, tc.Hex))
	}
	f.Add([]byte{})
	f.Add(make([]byte, 60))
	cs := fuzzCiphers(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		before := hex.EncodeToString(b)
		for _, c := range cs {
			if out, err := c.DecryptBinary(b); err != nil && out != nil {
				t.Fatalf("result with error %v", err)
			}
		}
		if hex.EncodeToString(b) != before {
			t.Fatal("DecryptBinary modified its input")
		}
	})
}

// FuzzBase64Fast: the fast decoder agrees with encoding/base64 whenever it
// accepts, and accepts every padded string encoding/base64 accepts.
func FuzzBase64Fast(f *testing.F) {
	for _, s := range []string{"", "QQ==", "QUI=", "QUJD", "QU=D", "Q===", "////", "++++AA=="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, werr := base64.StdEncoding.DecodeString(s)
		if strings.ContainsAny(s, "\r\n") {
			return // encoding/base64 skips newlines; the fast path leaves them to the forgiving decoder
		}
		dst := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
		n, ok := decodeBase64Fast(dst, s)
		if ok != (werr == nil) || ok && !bytes.Equal(dst[:n], want) {
			t.Fatalf("fast = %x, %v; std = %x, %v", dst[:n], ok, want, werr)
		}
	})
}
