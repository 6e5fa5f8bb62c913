package replicate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

var rawDocs = []string{
	`{"_id":"h:abc","_rev":"1-a","_revisions":{"start":1,"ids":["a"]},"data":"x\"y<z>","type":"leaf"}`,
	`{ "_id" : "h:abc" , "_rev" : "2-b" , "_deleted" : true }`,
	`{"_id":"note.md","_rev":"1-a","children":["h:1","h:2"],"path":"Note.md","ctime":1,"mtime":2,"size":3,"type":"plain","eden":{}}`,
	`{"_id":"f:0123","_rev":"1-a","path":"/\\:abc","type":"newnote","deleted":true,"children":[]}`,
	`{"_id":"legacy","_rev":"1-a","data":"text"}`,
	`{"_id":"legacy","_rev":"1-a","data":"text","type":5}`,
	`{"_id":"gone.md","_rev":"3-c","_deleted":true,"_revisions":{"start":3,"ids":["c","b","a"]}}`,
	`{"_id":"gone.md","_rev":"3-c","_deleted":true,"x":1}`,
	`{"_id":"syncinfo","_rev":"1-a","data":"x","type":"syncinfo"}`,
	`{"_id":"_design/x","_rev":"1-a","_deleted":true}`,
	`{"_id":"obsydian_livesync_version","_rev":"1-a","version":12,"type":"versioninfo"}`,
	`{"\u005fid":"esc","_rev":"1-a","\u0074ype":"plain","deleted":false}`,
	`{"_id":"dup","_id":"dup2","_rev":"1-a","type":"leaf","type":"plain"}`,
	`{"_id":"a","":1,"_deleted":"true"}`,
	`{"_id":""}`, `{"_id":5}`, `{"_rev":"1-a"}`, `{}`, `[]`, `null`, `"x"`, `{"_id":"a"`,
}

// TestParseDocAsLivesync: parseDoc accepts and refuses what
// livesync.ParseDoc does, with the same members; readHead reads what the
// pull hooks read of the parsed document.
func TestParseDocAsLivesync(t *testing.T) {
	for _, s := range rawDocs {
		want, wantErr := livesync.ParseDoc([]byte(s))
		got, err := parseDoc([]byte(s))
		h, ok := readHead([]byte(s))
		if (err == nil) != (wantErr == nil) || ok != (wantErr == nil) {
			t.Errorf("%s: parseDoc error %v, readHead ok %v; ParseDoc error %v", s, err, ok, wantErr)
			continue
		}
		if err != nil {
			if err.Error() != wantErr.Error() {
				t.Errorf("%s: error %q, want %q", s, err, wantErr)
			}
			continue
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d members, want %d", s, len(got), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Errorf("%s: member %q = %s, want %s", s, k, got[k], v)
			}
		}
		if h.id != want.ID() || h.rev != want.Rev() || h.isDeleted() != want.Deleted() || h.isFileDoc() != want.IsFileDoc() {
			t.Errorf("%s: head %+v, want id %q rev %q deleted %v file %v", s, h, want.ID(), want.Rev(), want.Deleted(), want.IsFileDoc())
		}
		if h.isBodylessTombstone() != bodylessTombstone(want) {
			t.Errorf("%s: bodyless tombstone %v", s, h.isBodylessTombstone())
		}
	}
}

// bodylessTombstone is how the pull hooks judged a parsed document.
func bodylessTombstone(d livesync.Doc) bool {
	if !d.Deleted() || docid.IsSystemID(d.ID()) {
		return false
	}
	for k := range d {
		if len(k) == 0 || k[0] != '_' {
			return false
		}
	}
	return true
}

// TestEncodeDocAsMarshal: encodeDoc writes valid JSON of the same
// members as Doc.MarshalJSON.
func TestEncodeDocAsMarshal(t *testing.T) {
	for _, s := range rawDocs {
		d, err := parseDoc([]byte(s))
		if err != nil {
			continue
		}
		d["new"] = json.RawMessage(`"<&>\u2028"`)
		d["a\"b<"] = json.RawMessage(`[1, 2]`)
		d["é\n"] = json.RawMessage(`{"x" : null}`)
		got := encodeDoc(d)
		if !json.Valid(got) {
			t.Fatalf("%s: encoded %s is not JSON", s, got)
		}
		back, err := livesync.ParseDoc(got)
		if err != nil || len(back) != len(d) {
			t.Fatalf("%s: encoded %s reads back as %v, %v", s, got, back, err)
		}
		want, _ := d.MarshalJSON()
		var gotV, wantV any
		_ = json.Unmarshal(got, &gotV)
		_ = json.Unmarshal(want, &wantV)
		if !reflect.DeepEqual(gotV, wantV) {
			t.Errorf("encoded %s, want %s", got, want)
		}
	}
}
