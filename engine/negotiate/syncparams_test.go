package negotiate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/jsstring"
)

func TestSyncParametersSalt(t *testing.T) {
	salt32 := bytes.Repeat([]byte{0xAB}, 32)
	for _, tc := range []struct {
		name    string
		salt    string
		want    []byte
		wantErr error
	}{
		{"vector", vectorSalt, mustB64(vectorSalt), nil},
		{"padding optional (atob)", strings.TrimRight(vectorSalt, "="), mustB64(vectorSalt), nil},
		{"white space ignored (atob)", vectorSalt[:10] + " \n" + vectorSalt[10:], mustB64(vectorSalt), nil},
		{"empty", "", nil, ErrNoSalt},
		{"invalid character", "Lqn/qHNB1vkpycUB7XlzFf29yPwvOtVnJwXL5nlzO2w*", nil, engine.ErrMalformed},
		{"url alphabet is not atob's", strings.NewReplacer("/", "_").Replace(vectorSalt), nil, engine.ErrMalformed},
		{"padding in the middle", "AAAA=AAA", nil, engine.ErrMalformed},
		{"impossible length", "AAAAA", nil, engine.ErrMalformed},
		{"16 bytes", "AAAAAAAAAAAAAAAAAAAAAA==", nil, engine.ErrMalformed},
		{"33 bytes", fmt.Sprintf("%s", b64(append(salt32, 1))), nil, engine.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := SyncParameters{PBKDF2Salt: tc.salt}
			got, err := p.Salt()
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil && tc.salt != "" && strings.Contains(err.Error(), tc.salt) {
				t.Errorf("error message leaks the salt: %v", err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Errorf("salt = %x, want %x", got, tc.want)
			}
		})
	}
	if errors.Is(ErrNoSalt, engine.ErrMalformed) {
		t.Error("ErrNoSalt must be distinct from engine.ErrMalformed")
	}
}

func mustB64(s string) []byte {
	b, ok := jsstring.Atob(s)
	if !ok {
		panic(s)
	}
	return b
}

func b64(b []byte) string {
	p := NewSyncParameters(b)
	return p.PBKDF2Salt
}

// TestNeedsNewSalt checks the salt lifecycle rule
// (obsidian-livesync issue #1147): a new salt only when the document is proven
// absent or its salt is empty; never after a failed read.
func TestNeedsNewSalt(t *testing.T) {
	withSalt := NewSyncParameters(bytes.Repeat([]byte{1}, 32))
	noSalt := NewSyncParameters(nil)
	transport := &engine.Error{Op: "get", DocID: SyncParametersDocID, Stage: engine.StageTransport, Err: errors.New("connection reset")}
	auth := &engine.Error{Op: "get", Stage: engine.StageAuth, Err: errors.New("401")}
	notFound := &engine.Error{Op: "get", DocID: SyncParametersDocID, Stage: engine.StageStorage, Err: engine.ErrNotFound}
	for _, tc := range []struct {
		name    string
		doc     *SyncParameters
		readErr error
		want    bool
		wantErr error
	}{
		{"absent", nil, notFound, true, nil},
		{"absent, bare sentinel", nil, engine.ErrNotFound, true, nil},
		{"present with salt", &withSalt, nil, false, nil},
		{"present without salt", &noSalt, nil, true, nil},
		{"transport error", nil, transport, false, transport},
		{"auth error", nil, auth, false, auth},
		{"transport error with a stale doc", &noSalt, transport, false, transport},
		{"malformed body", nil, fmt.Errorf("decode: %w", engine.ErrMalformed), false, engine.ErrMalformed},
		{"no doc and no error", nil, nil, false, engine.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NeedsNewSalt(tc.doc, tc.readErr)
			if got != tc.want {
				t.Errorf("NeedsNewSalt = %v, want %v", got, tc.want)
			}
			if (tc.wantErr == nil) != (err == nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestNewSalt(t *testing.T) {
	s, err := NewSalt(bytes.NewReader(bytes.Repeat([]byte{7}, 40)))
	if err != nil || !bytes.Equal(s, bytes.Repeat([]byte{7}, 32)) {
		t.Errorf("NewSalt = %x, %v", s, err)
	}
	if _, err := NewSalt(bytes.NewReader(make([]byte, 31))); err == nil {
		t.Error("short reader accepted")
	}
	a, err1 := NewSalt(nil)
	b, err2 := NewSalt(nil)
	if err1 != nil || err2 != nil || len(a) != 32 || bytes.Equal(a, b) {
		t.Errorf("crypto/rand salts: %x %x %v %v", a, b, err1, err2)
	}
	p := NewSyncParameters(a)
	if got, err := p.Salt(); err != nil || !bytes.Equal(got, a) {
		t.Errorf("round trip through NewSyncParameters: %x %v", got, err)
	}
}

func TestSyncParametersJSON(t *testing.T) {
	out, _ := json.Marshal(NewSyncParameters(nil))
	if string(out) != `{"_id":"_local/obsidian_livesync_sync_parameters","type":"sync-parameters","protocolVersion":2,"pbkdf2salt":""}` {
		t.Errorf("NewSyncParameters(nil) = %s", out)
	}
	in := `{"_id":"_local/obsidian_livesync_sync_parameters","_rev":"0-3","type":"sync-parameters","protocolVersion":2,"pbkdf2salt":"x","future":{"a":1}}`
	p, err := ParseSyncParameters([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out, _ = json.Marshal(p)
	sameJSON(t, out, []byte(in))
	for _, bad := range []string{``, `null`, `"x"`, `[]`, `{"pbkdf2salt":1}`, `{"protocolVersion":"2"}`, `{"protocolVersion":2.5}`, `{"type":false}`, `{`} {
		if _, err := ParseSyncParameters([]byte(bad)); !errors.Is(err, engine.ErrMalformed) {
			t.Errorf("ParseSyncParameters(%q) err = %v", bad, err)
		}
	}
}

func TestJournalEpoch(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{`{"protocolVersion":2,"pbkdf2salt":"abc="}`, "2:abc="},
		{`{"protocolVersion":1,"pbkdf2salt":"abc="}`, "1:abc="},
		{`{"pbkdf2salt":"abc="}`, "undefined:abc="},
		{`{"protocolVersion":2,"pbkdf2salt":""}`, "2:"},
	} {
		p, err := ParseSyncParameters([]byte(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		if got := JournalEpoch(p); got != tc.want {
			t.Errorf("JournalEpoch(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// SaltOf reads a document's salt, gives nil for a salt-less one and
// errors for a damaged document or salt.
func TestSaltOf(t *testing.T) {
	got, err := SaltOf([]byte(`{"_id":"` + SyncParametersDocID + `","pbkdf2salt":"` + vectorSalt + `"}`))
	if err != nil || !bytes.Equal(got, mustB64(vectorSalt)) {
		t.Errorf("salt %x, %v; want %x", got, err, mustB64(vectorSalt))
	}
	if got, err := SaltOf([]byte(`{"_id":"` + SyncParametersDocID + `","pbkdf2salt":""}`)); got != nil || err != nil {
		t.Errorf("salt-less: %x, %v; want nil, nil", got, err)
	}
	if _, err := SaltOf([]byte(`{"_id":"` + SyncParametersDocID + `","pbkdf2salt":"AAAAA"}`)); !errors.Is(err, engine.ErrMalformed) {
		t.Errorf("bad salt: %v; want ErrMalformed", err)
	}
	if _, err := SaltOf([]byte(`not json`)); err == nil {
		t.Error("a damaged document gives no error")
	}
}

// Each handshake record has a name for messages.
func TestRecordName(t *testing.T) {
	for r, want := range map[Record]string{RecordSyncParameters: "sync parameters", RecordMilestone: "milestone",
		RecordVersion: "version", Record("other"): "document"} {
		if got := r.Name(); got != want {
			t.Errorf("%s: %q, want %q", r, got, want)
		}
	}
}
