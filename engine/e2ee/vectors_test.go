package e2ee

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/livesync-go/livesync-go/engine/internal/testvectors"
)

// e2eeVectors mirrors engine/testdata/vectors/e2ee.json (see its README).
type e2eeVectors struct {
	Passphrase string `json:"passphrase"`
	PBKDF2Salt struct {
		Hex string `json:"hex"`
	} `json:"pbkdf2Salt"`
	Intermediates struct {
		MasterKeyHex string `json:"masterKeyHex"`
	} `json:"intermediates"`
	HKDFString []struct {
		Name           string   `json:"name"`
		Plaintext      string   `json:"plaintext"`
		Injected       injected `json:"injected"`
		DerivedKeyHex  string   `json:"derivedChunkKeyHex"`
		Ciphertext     string   `json:"ciphertext"`
		CiphertextRand string   `json:"ciphertextRandomRun"`
	} `json:"hkdfString"`
	HKDFBinary []struct {
		Name         string   `json:"name"`
		PlaintextHex string   `json:"plaintextUtf8Hex"`
		Injected     injected `json:"injected"`
		OutputHex    string   `json:"outputHex"`
	} `json:"hkdfBinary"`
	LegacyV1 struct {
		Vectors []struct {
			Name       string `json:"name"`
			Dynamic    bool   `json:"useDynamicIterationCount"`
			Plaintext  string `json:"plaintext"`
			Ciphertext string `json:"ciphertext"`
		} `json:"vectors"`
	} `json:"legacyV1"`
	Documents struct {
		Docs []struct {
			VaultPath         string  `json:"vaultPath"`
			RemoteMetaDet     metaDoc `json:"remoteMetaDocDeterministic"`
			RemoteMetaRand    metaDoc `json:"remoteMetaDocRandom"`
			MetaPlainJSON     string  `json:"encryptedMetaPlaintextJSON"`
			MetaPlainJSONRand string  `json:"encryptedMetaPlaintextJSONRandomRun"`
			Chunks            []struct {
				ID            string   `json:"id"`
				PlaintextData string   `json:"plaintextData"`
				Det           chunkDoc `json:"remoteDeterministic"`
				Rand          chunkDoc `json:"remoteRandom"`
			} `json:"chunks"`
		} `json:"docs"`
	} `json:"documents"`
}

type injected struct {
	HKDFSaltHex string `json:"hkdfSaltHex"`
	IVHex       string `json:"ivHex"`
}

type metaDoc struct {
	Path string `json:"path"`
}

type chunkDoc struct {
	Data string `json:"data"`
	E    bool   `json:"e_"`
}

// upstreamVectors mirrors testdata/upstream.json, made by
// bench/e2ee/genvectors.mjs with the real octagonal-wheels.
type upstreamVectors struct {
	OctagonalWheels string `json:"octagonalWheels"`
	Passphrase      string `json:"passphrase"`
	ObfuscatePath   []struct {
		Path       string `json:"path"`
		Dynamic    bool   `json:"useDynamicIterationCount"`
		Obfuscated string `json:"obfuscated"`
	} `json:"obfuscatePath"`
	V3 []struct {
		Plaintext  string `json:"plaintext"`
		Ciphertext string `json:"ciphertext"`
	} `json:"v3"`
	JSONForm []struct {
		Plaintext  string `json:"plaintext"`
		Dynamic    bool   `json:"useDynamicIterationCount"`
		Ciphertext string `json:"ciphertext"`
	} `json:"jsonForm"`
	Salted []struct {
		Plaintext  string   `json:"plaintext"`
		DrawnHex   []string `json:"drawnHex"`
		Ciphertext string   `json:"ciphertext"`
	} `json:"salted"`
	LegacyBinary []struct {
		Plaintext string `json:"plaintext"`
		Dynamic   bool   `json:"useDynamicIterationCount"`
		Hex       string `json:"hex"`
	} `json:"legacyBinary"`
}

var (
	vecOnce sync.Once
	vec     e2eeVectors
	upVec   upstreamVectors
	vecErr  error
)

func loadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// vectors loads both vector files once per test binary.
func vectors(tb testing.TB) (*e2eeVectors, *upstreamVectors) {
	tb.Helper()
	vecOnce.Do(func() {
		vecErr = loadJSON(testvectors.Path("e2ee.json"), &vec)
		if vecErr == nil {
			vecErr = loadJSON(filepath.Join("testdata", "upstream.json"), &upVec)
		}
	})
	if vecErr != nil {
		tb.Fatalf("loading vectors: %v", vecErr)
	}
	return &vec, &upVec
}

func unhex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		tb.Fatalf("bad hex in vectors: %v", err)
	}
	return b
}

// vectorKey is the vault master key from masterKeyHex: no PBKDF2.
func vectorKey(tb testing.TB) *Key {
	tb.Helper()
	v, _ := vectors(tb)
	k, err := KeyFromMaster(unhex(tb, v.Intermediates.MasterKeyHex))
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func vectorSalt(tb testing.TB) []byte {
	v, _ := vectors(tb)
	return unhex(tb, v.PBKDF2Salt.Hex)
}

// passCipher is a Cipher with the vector passphrase and salt whose V2 key
// is preset from masterKeyHex, so that it needs PBKDF2 only for legacy
// data.
func passCipher(tb testing.TB, o Options) *Cipher {
	v, _ := vectors(tb)
	c := New(v.Passphrase, vectorSalt(tb), o)
	c.key.Store(vectorKey(tb))
	return c
}
