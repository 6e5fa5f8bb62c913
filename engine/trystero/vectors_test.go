package trystero

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The vectors in testdata/vectors.json were computed by trystero 0.25.3's
// own code and octagonal-wheels' mixedHash (tests/trystero/gen-vectors.mjs;
// testdata/README.md describes every field and how to regenerate).

type vecFile struct {
	Provenance struct {
		Packages map[string]string `json:"packages"`
	} `json:"provenance"`
	RoomPasswords []struct {
		Passphrase string `json:"passphrase"`
		Password   string `json:"password"`
	} `json:"roomPasswords"`
	SHA1B36 []struct {
		Input  string `json:"input"`
		Output string `json:"output"`
	} `json:"sha1b36"`
	Topics []struct {
		AppID          string `json:"appId"`
		RoomID         string `json:"roomId"`
		SelfID         string `json:"selfId"`
		RootTopicPlain string `json:"rootTopicPlain"`
		RootTopic      string `json:"rootTopic"`
		SelfTopic      string `json:"selfTopic"`
		RootKind       int    `json:"rootKind"`
		SelfKind       int    `json:"selfKind"`
		RoomToken      string `json:"roomToken"`
	} `json:"topics"`
	IDs struct {
		Alphabet        string `json:"alphabet"`
		SelfID          string `json:"selfId"`
		SelfIDLength    int    `json:"selfIdLength"`
		OfferIDLength   int    `json:"offerIdLength"`
		ChallengeLength int    `json:"challengeLength"`
	} `json:"ids"`
	SDP []struct {
		Password string `json:"password"`
		AppID    string `json:"appId"`
		RoomID   string `json:"roomId"`
		KeyHex   string `json:"keyHex"`
		IVHex    string `json:"ivHex"`
		Plain    string `json:"plain"`
		Sealed   string `json:"sealed"`
	} `json:"sdp"`
	SDPOpenVariants struct {
		Password string `json:"password"`
		AppID    string `json:"appId"`
		RoomID   string `json:"roomId"`
		Variants []struct {
			Name   string `json:"name"`
			Sealed string `json:"sealed"`
			Opens  bool   `json:"opens"`
			Plain  string `json:"plain"`
		} `json:"variants"`
	} `json:"sdpOpenVariants"`
	Handshakes []struct {
		AppID        string `json:"appId"`
		RoomID       string `json:"roomId"`
		Password     string `json:"password"`
		Challenge    string `json:"challenge"`
		ResponseJSON string `json:"responseJSON"`
		ResponseHash string `json:"responseHash"`
	} `json:"handshakes"`
	HandshakeInitiator struct {
		AppID              string `json:"appId"`
		RoomID             string `json:"roomId"`
		Password           string `json:"password"`
		ChallengeJSON      string `json:"challengeJSON"`
		WrongResponseError string `json:"wrongResponseError"`
	} `json:"handshakeInitiator"`
	PresenceFrames []struct {
		Present   bool   `json:"present"`
		RoomToken string `json:"roomToken"`
		Hex       string `json:"hex"`
	} `json:"presenceFrames"`
	RoomFrame struct {
		RoomToken  string `json:"roomToken"`
		PayloadHex string `json:"payloadHex"`
		Hex        string `json:"hex"`
	} `json:"roomFrame"`
	FrameParsing []struct {
		Name   string `json:"name"`
		Hex    string `json:"hex"`
		Result *struct {
			Type       string `json:"type"`
			RoomToken  string `json:"roomToken"`
			PayloadHex string `json:"payloadHex"`
			IsPresent  bool   `json:"isPresent"`
		} `json:"result"`
	} `json:"frameParsing"`
	ActionFrames []vecMessage `json:"actionFrames"`
	NonceWrap    []struct {
		SendIndex int    `json:"sendIndex"`
		HeaderHex string `json:"headerHex"`
	} `json:"nonceWrap"`
	Reassembly struct {
		Messages []vecMessage `json:"messages"`
		Arrivals []struct {
			Message     int    `json:"message"`
			Frame       int    `json:"frame"`
			HeaderHex   string `json:"headerHex"`
			FrameSHA256 string `json:"frameSHA256"`
		} `json:"arrivals"`
		Delivered []struct {
			Message      int `json:"message"`
			AfterArrival int `json:"afterArrival"`
		} `json:"delivered"`
	} `json:"reassembly"`
	ReceiverEdgeCases []struct {
		Name      string   `json:"name"`
		Frames    []string `json:"frames"`
		Threw     []bool   `json:"threw"`
		Delivered []struct {
			AfterFrame   int    `json:"afterFrame"`
			Action       string `json:"action"`
			Kind         string `json:"kind"`
			BodyText     string `json:"bodyText"`
			BodyHex      string `json:"bodyHex"`
			MetadataJSON string `json:"metadataJSON"`
		} `json:"delivered"`
	} `json:"receiverEdgeCases"`
	TextDecoding []struct {
		Hex  string `json:"hex"`
		Text string `json:"text"`
	} `json:"textDecoding"`
	LeaderPairs []struct {
		Self      string `json:"self"`
		Other     string `json:"other"`
		SelfLeads bool   `json:"selfLeads"`
	} `json:"leaderPairs"`
	Signalling struct {
		AppID     string `json:"appId"`
		RoomID    string `json:"roomId"`
		Password  string `json:"password"`
		SelfID    string `json:"selfId"`
		RootTopic string `json:"rootTopic"`
		SelfTopic string `json:"selfTopic"`
		Plains    struct {
			Offer     string `json:"offer"`
			Answer    string `json:"answer"`
			Candidate string `json:"candidate"`
		} `json:"plains"`
		Messages []struct {
			Name     string `json:"name"`
			Role     string `json:"role"`
			Received struct {
				Topic   string `json:"topic"`
				Content string `json:"content"`
			} `json:"received"`
			Sent []struct {
				Topic         string `json:"topic"`
				Content       string `json:"content"`
				ToSelfTopicOf string `json:"toSelfTopicOf"`
			} `json:"sent"`
		} `json:"messages"`
		WrongPasswordError []string `json:"wrongPasswordError"`
		Decoding           []struct {
			Content string `json:"content"`
			ActedOn bool   `json:"actedOn"`
		} `json:"decoding"`
	} `json:"signalling"`
	NostrEvents []struct {
		Topic   string            `json:"topic"`
		Content string            `json:"content"`
		Raw     string            `json:"raw"`
		Message []json.RawMessage `json:"message"`
	} `json:"nostrEvents"`
	NostrSubscribe string `json:"nostrSubscribe"`
	JoinRoom       struct {
		AppID              string `json:"appId"`
		RoomID             string `json:"roomId"`
		Password           string `json:"password"`
		SelfID             string `json:"selfId"`
		RootTopic          string `json:"rootTopic"`
		SelfTopic          string `json:"selfTopic"`
		OtherPeerID        string `json:"otherPeerId"`
		OtherAnnouncedAtMs int64  `json:"otherAnnouncedAtMs"`
		OfferPlain         string `json:"offerPlain"`
		RTCConfiguration   struct {
			ICEServers []struct {
				URLs       json.RawMessage `json:"urls"`
				Username   string          `json:"username"`
				Credential string          `json:"credential"`
			} `json:"iceServers"`
			ICETransportPolicy string `json:"iceTransportPolicy"`
		} `json:"rtcConfiguration"`
		DataChannelLabels []string `json:"dataChannelLabels"`
		Sent              []struct {
			AtMs  int64  `json:"atMs"`
			Topic string `json:"topic"`
			Raw   string `json:"raw"`
		} `json:"sent"`
	} `json:"joinRoom"`
	Constants      map[string]any `json:"constants"`
	LoneSurrogates []struct {
		Kind     string `json:"kind"`
		FrameHex string `json:"frameHex"`
		BodyText string `json:"bodyText"`
	} `json:"loneSurrogates"`
	Transcripts []vecTranscript `json:"transcripts"`
}

// vecTranscript is the data-channel traffic between two trystero rooms:
// A initiates the password handshake, B responds.
type vecTranscript struct {
	Name            string `json:"name"`
	AppID           string `json:"appId"`
	RoomID          string `json:"roomId"`
	PasswordA       string `json:"passwordA"`
	PasswordB       string `json:"passwordB"`
	HandshakeFrames int    `json:"handshakeFrames"`
	Frames          []struct {
		Dir string `json:"dir"`
		Hex string `json:"hex"`
	} `json:"frames"`
	Events         []string `json:"events"`
	RPCMessageJSON string   `json:"rpcMessageJSON"`
}

// vecMessage is one action message trystero sent, with the frames it
// produced (actionFrames) or only its body (reassembly).
type vecMessage struct {
	Action       string `json:"action"`
	Nonce        uint16 `json:"nonce"`
	Kind         string `json:"kind"`
	Generator    string `json:"generator"`
	BodyLength   int    `json:"bodyLength"`
	BodySHA256   string `json:"bodySHA256"`
	MetadataJSON string `json:"metadataJSON"`
	Frames       []struct {
		FrameLength int    `json:"frameLength"`
		HeaderHex   string `json:"headerHex"`
		BodyLength  int    `json:"bodyLength"`
		FrameSHA256 string `json:"frameSHA256"`
		Hex         string `json:"hex"`
	} `json:"frames"`
}

var (
	vecOnce sync.Once
	vecData vecFile
	vecErr  error
)

// vectors loads testdata/vectors.json once per test binary (os works in
// tests under js/wasm too: Node's wasm_exec gives the binary the file
// system).
func vectors(t *testing.T) *vecFile {
	t.Helper()
	vecOnce.Do(func() {
		var b []byte
		b, vecErr = os.ReadFile(filepath.Join("testdata", "vectors.json"))
		if vecErr == nil {
			vecErr = json.Unmarshal(b, &vecData)
		}
	})
	if vecErr != nil {
		t.Fatalf("loading vectors: %v", vecErr)
	}
	if got := vecData.Provenance.Packages["trystero"]; got != "0.25.3" {
		t.Fatalf("vectors made with trystero %q, want 0.25.3", got)
	}
	return &vecData
}

func vecHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex in vectors: %v", err)
	}
	return b
}

func vecSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// vecText is the generator's text body: whole characters of the cycle
// "a", "é", "€", "😀" while they fit in n UTF-8 bytes, then "a"s.
func vecText(n int) string {
	cycle := []string{"a", "é", "€", "😀"}
	var b strings.Builder
	for i := 0; ; i++ {
		c := cycle[i%len(cycle)]
		if b.Len()+len(c) > n {
			break
		}
		b.WriteString(c)
	}
	return b.String() + strings.Repeat("a", n-b.Len())
}

// vecBody rebuilds a message body and its kind from its generator.
func vecBody(t *testing.T, m vecMessage) ([]byte, BodyKind) {
	t.Helper()
	var body []byte
	var kind BodyKind
	switch m.Generator {
	case "binary":
		body = make([]byte, m.BodyLength)
		for i := range body {
			body[i] = byte(i*31 + 7)
		}
		kind = BodyBinary
	case "text":
		body, kind = []byte(vecText(m.BodyLength)), BodyString
	case "json-object-s":
		body, kind = []byte(`{"s":"`+vecText(m.BodyLength-8)+`"}`), BodyJSON
	case "json-number-7":
		body, kind = []byte("7"), BodyJSON
	default:
		t.Fatalf("unknown generator %q", m.Generator)
	}
	if got := vecSHA256(body); got != m.BodySHA256 {
		t.Fatalf("%s body of %d bytes: sha256 %s, vectors %s", m.Generator, m.BodyLength, got, m.BodySHA256)
	}
	return body, kind
}

func vecMeta(m vecMessage) []byte {
	if m.MetadataJSON == "" {
		return nil
	}
	return []byte(m.MetadataJSON)
}

func TestVectorsRoomPassword(t *testing.T) {
	v := vectors(t)
	if v.RoomPasswords[0].Passphrase != "test" || v.RoomPasswords[0].Password != "1bhxaay1cs5qlh" {
		t.Fatalf("first vector is %+v, want test -> 1bhxaay1cs5qlh", v.RoomPasswords[0])
	}
	for _, c := range v.RoomPasswords {
		if got := RoomPassword(c.Passphrase); got != c.Password {
			t.Errorf("RoomPassword(%.40q) = %q, trystero/octagonal-wheels %q", c.Passphrase, got, c.Password)
		}
	}
}

func TestVectorsTopics(t *testing.T) {
	v := vectors(t)
	for _, c := range v.SHA1B36 {
		if got := SHA1B36(c.Input); got != c.Output {
			t.Errorf("SHA1B36(%.40q) = %q, want %q", c.Input, got, c.Output)
		}
	}
	for _, c := range v.Topics {
		if got := rootPlain(c.AppID, c.RoomID); got != c.RootTopicPlain {
			t.Errorf("rootPlain(%q, %q) = %q, want %q", c.AppID, c.RoomID, got, c.RootTopicPlain)
		}
		if got := RootTopic(c.AppID, c.RoomID); got != c.RootTopic {
			t.Errorf("RootTopic(%q, %q) = %q, want %q", c.AppID, c.RoomID, got, c.RootTopic)
		}
		if got := SelfTopic(c.AppID, c.RoomID, c.SelfID); got != c.SelfTopic {
			t.Errorf("SelfTopic(%q, %q, %q) = %q, want %q", c.AppID, c.RoomID, c.SelfID, got, c.SelfTopic)
		}
		if got := TopicKind(c.RootTopic); got != c.RootKind {
			t.Errorf("TopicKind(root %q) = %d, want %d", c.RootTopic, got, c.RootKind)
		}
		if got := TopicKind(c.SelfTopic); got != c.SelfKind {
			t.Errorf("TopicKind(self %q) = %d, want %d", c.SelfTopic, got, c.SelfKind)
		}
		if got := RoomToken(c.AppID, c.RoomID); got != c.RoomToken {
			t.Errorf("RoomToken(%q, %q) = %q, want %q", c.AppID, c.RoomID, got, c.RoomToken)
		}
	}
}

func TestVectorsIDs(t *testing.T) {
	v := vectors(t)
	if idAlphabet != v.IDs.Alphabet {
		t.Errorf("id alphabet %q, trystero's genId %q", idAlphabet, v.IDs.Alphabet)
	}
	if SelfIDLen != v.IDs.SelfIDLength || OfferIDLen != v.IDs.OfferIDLength || ChallengeLen != v.IDs.ChallengeLength {
		t.Errorf("lengths %d/%d/%d, trystero %d/%d/%d", SelfIDLen, OfferIDLen, ChallengeLen,
			v.IDs.SelfIDLength, v.IDs.OfferIDLength, v.IDs.ChallengeLength)
	}
	inAlphabet := func(s string) bool {
		return strings.Trim(s, v.IDs.Alphabet) == ""
	}
	if len(v.IDs.SelfID) != SelfIDLen || !inAlphabet(v.IDs.SelfID) {
		t.Errorf("trystero's own selfId %q does not fit the rules", v.IDs.SelfID)
	}
	seen := map[byte]bool{}
	for range 50 {
		id, offer := NewSelfID(nil), NewOfferID(nil)
		if len(id) != v.IDs.SelfIDLength || !inAlphabet(id) {
			t.Fatalf("NewSelfID = %q", id)
		}
		if len(offer) != v.IDs.OfferIDLength || !inAlphabet(offer) {
			t.Fatalf("NewOfferID = %q", offer)
		}
		for i := range len(id) {
			seen[id[i]] = true
		}
	}
	if len(seen) < 55 { // 1000 draws from 62 letters miss one with p < 1e-6
		t.Errorf("1000 id characters used only %d of 62 letters", len(seen))
	}
	for _, c := range v.LeaderPairs {
		if got := IsLeader(c.Self, c.Other); got != c.SelfLeads {
			t.Errorf("IsLeader(%q, %q) = %v, JavaScript < says %v", c.Self, c.Other, got, c.SelfLeads)
		}
	}
}

func TestVectorsSDP(t *testing.T) {
	v := vectors(t)
	for _, c := range v.SDP {
		key := SDPKey(c.Password, c.AppID, c.RoomID)
		if got := hex.EncodeToString(key); got != c.KeyHex {
			t.Errorf("SDPKey(%q, %q) = %s, want %s", c.AppID, c.RoomID, got, c.KeyHex)
		}
		plain, err := OpenSDP(key, c.Sealed)
		if err != nil || plain != c.Plain {
			t.Errorf("OpenSDP(trystero's %.30q) = %.30q, %v; want %.30q", c.Sealed, plain, err, c.Plain)
		}
		sealed, err := SealSDP(key, c.Plain, bytes.NewReader(vecHex(t, c.IVHex)))
		if err != nil || sealed != c.Sealed {
			t.Errorf("SealSDP with trystero's IV = %q, %v; want %q", sealed, err, c.Sealed)
		}
		wrong := SDPKey(c.Password+"x", c.AppID, c.RoomID)
		if _, err := OpenSDP(wrong, c.Sealed); !errors.Is(err, ErrIncorrectPassword) {
			t.Errorf("OpenSDP with another password: %v, want ErrIncorrectPassword", err)
		}
	}
}

func TestVectorsFrames(t *testing.T) {
	v := vectors(t)
	for _, c := range v.PresenceFrames {
		if got := hex.EncodeToString(PresenceFrame(c.RoomToken, c.Present)); got != c.Hex {
			t.Errorf("PresenceFrame(%v) = %s, trystero %s", c.Present, got, c.Hex)
		}
	}
	rf := v.RoomFrame
	if got := hex.EncodeToString(RoomFrame(rf.RoomToken, vecHex(t, rf.PayloadHex))); got != rf.Hex {
		t.Errorf("RoomFrame = %s, trystero %s", got, rf.Hex)
	}
	for _, c := range v.FrameParsing {
		f, err := ParseFrame(vecHex(t, c.Hex))
		want := c.Result
		switch {
		case want == nil:
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("%s: ParseFrame = %+v, %v; trystero ignores it", c.Name, f, err)
			}
		case err != nil:
			t.Errorf("%s: ParseFrame: %v; trystero reads %+v", c.Name, err, *want)
		case want.Type == "room":
			if f.Kind != FrameRoom || f.RoomToken != want.RoomToken || hex.EncodeToString(f.Payload) != want.PayloadHex {
				t.Errorf("%s: ParseFrame = %+v; trystero reads %+v", c.Name, f, *want)
			}
		case want.Type == "presence":
			if f.Kind != FramePresence || f.RoomToken != want.RoomToken || f.Present != want.IsPresent {
				t.Errorf("%s: ParseFrame = %+v; trystero reads %+v", c.Name, f, *want)
			}
		}
	}
	for _, c := range v.TextDecoding {
		if got := decodeText(vecHex(t, c.Hex)); got != c.Text {
			t.Errorf("decodeText(%s) = %+q, TextDecoder %+q", c.Hex, got, c.Text)
		}
	}
}

// TestVectorsActionFrames rebuilds every message trystero sent, splits it
// and wraps the frames for the room, and compares them byte for byte; then
// parses them back and reassembles the message.
func TestVectorsActionFrames(t *testing.T) {
	v := vectors(t)
	token := RoomToken(DefaultAppID, "my-vault-group")
	var sender Sender
	for _, m := range v.ActionFrames {
		body, kind := vecBody(t, m)
		frames, err := sender.Split(m.Action, body, kind, vecMeta(m))
		if err != nil {
			t.Fatalf("Split(%s %d): %v", m.Kind, m.BodyLength, err)
		}
		if len(frames) != len(m.Frames) {
			t.Errorf("%s %d bytes: %d frames, trystero %d", m.Kind, m.BodyLength, len(frames), len(m.Frames))
			continue
		}
		r := NewReassembler(ReassemblerConfig{})
		for i, want := range m.Frames {
			wire := RoomFrame(token, frames[i])
			if len(wire) != want.FrameLength || hex.EncodeToString(frames[i][:ActionHeaderBytes]) != want.HeaderHex ||
				vecSHA256(wire) != want.FrameSHA256 || (want.Hex != "" && hex.EncodeToString(wire) != want.Hex) {
				t.Errorf("%s %d bytes frame %d: header %x (%d bytes), trystero %s (%d bytes)",
					m.Kind, m.BodyLength, i, frames[i][:ActionHeaderBytes], len(wire), want.HeaderHex, want.FrameLength)
				continue
			}
			f, err := ParseFrame(wire)
			if err != nil || f.Kind != FrameRoom || f.RoomToken != token {
				t.Fatalf("ParseFrame(own frame) = %+v, %v", f, err)
			}
			h, b := ParseAction(f.Payload)
			if h.Name != m.Action || h.Nonce != m.Nonce || len(b) != want.BodyLength {
				t.Errorf("ParseAction = %+v with %d bytes, want %s nonce %d, %d bytes", h, len(b), m.Action, m.Nonce, want.BodyLength)
			}
			msg, err := r.Add("peer", f.Payload)
			if err != nil {
				t.Fatalf("%s %d bytes: Reassembler.Add: %v", m.Kind, m.BodyLength, err)
			}
			if (msg != nil) != (i == len(m.Frames)-1) {
				t.Fatalf("%s %d bytes: message complete after frame %d of %d", m.Kind, m.BodyLength, i+1, len(m.Frames))
			}
			if msg != nil {
				vecCheckMessage(t, msg, m, body, kind)
			}
		}
	}
}

func vecCheckMessage(t *testing.T, msg *Message, m vecMessage, body []byte, kind BodyKind) {
	t.Helper()
	if msg.Action != m.Action || msg.Nonce != m.Nonce || msg.Binary != (kind == BodyBinary) || msg.JSON != (kind == BodyJSON) {
		t.Errorf("message %s/%d binary=%v json=%v, want %s/%d kind %s", msg.Action, msg.Nonce, msg.Binary, msg.JSON, m.Action, m.Nonce, m.Kind)
	}
	if !bytes.Equal(msg.Body, body) {
		t.Errorf("%s %d bytes: reassembled body differs (%d bytes)", m.Kind, m.BodyLength, len(msg.Body))
	}
	if string(msg.Metadata) != m.MetadataJSON {
		t.Errorf("%s %d bytes: metadata %q, want %q", m.Kind, m.BodyLength, msg.Metadata, m.MetadataJSON)
	}
}

func TestVectorsNonceWrap(t *testing.T) {
	v := vectors(t)
	var s Sender
	next := 0
	for i := 0; next < len(v.NonceWrap); i++ {
		frames, err := s.Split(ActionPing, nil, BodyString, nil)
		if err != nil {
			t.Fatal(err)
		}
		if w := v.NonceWrap[next]; w.SendIndex == i {
			if got := hex.EncodeToString(frames[0][:ActionHeaderBytes]); got != w.HeaderHex {
				t.Errorf("send %d: header %s, trystero %s", i, got, w.HeaderHex)
			}
			next++
		}
	}
}

// TestVectorsReassembly feeds trystero's frames of three messages,
// interleaved, to one Reassembler: each message completes at the same
// arrival as in trystero's receiver.
func TestVectorsReassembly(t *testing.T) {
	v := vectors(t)
	ra := v.Reassembly
	var sender Sender
	frames := make([][][]byte, len(ra.Messages))
	bodies := make([][]byte, len(ra.Messages))
	kinds := make([]BodyKind, len(ra.Messages))
	for i, m := range ra.Messages {
		bodies[i], kinds[i] = vecBody(t, m)
		f, err := sender.Split(m.Action, bodies[i], kinds[i], vecMeta(m))
		if err != nil {
			t.Fatal(err)
		}
		frames[i] = f
	}
	r := NewReassembler(ReassemblerConfig{})
	var got []int
	for i, a := range ra.Arrivals {
		f := frames[a.Message][a.Frame]
		if hex.EncodeToString(f[:ActionHeaderBytes]) != a.HeaderHex || vecSHA256(f) != a.FrameSHA256 {
			t.Fatalf("arrival %d: frame %x... differs from trystero's %s", i, f[:ActionHeaderBytes], a.HeaderHex)
		}
		msg, err := r.Add("peer", f)
		if err != nil {
			t.Fatalf("arrival %d: %v", i, err)
		}
		if msg == nil {
			continue
		}
		for j, m := range ra.Messages {
			if m.Action == msg.Action && m.Nonce == msg.Nonce {
				vecCheckMessage(t, msg, m, bodies[j], kinds[j])
				got = append(got, j, i)
			}
		}
	}
	var want []int
	for _, d := range ra.Delivered {
		want = append(want, d.Message, d.AfterArrival)
	}
	if !slices.Equal(got, want) {
		t.Errorf("delivered (message, arrival) %v, trystero %v", got, want)
	}
	if n := r.InFlight("peer"); n != 0 {
		t.Errorf("%d messages left in flight", n)
	}
}

// TestVectorsSignallingTopics checks the topics trystero's signal handler
// published to and opens the sealed parts of its messages.
func TestVectorsSignallingTopics(t *testing.T) {
	v := vectors(t)
	s := v.Signalling
	if RootTopic(s.AppID, s.RoomID) != s.RootTopic || SelfTopic(s.AppID, s.RoomID, s.SelfID) != s.SelfTopic {
		t.Fatalf("root/self topic of the signalling room differ")
	}
	key := SDPKey(s.Password, s.AppID, s.RoomID)
	opened := 0
	for _, m := range s.Messages {
		for _, sent := range m.Sent {
			if want := SelfTopic(s.AppID, s.RoomID, sent.ToSelfTopicOf); sent.Topic != want {
				t.Errorf("%s: sent to %q, SelfTopic of %s is %q", m.Name, sent.Topic, sent.ToSelfTopicOf, want)
			}
			var msg map[string]string
			if err := json.Unmarshal([]byte(sent.Content), &msg); err != nil {
				t.Fatalf("%s: %v", m.Name, err)
			}
			if msg["peerId"] != s.SelfID {
				t.Errorf("%s: peerId %q, want %q", m.Name, msg["peerId"], s.SelfID)
			}
			plains := map[string]string{"offer": s.Plains.Offer, "answer": s.Plains.Answer, "candidate": s.Plains.Candidate}
			for field, plain := range plains {
				if sealed, ok := msg[field]; ok {
					got, err := OpenSDP(key, sealed)
					if err != nil || got != plain {
						t.Errorf("%s: OpenSDP(%s) = %q, %v; want %q", m.Name, field, got, err, plain)
					}
					opened++
				}
			}
		}
	}
	if opened != 4 {
		t.Errorf("opened %d sealed offers/answers/candidates, want 4", opened)
	}
	if len(s.WrongPasswordError) != 1 || !strings.Contains(s.WrongPasswordError[0], "incorrect room password") {
		t.Errorf("trystero's wrong-password error %q", s.WrongPasswordError)
	}
}

// TestVectorsNostrEvents checks the kind and topic tag of events
// trystero's Nostr strategy built, and that their NIP-01 id is the
// SHA-256 of the serialised [0, pubkey, created_at, kind, tags, content].
func TestVectorsNostrEvents(t *testing.T) {
	v := vectors(t)
	for _, e := range v.NostrEvents {
		var ev struct {
			ID        string     `json:"id"`
			Pubkey    string     `json:"pubkey"`
			CreatedAt int64      `json:"created_at"`
			Kind      int        `json:"kind"`
			Tags      [][]string `json:"tags"`
			Content   string     `json:"content"`
		}
		if len(e.Message) != 2 || string(e.Message[0]) != `"EVENT"` {
			t.Fatalf("event message %s", e.Message)
		}
		if err := json.Unmarshal(e.Message[1], &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Kind != TopicKind(e.Topic) || len(ev.Tags) != 1 || len(ev.Tags[0]) != 2 || ev.Tags[0][0] != "x" || ev.Tags[0][1] != e.Topic || ev.Content != e.Content {
			t.Errorf("event %+v for topic %s (TopicKind %d)", ev, e.Topic, TopicKind(e.Topic))
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode([]any{0, ev.Pubkey, ev.CreatedAt, ev.Kind, ev.Tags, ev.Content}); err != nil {
			t.Fatal(err)
		}
		if got := vecSHA256(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))); got != ev.ID {
			t.Errorf("NIP-01 id %s, trystero %s", got, ev.ID)
		}
		vecCheckEvent(t, e.Raw)
	}
	var req []json.RawMessage
	var subID string
	var filter struct {
		Since int64    `json:"since"`
		X     []string `json:"#x"`
	}
	if json.Unmarshal([]byte(v.NostrSubscribe), &req) != nil || len(req) != 3 ||
		json.Unmarshal(req[1], &subID) != nil || json.Unmarshal(req[2], &filter) != nil {
		t.Fatalf("subscription %s", v.NostrSubscribe)
	}
	if got := string(NostrSubscribe(subID, filter.X, filter.Since)); got != v.NostrSubscribe {
		t.Errorf("NostrSubscribe = %s, trystero %s", got, v.NostrSubscribe)
	}
}

func TestVectorsHandshake(t *testing.T) {
	v := vectors(t)
	for _, c := range v.Handshakes {
		if got := HandshakeHash(c.Challenge, c.Password, c.AppID, c.RoomID); got != c.ResponseHash {
			t.Errorf("HandshakeHash(%q) = %s, trystero %s", c.Challenge, got, c.ResponseHash)
		}
		if got := string(HandshakeResponse(c.Challenge, c.Password, c.AppID, c.RoomID)); got != c.ResponseJSON {
			t.Errorf("HandshakeResponse = %s, trystero sends %s", got, c.ResponseJSON)
		}
		if err := VerifyHandshake([]byte(c.ResponseJSON), c.Challenge, c.Password, c.AppID, c.RoomID); err != nil {
			t.Errorf("VerifyHandshake(trystero's response): %v", err)
		}
		err := VerifyHandshake([]byte(c.ResponseJSON), c.Challenge, c.Password+"x", c.AppID, c.RoomID)
		if !errors.Is(err, ErrHandshake) || !errors.Is(err, ErrIncorrectPassword) {
			t.Errorf("VerifyHandshake with another password: %v", err)
		}
	}
	in := v.HandshakeInitiator
	c, err := ParseChallenge([]byte(in.ChallengeJSON))
	if err != nil || len(c) != ChallengeLen || strings.Trim(c, idAlphabet) != "" {
		t.Fatalf("ParseChallenge(trystero's %s) = %q, %v", in.ChallengeJSON, c, err)
	}
	msg, ours := HandshakeChallenge(nil)
	if want := strings.Replace(in.ChallengeJSON, c, ours, 1); string(msg) != want {
		t.Errorf("HandshakeChallenge = %s, trystero's form %s", msg, want)
	}
	if !strings.Contains(in.WrongResponseError, "incorrect password for overlapping room") ||
		!strings.Contains(ErrHandshake.Error(), "incorrect password for overlapping room") {
		t.Errorf("trystero's handshake error %q, ours %q", in.WrongResponseError, ErrHandshake)
	}
}

// TestVectorsSignalMessages decodes every signalling message trystero
// published or was fed and encodes it back to the same bytes; messages
// the answering side sent are encoded with Answering set.
func TestVectorsSignalMessages(t *testing.T) {
	v := vectors(t)
	for _, m := range v.Signalling.Messages {
		contents := []string{m.Received.Content}
		answering := []bool{false}
		for _, s := range m.Sent {
			contents = append(contents, s.Content)
			answering = append(answering, m.Role == "answerer")
		}
		for i, content := range contents {
			s, err := DecodeSignal([]byte(content))
			if err != nil {
				t.Errorf("%s: DecodeSignal(%s): %v", m.Name, content, err)
				continue
			}
			s.Answering = s.Answering || answering[i]
			if got := string(s.Encode()); got != content {
				t.Errorf("%s: Encode(DecodeSignal(x)) = %s, trystero %s", m.Name, got, content)
			}
		}
	}
	for _, e := range v.NostrEvents {
		s, err := DecodeSignal([]byte(e.Content))
		if err != nil || s.Type() != SignalAnnounce || string(s.Encode()) != e.Content {
			t.Errorf("announcement %s: %+v, %v", e.Content, s, err)
		}
	}
}

// TestVectorsConstants compares the timings and sizes with the constants
// in trystero's dist sources.
func TestVectorsConstants(t *testing.T) {
	v := vectors(t)
	ms := func(name string) time.Duration {
		f, ok := v.Constants[name].(float64)
		if !ok {
			t.Fatalf("constant %s missing", name)
		}
		return time.Duration(f) * time.Millisecond
	}
	num := func(name string) int { return int(ms(name) / time.Millisecond) }
	for _, c := range []struct {
		name string
		got  time.Duration
	}{
		{"core/strategy.mjs:announceIntervalMs", AnnounceInterval},
		{"core/strategy.mjs:sharedPeerIdleMsDefault", SharedPeerIdle},
		{"core/offer-pool.mjs:offerTtl", OfferTTL},
		{"core/signal-handler.mjs:offerPostAnswerTtlMs", OfferPostAnswerTTL},
		{"core/signal-handler.mjs:answeringTtlMs", AnsweringTTL},
		{"core/signal-handler.mjs:disconnectedPeerGraceMs", DisconnectedPeerGrace},
		{"core/room.mjs:defaultHandshakeTimeoutMs", DefaultHandshakeTimeout},
		{"core/room.mjs:leaveDelayMs (literal in leave)", LeaveDelay},
	} {
		if want := ms(c.name); c.got != want {
			t.Errorf("%s: ours %v, trystero %v", c.name, c.got, want)
		}
	}
	for _, c := range []struct {
		name string
		got  int
	}{
		{"core/action-wire.mjs:typeByteLimit", ActionNameBytes},
		{"core/action-wire.mjs:payloadIndex", ActionHeaderBytes},
		{"core/signal-handler.mjs:offerIdSize", OfferIDLen},
		{"nostr/index.mjs:maxTopicsPerSubscription", MaxTopicsPerSubscription},
	} {
		if want := num(c.name); c.got != want {
			t.Errorf("%s: ours %d, trystero %d", c.name, c.got, want)
		}
	}
	if ChunkBytes != 16*1024-num("core/action-wire.mjs:payloadIndex") {
		t.Errorf("ChunkBytes %d", ChunkBytes)
	}
	warm, _ := v.Constants["core/strategy.mjs:announceWarmupIntervalsMs"].([]any)
	delays := AnnounceDelays()
	if len(warm) != 3 || len(delays) != len(warm) {
		t.Fatalf("warm-up %v, ours %v", warm, delays)
	}
	for i, w := range warm {
		want := time.Duration(w.(float64)) * time.Millisecond
		if delays[i] != want || NextAnnounce(i) != want {
			t.Errorf("warm-up %d: ours %v / %v, trystero %v", i, delays[i], NextAnnounce(i), want)
		}
	}
	if NextAnnounce(len(warm)) != AnnounceInterval || NextAnnounce(100) != AnnounceInterval {
		t.Errorf("after the warm-up: %v", NextAnnounce(len(warm)))
	}
	if OfferPrune != AnnounceInterval*9/10 {
		t.Errorf("OfferPrune %v", OfferPrune)
	}
}

// vecSide plays one room of a transcript with PeerHandshake, a Sender and
// a Reassembler, collecting the data-channel frames it sends.
type vecSide struct {
	t     *testing.T
	token string
	hs    *PeerHandshake
	send  Sender
	recv  *Reassembler
	out   []string
	err   error
}

func (s *vecSide) emit(msgs []Outgoing) {
	for _, m := range msgs {
		frames, err := s.send.Split(m.Action, m.Body, m.Kind, nil)
		if err != nil {
			s.t.Fatal(err)
		}
		for _, f := range frames {
			s.out = append(s.out, hex.EncodeToString(RoomFrame(s.token, f)))
		}
	}
}

// receive takes one data-channel frame from the other room.
func (s *vecSide) receive(h string) {
	if s.err != nil {
		return // the room has dropped the peer
	}
	f, err := ParseFrame(vecHex(s.t, h))
	if err != nil || f.Kind != FrameRoom || f.RoomToken != s.token {
		s.t.Fatalf("ParseFrame(%s) = %+v, %v", h, f, err)
	}
	msg, err := s.recv.Add("peer", f.Payload)
	if err != nil || msg == nil {
		s.t.Fatalf("frame %s: message %v, %v", h, msg, err)
	}
	reply, err := s.hs.Receive(msg)
	if err != nil {
		s.err = err
		return
	}
	s.emit(reply)
}

// vecChallengeReader yields bytes from which NewID draws exactly the
// challenge c (each byte is the letter's index in the alphabet).
func vecChallengeReader(t *testing.T, c string) *bytes.Reader {
	b := make([]byte, 256)
	for i := range len(c) {
		k := strings.IndexByte(idAlphabet, c[i])
		if k < 0 {
			t.Fatalf("challenge %q has a letter outside the alphabet", c)
		}
		b[i] = byte(k)
	}
	return bytes.NewReader(b)
}

// TestVectorsTranscripts replays the handshake (and a first rpc2 message)
// between two trystero rooms and checks that PeerHandshake, Sender and
// Reassembler, playing either room, send exactly the frames trystero sent.
func TestVectorsTranscripts(t *testing.T) {
	v := vectors(t)
	for _, tr := range v.Transcripts {
		t.Run(tr.Name, func(t *testing.T) {
			token := RoomToken(tr.AppID, tr.RoomID)
			var fromA, fromB []string
			for _, f := range tr.Frames[:tr.HandshakeFrames] {
				if f.Dir == "A->B" {
					fromA = append(fromA, f.Hex)
				} else {
					fromB = append(fromB, f.Hex)
				}
			}
			// B, the responder: answers A's recorded frames.
			b := &vecSide{t: t, token: token, recv: NewReassembler(ReassemblerConfig{}),
				hs: NewPeerHandshake("zzzzzzzzzzzzzzzzzzzz", "00000000000000000000", tr.PasswordB, tr.AppID, tr.RoomID)}
			if b.hs.Initiator() {
				t.Fatal("B initiates")
			}
			b.emit(b.hs.Start(nil))
			for _, h := range fromA {
				b.receive(h)
			}
			if b.err != nil || !slices.Equal(b.out, fromB) {
				t.Errorf("B sent %v (%v), trystero %v", b.out, b.err, fromB)
			}
			// A, the initiator, with trystero's challenge: takes B's frames.
			a := &vecSide{t: t, token: token, recv: NewReassembler(ReassemblerConfig{}),
				hs: NewPeerHandshake("00000000000000000000", "zzzzzzzzzzzzzzzzzzzz", tr.PasswordA, tr.AppID, tr.RoomID)}
			first, _ := ParseFrame(vecHex(t, fromA[0]))
			_, body := ParseAction(first.Payload)
			c, err := ParseChallenge(body)
			if err != nil {
				t.Fatal(err)
			}
			a.emit(a.hs.Start(vecChallengeReader(t, c)))
			for _, h := range fromB {
				a.receive(h)
			}
			joined := slices.Contains(tr.Events, "A: peer joined")
			if joined != (a.err == nil) || joined != a.hs.Active() || joined != b.hs.Active() {
				t.Errorf("trystero events %q; ours: A error %v, A active %v, B active %v", tr.Events, a.err, a.hs.Active(), b.hs.Active())
			}
			if !joined && !errors.Is(a.err, ErrHandshake) {
				t.Errorf("A's error %v, want ErrHandshake", a.err)
			}
			vecAfterHandshake(t, tr, a, b, &fromA, &fromB)
			if !slices.Equal(a.out, fromA) {
				t.Errorf("A sent %v, trystero %v", a.out, fromA)
			}
			if !slices.Equal(b.out, fromB) {
				t.Errorf("B sent %v after the handshake, trystero %v", b.out, fromB)
			}
		})
	}
}

// TestVectorsLoneSurrogates: trystero sends a lone surrogate in a JSON body
// as a \udXXX escape and in a string body as U+FFFD; both cross the
// reassembler unchanged and our sender makes the same frames.
func TestVectorsLoneSurrogates(t *testing.T) {
	v := vectors(t)
	token := RoomToken(DefaultAppID, "my-vault-group")
	var sender Sender
	r := NewReassembler(ReassemblerConfig{})
	for i, c := range v.LoneSurrogates {
		kind := BodyString
		if c.Kind == "json" {
			kind = BodyJSON
			if !strings.Contains(c.BodyText, `\ud83d`) && !strings.Contains(c.BodyText, `\ude00`) {
				t.Fatalf("vector %d has no escaped lone surrogate: %s", i, c.BodyText)
			}
		}
		frames, err := sender.Split("lone", []byte(c.BodyText), kind, nil)
		if err != nil || len(frames) != 1 {
			t.Fatalf("Split: %d frames, %v", len(frames), err)
		}
		if got := hex.EncodeToString(RoomFrame(token, frames[0])); got != c.FrameHex {
			t.Errorf("vector %d: frame %s, trystero %s", i, got, c.FrameHex)
		}
		f, err := ParseFrame(vecHex(t, c.FrameHex))
		if err != nil {
			t.Fatal(err)
		}
		msg, err := r.Add("peer", f.Payload)
		if err != nil || msg == nil || msg.Text() != c.BodyText || msg.JSON != (kind == BodyJSON) {
			t.Errorf("vector %d: message %+v, %v; want %q", i, msg, err, c.BodyText)
		}
	}
}

// vecCheckEvent rebuilds a raw ["EVENT", {...}] message trystero sent with
// NostrEventID and NostrEventMessage (taking trystero's signature) and
// returns its topic and content.
func vecCheckEvent(t *testing.T, raw string) (topic, content string) {
	t.Helper()
	var msg []json.RawMessage
	var ev struct {
		ID        string     `json:"id"`
		Pubkey    string     `json:"pubkey"`
		CreatedAt int64      `json:"created_at"`
		Tags      [][]string `json:"tags"`
		Content   string     `json:"content"`
		Sig       string     `json:"sig"`
	}
	if json.Unmarshal([]byte(raw), &msg) != nil || len(msg) != 2 || json.Unmarshal(msg[1], &ev) != nil || len(ev.Tags) != 1 || len(ev.Tags[0]) != 2 {
		t.Fatalf("event %s", raw)
	}
	topic = ev.Tags[0][1]
	id := NostrEventID(ev.Pubkey, ev.CreatedAt, topic, ev.Content)
	if hex.EncodeToString(id[:]) != ev.ID {
		t.Errorf("NostrEventID = %x, trystero %s", id, ev.ID)
	}
	if got := string(NostrEventMessage(ev.Pubkey, ev.CreatedAt, topic, ev.Content, vecHex(t, ev.Sig))); got != raw {
		t.Errorf("NostrEventMessage = %s, trystero %s", got, raw)
	}
	return topic, ev.Content
}

// TestVectorsJoinRoom checks what trystero's Nostr joinRoom sent to a
// relay on a virtual clock: the REQ for the self and root topics, the
// announcements after the warm-up delays and then every interval, and the
// offer it published on the self topic of a peer with a higher id.
func TestVectorsJoinRoom(t *testing.T) {
	v := vectors(t)
	j := v.JoinRoom
	if RootTopic(j.AppID, j.RoomID) != j.RootTopic || SelfTopic(j.AppID, j.RoomID, j.SelfID) != j.SelfTopic {
		t.Fatal("topics of the joinRoom run differ")
	}
	var announcements []int64
	reqs, offers := 0, 0
	for _, m := range j.Sent {
		if strings.HasPrefix(m.Raw, `["REQ",`) {
			var req []json.RawMessage
			var subID string
			var filter struct {
				Since int64 `json:"since"`
			}
			if json.Unmarshal([]byte(m.Raw), &req) != nil || json.Unmarshal(req[1], &subID) != nil || json.Unmarshal(req[2], &filter) != nil {
				t.Fatalf("REQ %s", m.Raw)
			}
			if len(subID) != SubscriptionIDLen || strings.Trim(subID, idAlphabet) != "" {
				t.Errorf("subscription id %q", subID)
			}
			if got := string(NostrSubscribe(subID, []string{j.SelfTopic, j.RootTopic}, filter.Since)); got != m.Raw {
				t.Errorf("NostrSubscribe = %s, trystero %s", got, m.Raw)
			}
			reqs++
			continue
		}
		topic, content := vecCheckEvent(t, m.Raw)
		sig, err := DecodeSignal([]byte(content))
		if err != nil || sig.PeerID != j.SelfID {
			t.Fatalf("signal %s: %+v, %v", content, sig, err)
		}
		switch {
		case topic == j.RootTopic && sig.Type() == SignalAnnounce:
			announcements = append(announcements, m.AtMs)
		case topic == SelfTopic(j.AppID, j.RoomID, j.OtherPeerID) && sig.Type() == SignalOffer:
			if !IsLeader(j.SelfID, j.OtherPeerID) || len(sig.OfferID) != OfferIDLen {
				t.Errorf("offer %+v to %s", sig, j.OtherPeerID)
			}
			plain, err := OpenSDP(SDPKey(j.Password, j.AppID, j.RoomID), sig.Offer)
			if err != nil || plain != j.OfferPlain {
				t.Errorf("offer opens to %q, %v; want %q", plain, err, j.OfferPlain)
			}
			offers++
		default:
			t.Errorf("unexpected event on %s: %s", topic, content)
		}
	}
	if reqs != 1 || offers != 1 || len(announcements) < 6 || announcements[0] != 0 {
		t.Fatalf("%d REQs, %d offers, announcements at %v ms", reqs, offers, announcements)
	}
	for n := 1; n < len(announcements); n++ {
		if got := time.Duration(announcements[n]-announcements[n-1]) * time.Millisecond; got != NextAnnounce(n-1) {
			t.Errorf("announcement %d came %v after the previous one, NextAnnounce(%d) = %v", n, got, n-1, NextAnnounce(n-1))
		}
	}
	// The RTCPeerConnection configuration trystero builds from LiveSync's
	// options (one TURN server, the relay path): its default STUN servers,
	// then the TURN entry, and the transport policy; one channel "data".
	want := []string{`"stun:stun.l.google.com:19302"`, `"stun:stun1.l.google.com:19302"`, `"stun:stun2.l.google.com:19302"`,
		`"stun:stun.cloudflare.com:3478"`, `["turn:turn.invalid:3478"]`}
	rc := j.RTCConfiguration
	if len(rc.ICEServers) != len(want) || rc.ICETransportPolicy != "relay" || !slices.Equal(j.DataChannelLabels, []string{"data"}) {
		t.Fatalf("trystero's RTC configuration %+v, channels %q", rc, j.DataChannelLabels)
	}
	for i, s := range rc.ICEServers {
		var urls bytes.Buffer
		if err := json.Compact(&urls, s.URLs); err != nil || urls.String() != want[i] {
			t.Errorf("ICE server %d: trystero %s, want %s", i, s.URLs, want[i])
		}
	}
	if last := rc.ICEServers[len(want)-1]; last.Username != "user" || last.Credential != "secret" {
		t.Errorf("TURN entry %+v", last)
	}
}

// TestVectorsCandidate decodes the ICE candidate plaintext trystero seals
// and encodes it back to the same text.
func TestVectorsCandidate(t *testing.T) {
	v := vectors(t)
	plain := v.Signalling.Plains.Candidate
	c, err := DecodeCandidate(plain)
	if err != nil || c.Encode() != plain {
		t.Errorf("DecodeCandidate(%s) = %+v, %v; encodes to %s", plain, c, err, c.Encode())
	}
}

// vecAfterHandshake replays the frames after the handshake (A's rpc2
// message, A's @_ping and B's @_pong, A's @_leave): each side sends the
// same message with its own Sender, continuing its nonces, and the other
// side reassembles it.
func vecAfterHandshake(t *testing.T, tr vecTranscript, a, b *vecSide, fromA, fromB *[]string) {
	t.Helper()
	for _, f := range tr.Frames[tr.HandshakeFrames:] {
		from, to, want := a, b, fromA
		if f.Dir == "B->A" {
			from, to, want = b, a, fromB
		}
		fr, err := ParseFrame(vecHex(t, f.Hex))
		if err != nil {
			t.Fatal(err)
		}
		h, body := ParseAction(fr.Payload)
		kind := BodyString
		if h.Binary {
			kind = BodyBinary
		} else if h.JSON {
			kind = BodyJSON
		}
		if h.Name == "rpc2" && string(body) != tr.RPCMessageJSON {
			t.Errorf("rpc2 body %s, want %s", body, tr.RPCMessageJSON)
		}
		from.emit([]Outgoing{{Action: h.Name, Kind: kind, Body: body}})
		*want = append(*want, f.Hex)
		if ReceiveWhilePending(h.Name) != (h.Name == ActionLeave) {
			t.Errorf("ReceiveWhilePending(%s) = %v", h.Name, ReceiveWhilePending(h.Name))
		}
		msg, err := to.recv.Add("peer", fr.Payload)
		if err != nil || msg == nil || msg.Action != h.Name || !bytes.Equal(msg.Body, body) {
			t.Errorf("%s: received %+v, %v", h.Name, msg, err)
		}
	}
}

// TestVectorsSDPVariants opens sealed strings trystero did not write
// itself exactly as trystero's decrypt does: IV bytes through Number()
// and a Uint8Array, the ciphertext through atob, a third "$" part ignored.
func TestVectorsSDPVariants(t *testing.T) {
	v := vectors(t)
	sv := v.SDPOpenVariants
	key := SDPKey(sv.Password, sv.AppID, sv.RoomID)
	for _, c := range sv.Variants {
		plain, err := OpenSDP(key, c.Sealed)
		switch {
		case c.Opens && (err != nil || plain != c.Plain):
			t.Errorf("%s: OpenSDP(%q) = %q, %v; trystero opens it to %q", c.Name, c.Sealed, plain, err, c.Plain)
		case !c.Opens && !errors.Is(err, ErrIncorrectPassword):
			t.Errorf("%s: OpenSDP(%q) = %q, %v; trystero fails", c.Name, c.Sealed, plain, err)
		}
	}
}

// TestVectorsSignalDecoding: DecodeSignal accepts exactly the
// announcement-shaped messages trystero's signal handler acts on.
func TestVectorsSignalDecoding(t *testing.T) {
	v := vectors(t)
	for _, c := range v.Signalling.Decoding {
		s, err := DecodeSignal([]byte(c.Content))
		if (err == nil) != c.ActedOn {
			t.Errorf("DecodeSignal(%s) = %+v, %v; trystero acts on it: %v", c.Content, s, err, c.ActedOn)
		}
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeSignal(%s): %v, want ErrMalformed", c.Content, err)
		}
		if err == nil && s.Type() != SignalAnnounce {
			t.Errorf("DecodeSignal(%s).Type() = %v", c.Content, s.Type())
		}
	}
}

// TestVectorsReceiverEdgeCases feeds hand-made frames to a Reassembler:
// a frame that made trystero's receiver throw returns ErrMalformed, and
// the messages it delivered are the ones trystero delivered. (A message
// for the empty action name completes here, but trystero can never hand
// it to a handler, so it is left out.)
func TestVectorsReceiverEdgeCases(t *testing.T) {
	v := vectors(t)
	for _, c := range v.ReceiverEdgeCases {
		r := NewReassembler(ReassemblerConfig{})
		next := 0
		for i, h := range c.Frames {
			msg, err := r.Add("peer", vecHex(t, h))
			if (err != nil) != c.Threw[i] || (err != nil && !errors.Is(err, ErrMalformed)) {
				t.Errorf("%s: frame %d: %v; trystero threw: %v", c.Name, i, err, c.Threw[i])
			}
			if msg == nil || msg.Action == "" {
				continue
			}
			if next >= len(c.Delivered) || c.Delivered[next].AfterFrame != i {
				t.Errorf("%s: frame %d completed %+v; trystero delivered nothing then", c.Name, i, msg)
				continue
			}
			d := c.Delivered[next]
			next++
			kind := "text"
			if msg.Binary {
				kind = "binary"
			} else if msg.JSON {
				kind = "json"
			}
			body := msg.Text()
			if kind == "binary" {
				body = hex.EncodeToString(msg.Body)
			}
			if msg.Action != d.Action || kind != d.Kind || body != d.BodyText+d.BodyHex || string(msg.Metadata) != d.MetadataJSON {
				t.Errorf("%s: delivered %s %s %q meta %q; trystero %s %s %q meta %q", c.Name,
					msg.Action, kind, body, msg.Metadata, d.Action, d.Kind, d.BodyText+d.BodyHex, d.MetadataJSON)
			}
		}
		if next != len(c.Delivered) {
			t.Errorf("%s: delivered %d messages, trystero %d", c.Name, next, len(c.Delivered))
		}
	}
}
