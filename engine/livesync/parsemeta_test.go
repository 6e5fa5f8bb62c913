package livesync

import (
	"encoding/json"
	"reflect"
	"testing"
)

// metaByReencoding is how ParseMeta read the fields before: the whole
// document encoded and decoded into a struct. ParseMeta must agree.
func metaByReencoding(d Doc) (path *string, children []string, ctime, mtime, size *json.Number, typ string, eden map[string]EdenEntry, data json.RawMessage, ok bool) {
	var m struct {
		Path     *string              `json:"path"`
		Children []string             `json:"children"`
		CTime    *json.Number         `json:"ctime"`
		MTime    *json.Number         `json:"mtime"`
		Size     *json.Number         `json:"size"`
		Type     string               `json:"type"`
		Eden     map[string]EdenEntry `json:"eden"`
		Data     json.RawMessage      `json:"data"`
	}
	b, _ := json.Marshal(map[string]json.RawMessage(d))
	err := json.Unmarshal(b, &m)
	return m.Path, m.Children, m.CTime, m.MTime, m.Size, m.Type, m.Eden, m.Data, err == nil
}

func TestDecodeFieldsAsReencoding(t *testing.T) {
	docs := []string{
		`{"_id":"a.md","path":"A.md","children":["h:1","h:2"],"ctime":1,"mtime":2.0,"size":"3","type":"plain","eden":{}}`,
		`{"_id":"a.md","Path":"first","path":"second","PATH":"third","Children":["x"],"children":null}`,
		`{"_id":"a.md","pAth":"x","CTIME":5,"Eden":{"h:1":{"data":"d","epoch":1}},"eden":{"h:2":{"data":"e","epoch":2}}}`,
		`{"_id":"a.md","data":["a","b"],"DATA":"c","Type":"notes"}`,
		`{"_id":"a.md","ctime":"x"}`,
		`{"_id":"a.md","children":[1]}`,
		`{"_id":"a.md","path":5}`,
		`{"_id":"a.md","type":null,"size":null,"eden":null}`,
		`{"_id":"a.md","\u212aey":1,"ſize":7}`,
	}
	fields := func(d Doc) []any {
		var m struct {
			Path     *string
			Children []string
			CTime    *json.Number
			MTime    *json.Number
			Size     *json.Number
			Type     string
			Eden     map[string]EdenEntry
			Data     json.RawMessage
		}
		err := decodeFields(d, map[string]any{"path": &m.Path, "children": &m.Children, "ctime": &m.CTime, "mtime": &m.MTime,
			"size": &m.Size, "type": &m.Type, "eden": &m.Eden, "data": &m.Data})
		return []any{m.Path, m.Children, m.CTime, m.MTime, m.Size, m.Type, m.Eden, string(m.Data), err == nil}
	}
	for _, s := range docs {
		d, err := ParseDoc([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		p, c, ct, mt, sz, ty, e, da, ok := metaByReencoding(d)
		want := []any{p, c, ct, mt, sz, ty, e, string(da), ok}
		if got := fields(d); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got  %v\n want %v", s, got, want)
		}
	}
}
