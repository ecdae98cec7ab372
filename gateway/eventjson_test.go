package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/fixtures"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/signing"
)

// checkEventJSON fails unless appendEventData and eventJSON write what
// json.Marshal writes for d, and fail where it fails.
func checkEventJSON(t *testing.T, d *EventData) {
	t.Helper()
	want, werr := json.Marshal(d)
	got, gerr := appendEventData([]byte("prefix"), d)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("json.Marshal error %v, appendEventData error %v\n%#v", werr, gerr, d)
	}
	if werr != nil {
		return
	}
	if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) {
		t.Fatalf("appendEventData differs from json.Marshal\n got %s\nwant %s", got[min(len(got), len("prefix")):], want)
	}
	if got := eventJSON(d); !bytes.Equal(got, want) || cap(got) != len(got) {
		t.Fatalf("eventJSON differs from json.Marshal (or is not a slice of its own)\n got %s\nwant %s", got, want)
	}
	if got := mustJSON(*d); !bytes.Equal(got, want) {
		t.Fatalf("mustJSON differs from json.Marshal\n got %s\nwant %s", got, want)
	}
}

func TestEventJSONTable(t *testing.T) {
	deadline := time.Date(2026, 11, 28, 15, 4, 5, 123456789, time.FixedZone("", 5*3600+1800))
	hostile := "a<b>&c \"q\" \\ \x00\x01\x08\x0c\n\r\t\x1f\x7f é \u2028 \u2029 \xff \xe2\x80 \xed\xa0\x80 😀 \U0010ffff"
	env := &envelope.Envelope{
		From: "CLAUDE", To: "CHATGPT", Version: 1, User: "u", Session: "s", Thread: "t", Parent: "p",
		Message: "m", Context: "c", Intent: "REQUEST", LegacyIntent: "QUESTION",
		Fields: []envelope.Field{{Key: "x-k", Value: hostile}},
		Meta: []envelope.Meta{
			{Namespace: "nil-fields"},
			{Namespace: "empty-fields", Fields: []envelope.Field{}},
			{Namespace: "routing", Fields: []envelope.Field{{Key: "X-Priority", Value: "high"}, {Key: "<k>", Value: ""}}},
		},
		Body: hostile, Sig: "none", Complete: true, Line: 7, ResponseForm: true,
	}
	cases := []struct {
		name string
		d    EventData
	}{
		{"zero", EventData{}},
		{"only a bool", EventData{RequiresAck: true}},
		{"only provenance", EventData{Provenance: Provenance{Summarized: true}}},
		{"empty slices are omitted", EventData{To: []string{}, X: &XCrosstalk{Warnings: []string{}, Route: []string{}}}},
		{"nil envelope", EventData{Kind: "error", X: &XCrosstalk{Transport: "http"}}},
		{"empty strings in a slice", EventData{To: []string{"", hostile}}},
		{"minimal envelope", EventData{X: &XCrosstalk{Envelope: &envelope.Envelope{}}}},
		{"envelope with empty fields", EventData{X: &XCrosstalk{Envelope: &envelope.Envelope{Fields: []envelope.Field{}, Meta: []envelope.Meta{}}}}},
		{"message", EventData{
			Text: hostile, Format: "plain", Priority: "attention", To: []string{"@all", "bob"}, ReplyTo: "01J", ClientID: "msg:m",
			Obligation: &attention.Obligation{Blocks: attention.BlocksHalted, DefaultAction: hostile, Delegate: "d", Deadline: deadline, Ack: true},
			Protocol:   &Protocol{EventType: ProtocolHandoff, Subject: hostile, Summary: "s", NextAction: "n", Blocker: "b", RequestedAction: "r", Urgency: "u", RequiresAck: true},
			Provenance: Provenance{SrcGroupID: "g", SrcEventID: "e", Summarized: true},
			X: &XCrosstalk{
				Envelope: env, Raw: hostile, Transport: "http", Source: "127.0.0.1:1", Sender: "claude", Principal: "p",
				Verified: true, Verification: "verified", Pkid: "k", AssignedIDs: true, IdempotencyKey: "i",
				Warnings: []string{"w1", hostile}, Route: []string{"relay://a"},
			},
		}},
		{"every other member", EventData{
			ActorID: "a", EventID: "e", Emoji: "👍", Signal: "ack", Kind: "k", Title: "t", Message: "m",
			TargetActorID: "ta", RelatedEventID: "re", RequiresAck: true, NotifyEventID: "n", Disposition: "d",
			State: "delivered", ExpiresAt: "x", Note: hostile,
		}},
		{"obligation without deadline", EventData{Obligation: &attention.Obligation{}}},
		{"deadline in UTC with a monotonic reading", EventData{Obligation: &attention.Obligation{Deadline: time.Now()}}},
		{"deadline json.Marshal refuses", EventData{Obligation: &attention.Obligation{Deadline: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}},
		{"deadline before year 0", EventData{Obligation: &attention.Obligation{Deadline: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}}},
		{"digest", EventData{TargetActorID: "a", Digest: &Digest{
			Summary: attention.Summary{Agent: "a", Policy: attention.MustNotRespond, At: deadline, Count: 2,
				Entries: []attention.SummaryEntry{{Group: "g", Topic: hostile, Authors: []string{"x"}, EventIDs: nil, First: deadline}}},
			Since: 1, Through: 9, Until: deadline}}},
		{"digest json.Marshal refuses", EventData{Digest: &Digest{Until: time.Date(10001, 1, 1, 0, 0, 0, 0, time.UTC)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkEventJSON(t, &c.d) })
	}
}

// TestEventJSONFixtures encodes the event data of every envelope of the
// envelope and hostile vectors as the relay records it.
func TestEventJSONFixtures(t *testing.T) {
	n := 0
	err := fs.WalkDir(fixtures.FS, ".", func(path string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() || !strings.HasSuffix(path, ".txt") {
			return err
		}
		data, err := fs.ReadFile(fixtures.FS, path)
		if err != nil {
			return err
		}
		rd := envelope.NewBytesReader(data)
		for {
			env, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				continue
			}
			n++
			if raw := sourceText(env); raw != string(env.Source()) {
				t.Fatalf("%s: sourceText = %q, want %q", path, raw, env.Source())
			}
			d := EventData{Text: env.Body, To: []string{env.To}, X: &XCrosstalk{
				Envelope: env, Raw: sourceText(env), Transport: "http", Sender: env.From,
				Verification: "unsigned", Warnings: env.Warnings(),
			}}
			checkEventJSON(t, &d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if raw := sourceText(envelope.New("A", "B", envelope.IntentRequest, "composed")); raw != "" {
		t.Fatalf("sourceText of a composed envelope = %q, want empty", raw)
	}
	if n < 100 {
		t.Fatalf("only %d envelopes in the vectors", n)
	}
}

// TestEventJSONRandom compares with json.Marshal on EventData filled at
// random, every exported field of every type it holds (a field added
// later included); FuzzEventJSON does the same from the fuzzer's bytes.
func TestEventJSONRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 6))
	for range 3000 {
		var d EventData
		fillRandom(t, reflect.ValueOf(&d).Elem(), randChooser{r})
		checkEventJSON(t, &d)
	}
}

// addFillSeeds adds the seeds of a fuzz target that fills values with
// fillRandom from the fuzzer's bytes: none, every small choice, long runs
// of hostile string bytes, and eight random blocks from seed.
func addFillSeeds(f *testing.F, seed uint64) {
	f.Add([]byte{})
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"))
	f.Add(bytes.Repeat([]byte{1}, 300))
	f.Add(bytes.Repeat([]byte{2, 3, 0xff, 0xe2, 0x80, 0xa8, '<'}, 100))
	r := rand.New(rand.NewPCG(seed, seed+1))
	for range 8 {
		b := make([]byte, 600)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		f.Add(b)
	}
}

func FuzzEventJSON(f *testing.F) {
	addFillSeeds(f, 1)
	f.Fuzz(func(t *testing.T, data []byte) {
		var d EventData
		fillRandom(t, reflect.ValueOf(&d).Elem(), &byteChooser{data: data})
		checkEventJSON(t, &d)
	})
}

// chooser makes fillRandom's choices.
type chooser interface {
	// intn returns a number in [0, n).
	intn(n int) int
}

type randChooser struct{ r *rand.Rand }

func (c randChooser) intn(n int) int { return c.r.IntN(n) }

// byteChooser takes its choices from the fuzzer's bytes, 0 once they run
// out.
type byteChooser struct{ data []byte }

func (c *byteChooser) intn(n int) int {
	if len(c.data) == 0 {
		return 0
	}
	v := int(c.data[0])
	c.data = c.data[1:]
	if n > 256 && len(c.data) > 0 {
		v = v<<8 | int(c.data[0])
		c.data = c.data[1:]
	}
	return v % n
}

// jsonPieces are strings that encoding/json writes in special ways.
var jsonPieces = []string{
	"plain", "<", ">", "&", `"`, `\`, "\x00", "\x1f", "\x7f", "\b", "\f", "\n", "\r", "\t",
	"é", "\u2028", "\u2029", "\u2027", "\u202a", "\xff", "\xe2\x80", "\xe2\x80\xa8", "\xed\xa0\x80",
	"😀", "\U0010ffff", "\xf4\x90\x80\x80", "[[END]]", " ", "\uFFFD",
}

var timeType = reflect.TypeFor[time.Time]()

// fillRandom sets every exported field reachable from v.
func fillRandom(t *testing.T, v reflect.Value, c chooser) {
	if v.Type() == timeType {
		v.Set(reflect.ValueOf(randomTime(c)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(randomString(c))
	case reflect.Bool:
		v.SetBool(c.intn(2) == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		ints := []int64{0, 1, -1, 7, 1 << 40, -1 << 62}
		v.SetInt(ints[c.intn(len(ints))] + int64(c.intn(1000)))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(c.intn(1 << 16)))
	case reflect.Float32, reflect.Float64:
		floats := []float64{0, 1.5, -2, 1e21, 1e-7, 123456789}
		v.SetFloat(floats[c.intn(len(floats))])
	case reflect.Pointer:
		if c.intn(4) == 0 {
			return
		}
		p := reflect.New(v.Type().Elem())
		fillRandom(t, p.Elem(), c)
		v.Set(p)
	case reflect.Slice:
		n := c.intn(5)
		if n == 0 && c.intn(2) == 0 {
			return // nil
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fillRandom(t, s.Index(i), c)
		}
		v.Set(s)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillRandom(t, v.Field(i), c)
			}
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			t.Fatalf("fillRandom: map %s", v.Type())
		}
		n := c.intn(4)
		m := reflect.MakeMap(v.Type())
		for range n {
			k := reflect.New(v.Type().Key()).Elem()
			k.SetString(randomString(c))
			e := reflect.New(v.Type().Elem()).Elem()
			fillRandom(t, e, c)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	default:
		t.Fatalf("fillRandom: %s is a kind it cannot fill: teach it", v.Type())
	}
}

func randomString(c chooser) string {
	var b strings.Builder
	for range c.intn(4) {
		switch c.intn(3) {
		case 0:
			b.WriteString(jsonPieces[c.intn(len(jsonPieces))])
		default:
			for range c.intn(12) {
				b.WriteByte(byte(c.intn(256)))
			}
		}
	}
	return b.String()
}

func randomTime(c chooser) time.Time {
	if c.intn(3) == 0 {
		return time.Time{}
	}
	locs := []*time.Location{time.UTC, time.FixedZone("", -7*3600), time.FixedZone("X", 5*3600+1800), time.FixedZone("", 25*3600), time.FixedZone("", 61)}
	years := []int{1, 1969, 2026, 9999, 10000, -1, 0}
	return time.Date(years[c.intn(len(years))], time.Month(1+c.intn(12)), 1+c.intn(28), c.intn(24), c.intn(60), c.intn(60),
		[]int{0, 1, 123000000, 999999999}[c.intn(4)], locs[c.intn(len(locs))])
}

// benchEventData is the data of a message event as the relay records it
// for one of internal/bench's envelopes.
func benchEventData(b *testing.B) *EventData {
	key, err := signing.GenerateKey(signing.Ed25519, "bench-key")
	if err != nil {
		b.Fatal(err)
	}
	e := envelope.New("BENCH", "READER", envelope.IntentRequest, "Benchmark envelope 42.\nPlease review the attached change and answer with a short summary.")
	e.User, e.Context = "bench", "bench-3"
	text, err := signing.SignEnvelope(e, key, nil)
	if err != nil {
		b.Fatal(err)
	}
	env, err := envelope.Unmarshal(text)
	if err != nil {
		b.Fatal(err)
	}
	return &EventData{
		Text: env.Body, Format: "plain", Priority: "normal", To: []string{"reader"}, ClientID: "msg:" + env.Message,
		X: &XCrosstalk{
			Envelope: env, Raw: string(env.Source()), Transport: "http", Source: "127.0.0.1:40000", Sender: "bench",
			Verified: true, Verification: StatusVerified, Pkid: "bench-key", Warnings: env.Warnings(),
		},
	}
}

// BenchmarkEventJSON compares eventJSON with json.Marshal on a message
// event's data: go test -run '^$' -bench EventJSON -benchmem ./gateway
func BenchmarkEventJSON(b *testing.B) {
	d := benchEventData(b)
	want, _ := json.Marshal(d)
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(want)))
		for b.Loop() {
			if _, err := json.Marshal(d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("eventJSON", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(want)))
		for b.Loop() {
			eventJSON(d)
		}
	})
}
