package gateway

import (
	"bytes"
	"context"
	"encoding"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/fixtures"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
)

// checkDeliveryJSON fails unless AppendJSON writes what json.Marshal
// writes for d, after what b held, and fails where it fails.
func checkDeliveryJSON(t *testing.T, d *Delivery) {
	t.Helper()
	want, werr := json.Marshal(d)
	got, gerr := d.AppendJSON([]byte("prefix"))
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("json.Marshal error %v, AppendJSON error %v\n%#v", werr, gerr, d)
	}
	if werr != nil {
		if gerr.Error() != werr.Error() || string(got) != "prefix" {
			t.Fatalf("AppendJSON = %q, %v; want %q, %v", got, gerr, "prefix", werr)
		}
		// The frame's own failure, not only the fallback's: the two
		// must fail on the same values.
		if _, ferr := appendDelivery(nil, d); ferr == nil {
			t.Fatalf("appendDelivery succeeds where json.Marshal fails (%v)\n%#v", werr, d)
		}
		return
	}
	if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) {
		t.Fatalf("AppendJSON differs from json.Marshal\n got %s\nwant %s", got[min(len(got), len("prefix")):], want)
	}
	if frame, err := appendDelivery(nil, d); err != nil || !bytes.Equal(frame, want) {
		t.Fatalf("appendDelivery = %s, %v; want %s", frame, err, want)
	}
}

func TestDeliveryJSONTable(t *testing.T) {
	deadline := time.Date(2026, 11, 28, 15, 4, 5, 123456789, time.FixedZone("", 5*3600+1800))
	hostile := "a<b>&c \"q\" \\ \x00\x01\x08\x0c\n\r\t\x1f\x7f é \u2028 \u2029 \xff \xe2\x80 \xed\xa0\x80 😀 \U0010ffff"
	full := Delivery{
		Delivery: attention.Delivery{
			EventID: hostile, Seq: -1 << 62, Group: "g<1>", Thread: hostile, Agent: "claude",
			Directedness: attention.ToMe, Policy: attention.MustRespond, Reason: attention.ReasonDirectMessage,
			Injection: attention.Notify, Priority: "urgent",
			Knock: &attention.Knock{From: hostile, Where: "thread:t", Directedness: attention.ToMyRole, Policy: attention.AckOnly,
				Priority: "high", Topic: hostile, PullWith: "chat.read_thread"},
			ThreadContext: true, Deadline: deadline, Expired: true, IdempotencyKey: "e:claude",
		},
		Kind: "chat.message", From: hostile, To: []string{"", hostile, "@all"}, Intent: "REQUEST", Context: hostile,
		MessageID: "m&1", TS: "2026-11-28T10:00:00.000000001Z", Content: hostile, Verification: "verified",
		Acked:      true,
		Obligation: &attention.Obligation{Blocks: attention.BlocksHalted, DefaultAction: hostile, Delegate: "d", Deadline: deadline, Ack: true},
		Protocol:   &Protocol{EventType: ProtocolBlocked, Subject: hostile, Summary: "s", NextAction: "n", Blocker: "b", RequestedAction: "r", Urgency: "u", RequiresAck: true},
		Discharged: true, Discharges: "01J", Responded: true, ClaimedBy: hostile, Liveness: attention.Stale, Position: 1 << 40,
		Fragments: []Fragment{
			{},
			{EventID: "e1", Seq: 3, Position: -7, MessageID: hostile, TS: "t", Policy: attention.MayRespond, Content: hostile},
		},
		Digest: &Digest{
			Summary: attention.Summary{Agent: "a", Policy: attention.MustNotRespond, At: deadline, Count: 2,
				Entries: []attention.SummaryEntry{{Group: "g", Topic: hostile, Authors: []string{"x"}, EventIDs: nil, First: deadline}}},
			Since: 1, Through: 9, Until: deadline},
	}
	tooLate := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		d    Delivery
	}{
		{"zero", Delivery{}},
		{"progress marker", progress("g", 7, 9)},
		{"every member", full},
		{"only what is never omitted", Delivery{Delivery: attention.Delivery{EventID: "e", Agent: "a", Priority: "normal", IdempotencyKey: "e:a"}, Kind: "k", From: "f", TS: "t", Liveness: attention.Active}},
		{"empty slices are omitted", Delivery{To: []string{}, Fragments: []Fragment{}}},
		{"one empty string in to", Delivery{To: []string{""}}},
		{"zero pointers are written", Delivery{Delivery: attention.Delivery{Knock: &attention.Knock{}}, Obligation: &attention.Obligation{}, Protocol: &Protocol{}, Digest: &Digest{}}},
		{"only omitempty bools", Delivery{Delivery: attention.Delivery{ThreadContext: true, Expired: true}, Acked: true, Discharged: true, Responded: true}},
		{"negative position", Delivery{Position: -1}},
		{"deadline in UTC with a monotonic reading", Delivery{Delivery: attention.Delivery{Deadline: time.Now()}}},
		{"deadline at year 0", Delivery{Delivery: attention.Delivery{Deadline: time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)}}},
		{"deadline json.Marshal refuses", Delivery{Delivery: attention.Delivery{Deadline: tooLate}}},
		{"deadline before year 0", Delivery{Delivery: attention.Delivery{Deadline: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}}},
		{"deadline in a 25-hour zone", Delivery{Delivery: attention.Delivery{Deadline: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 25*3600))}}},
		{"obligation deadline json.Marshal refuses", Delivery{Obligation: &attention.Obligation{Deadline: tooLate}}},
		{"digest json.Marshal refuses", Delivery{Digest: &Digest{Until: tooLate}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkDeliveryJSON(t, &c.d) })
	}
	// Every piece of jsonPieces in every string member of a full delivery.
	for _, p := range jsonPieces {
		d := full
		setStrings(reflect.ValueOf(&d).Elem(), p+"x"+p)
		checkDeliveryJSON(t, &d)
	}
}

// setStrings sets every string reachable from v, through pointers that
// are set and slices, to s.
func setStrings(v reflect.Value, s string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Pointer:
		if !v.IsNil() {
			c := reflect.New(v.Type().Elem()) // a copy: full's own values stay
			c.Elem().Set(v.Elem())
			setStrings(c.Elem(), s)
			v.Set(c)
		}
	case reflect.Slice:
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(c, v)
		for i := range c.Len() {
			setStrings(c.Index(i), s)
		}
		if !v.IsNil() {
			v.Set(c)
		}
	case reflect.Struct:
		if v.Type() == timeType {
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				setStrings(v.Field(i), s)
			}
		}
	}
}

// TestDeliveryJSONRelay encodes what a relay delivers, to authors,
// addressees and bystanders, of the envelopes of the envelope vectors and
// of envelopes with deadlines, obligations and awkward bodies: deliveries
// as the streams meet them.
func TestDeliveryJSONRelay(t *testing.T) {
	ctx := context.Background()
	var texts []string
	var built strings.Builder
	for i, p := range jsonPieces {
		e := envelope.New("CHATGPT", "CLAUDE", envelope.IntentRequest, fmt.Sprintf("message %d %s", i, p))
		e.Context = fmt.Sprintf("ctx-%d", i%3)
		e.Meta = append(e.Meta, envelope.Meta{Namespace: "routing", Fields: []envelope.Field{{Key: "X-Deadline", Value: "30m"}, {Key: "X-Priority", Value: "high"}}})
		if i%2 == 0 {
			e.Meta = append(e.Meta, envelope.Meta{Namespace: "obligation", Fields: []envelope.Field{{Key: "Blocks", Value: "halted"}, {Key: "Deadline", Value: "2h"}}})
		}
		if m, err := envelope.Marshal(e); err == nil { // some bodies cannot be written
			built.Write(m)
		}
	}
	texts = append(texts, built.String())
	names, err := fixtures.Envelopes()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		in, _ := fixtures.FS.ReadFile("envelope/" + name + ".txt")
		if bytes.Count(in, []byte("\n")) <= 10000 { // size-limit vectors add nothing here
			texts = append(texts, string(in))
		}
	}
	// One relay for them all: a vector whose message ids another used is
	// refused, which leaves deliveries enough.
	r := New(memory.New(nil), nil)
	for _, text := range texts {
		if _, err := r.Ingest(ctx, Intake{Transport: "test", Data: strings.NewReader(text)}); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	// The addressee of the built envelopes, their author, two agents of
	// the vectors and one no envelope names: each sees every group.
	for _, agent := range []string{"CLAUDE", "CHATGPT", "A", "B", "other"} {
		ds, err := r.Deliveries(ctx, agent, "", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range ds {
			checkDeliveryJSON(t, &ds[i])
			n++
		}
	}
	if n < len(texts) {
		t.Fatalf("only %d deliveries of %d texts", n, len(texts))
	}
}

// TestDeliveryJSONRandom compares with json.Marshal on deliveries filled
// at random, every exported field of every type they hold (a field added
// later included); FuzzDeliveryJSON does the same from the fuzzer's
// bytes.
func TestDeliveryJSONRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 7))
	for range 3000 {
		var d Delivery
		fillRandom(t, reflect.ValueOf(&d).Elem(), randChooser{r})
		checkDeliveryJSON(t, &d)
	}
}

func FuzzDeliveryJSON(f *testing.F) {
	addFillSeeds(f, 3)
	f.Fuzz(func(t *testing.T, data []byte) {
		var d Delivery
		fillRandom(t, reflect.ValueOf(&d).Elem(), &byteChooser{data: data})
		checkDeliveryJSON(t, &d)
	})
}

// deliveryJSONFields is every field of every type appendDelivery writes
// member by member, as deliveryJSONShape lists them. A field added,
// removed, renamed, retyped or retagged changes the list: teach
// appendDelivery (deliveryjson.go) or the helpers it shares with
// eventjson.go, then update this list.
var deliveryJSONFields = []string{
	"gateway.Delivery.Delivery attention.Delivery",
	"gateway.Delivery.Kind string `json:\"kind\"`",
	"gateway.Delivery.From string `json:\"from\"`",
	"gateway.Delivery.To []string `json:\"to,omitempty\"`",
	"gateway.Delivery.Intent string `json:\"intent,omitempty\"`",
	"gateway.Delivery.Context string `json:\"context,omitempty\"`",
	"gateway.Delivery.MessageID string `json:\"message,omitempty\"`",
	"gateway.Delivery.TS string `json:\"ts\"`",
	"gateway.Delivery.Content string `json:\"content,omitempty\"`",
	"gateway.Delivery.Verification string `json:\"verification,omitempty\"`",
	"gateway.Delivery.Acked bool `json:\"acked,omitempty\"`",
	"gateway.Delivery.Obligation *attention.Obligation `json:\"obligation,omitempty\"`",
	"gateway.Delivery.Protocol *gateway.Protocol `json:\"protocol,omitempty\"`",
	"gateway.Delivery.Discharged bool `json:\"discharged,omitempty\"`",
	"gateway.Delivery.Discharges string `json:\"discharges,omitempty\"`",
	"gateway.Delivery.Responded bool `json:\"responded,omitempty\"`",
	"gateway.Delivery.ClaimedBy string `json:\"claimed_by,omitempty\"`",
	"gateway.Delivery.Liveness attention.Liveness `json:\"liveness\"`",
	"gateway.Delivery.Position int64 `json:\"position,omitempty\"`",
	"gateway.Delivery.Fragments []gateway.Fragment `json:\"fragments,omitempty\"`",
	"gateway.Delivery.Digest *gateway.Digest `json:\"digest,omitempty\"`",
	"attention.Delivery.EventID string `json:\"event_id\"`",
	"attention.Delivery.Seq int64 `json:\"seq\"`",
	"attention.Delivery.Group string `json:\"group,omitempty\"`",
	"attention.Delivery.Thread string `json:\"thread,omitempty\"`",
	"attention.Delivery.Agent string `json:\"agent\"`",
	"attention.Delivery.Directedness attention.Directedness `json:\"directedness\"`",
	"attention.Delivery.Policy attention.Policy `json:\"policy\"`",
	"attention.Delivery.Reason attention.Reason `json:\"reason\"`",
	"attention.Delivery.Injection attention.Injection `json:\"injection\"`",
	"attention.Delivery.Priority string `json:\"priority\"`",
	"attention.Delivery.Knock *attention.Knock `json:\"knock,omitempty\"`",
	"attention.Delivery.ThreadContext bool `json:\"thread_context,omitempty\"`",
	"attention.Delivery.Deadline time.Time `json:\"deadline,omitzero\"`",
	"attention.Delivery.Expired bool `json:\"expired,omitempty\"`",
	"attention.Delivery.IdempotencyKey string `json:\"idempotency_key\"`",
	"attention.Obligation.Blocks attention.Blocks `json:\"blocks\"`",
	"attention.Obligation.DefaultAction string `json:\"default_action,omitempty\"`",
	"attention.Obligation.Delegate string `json:\"delegate,omitempty\"`",
	"attention.Obligation.Deadline time.Time `json:\"deadline,omitzero\"`",
	"attention.Obligation.Ack bool `json:\"ack,omitempty\"`",
	"gateway.Protocol.EventType string `json:\"event_type\"`",
	"gateway.Protocol.Subject string `json:\"subject\"`",
	"gateway.Protocol.Summary string `json:\"summary,omitempty\"`",
	"gateway.Protocol.NextAction string `json:\"next_action,omitempty\"`",
	"gateway.Protocol.Blocker string `json:\"blocker,omitempty\"`",
	"gateway.Protocol.RequestedAction string `json:\"requested_action,omitempty\"`",
	"gateway.Protocol.Urgency string `json:\"urgency,omitempty\"`",
	"gateway.Protocol.RequiresAck bool `json:\"requires_ack\"`",
	"gateway.Fragment.EventID string `json:\"event_id\"`",
	"gateway.Fragment.Seq int64 `json:\"seq\"`",
	"gateway.Fragment.Position int64 `json:\"position,omitempty\"`",
	"gateway.Fragment.MessageID string `json:\"message,omitempty\"`",
	"gateway.Fragment.TS string `json:\"ts\"`",
	"gateway.Fragment.Policy attention.Policy `json:\"policy\"`",
	"gateway.Fragment.Content string `json:\"content,omitempty\"`",
	"attention.Knock.From string `json:\"from\"`",
	"attention.Knock.Where string `json:\"where\"`",
	"attention.Knock.Directedness attention.Directedness `json:\"directedness\"`",
	"attention.Knock.Policy attention.Policy `json:\"policy\"`",
	"attention.Knock.Priority string `json:\"priority\"`",
	"attention.Knock.Topic string `json:\"topic\"`",
	"attention.Knock.PullWith string `json:\"pull_with\"`",
}

// deliveryJSONShape lists, in order, every field (exported or not) of
// every struct type appendDelivery writes by hand, reached from Delivery
// through fields, pointers and slices, each type's fields together, types
// in the order first reached; Digest (json.Marshal's) and
// time.Time (its MarshalJSON) are left out. It fails t for a type on the
// way that implements json.Marshaler or encoding.TextMarshaler, which
// encoding/json would call instead of writing its fields or string.
func deliveryJSONShape(t *testing.T) []string {
	var out []string
	seen := map[reflect.Type]bool{}
	marshaler := reflect.TypeFor[json.Marshaler]()
	textMarshaler := reflect.TypeFor[encoding.TextMarshaler]()
	queue := []reflect.Type{reflect.TypeFor[Delivery]()} // types in the order first reached
	for len(queue) > 0 {
		ty := queue[0]
		queue = queue[1:]
		if ty == timeType || ty == reflect.TypeFor[Digest]() || seen[ty] {
			continue
		}
		seen[ty] = true
		for _, m := range []reflect.Type{ty, reflect.PointerTo(ty)} {
			if m.Implements(marshaler) || m.Implements(textMarshaler) {
				t.Errorf("%s has a MarshalJSON or MarshalText method: appendDelivery must call it", m)
			}
		}
		switch ty.Kind() {
		case reflect.Pointer, reflect.Slice:
			queue = append(queue, ty.Elem())
		case reflect.Struct:
			for i := range ty.NumField() {
				f := ty.Field(i)
				line := fmt.Sprintf("%s.%s %s", ty, f.Name, f.Type)
				if f.Tag != "" {
					line += " `" + string(f.Tag) + "`"
				}
				out = append(out, line)
				queue = append(queue, f.Type)
			}
		case reflect.String, reflect.Bool, reflect.Int64:
		default:
			t.Errorf("%s: a kind appendDelivery does not write", ty)
		}
	}
	return out
}

// TestDeliveryJSONKnowsEveryField fails when a type AppendJSON writes by
// hand gains, loses, renames, retypes or retags a field, or gains a
// marshalling method: the random tests would notice most such changes,
// this names them.
func TestDeliveryJSONKnowsEveryField(t *testing.T) {
	got := deliveryJSONShape(t)
	if !slices.Equal(got, deliveryJSONFields) {
		for _, f := range got {
			if !slices.Contains(deliveryJSONFields, f) {
				t.Errorf("field appendDelivery does not know: %s", f)
			}
		}
		for _, f := range deliveryJSONFields {
			if !slices.Contains(got, f) {
				t.Errorf("field appendDelivery writes that is gone: %s", f)
			}
		}
		t.Fatalf("the fields of the types appendDelivery writes changed (or their order); teach deliveryjson.go, then update deliveryJSONFields:\n%s", strings.Join(got, "\n"))
	}
}

// benchDelivery is a message delivery as a stream meets it: one of
// internal/bench's envelopes (benchEventData) recorded by a relay and
// decided for its addressee.
func benchDelivery(b *testing.B) *Delivery {
	ctx := context.Background()
	r := New(memory.New(nil), nil)
	env := benchEventData(b).X.Envelope
	m, err := envelope.Marshal(env)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := r.Ingest(ctx, Intake{Transport: "http", Data: bytes.NewReader(m)}); err != nil {
		b.Fatal(err)
	}
	ds, err := r.Deliveries(ctx, "reader", "", 0, 0)
	if err != nil || len(ds) != 1 || ds[0].Content == "" {
		b.Fatalf("deliveries %+v, %v", ds, err)
	}
	return &ds[0]
}

// BenchmarkDeliveryJSON compares AppendJSON, into a buffer a stream
// keeps, with json.Marshal on a message delivery, in turns (blocks of 32
// calls each) so that load from other processes weighs on both alike,
// and reports both times and hand/json as "ratio":
// go test -run '^$' -bench DeliveryJSON -benchtime 300ms ./gateway
func BenchmarkDeliveryJSON(b *testing.B) {
	const block = 32
	d := benchDelivery(b)
	want, _ := json.Marshal(d)
	var buf []byte
	var handNS, jsonNS time.Duration
	n := 0
	for b.Loop() {
		t0 := time.Now()
		for range block {
			var err error
			if buf, err = d.AppendJSON(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		for range block {
			if _, err := json.Marshal(d); err != nil {
				b.Fatal(err)
			}
		}
		handNS += t1.Sub(t0)
		jsonNS += time.Since(t1)
		n += block
	}
	if !bytes.Equal(buf, want) {
		b.Fatalf("AppendJSON = %s\nwant %s", buf, want)
	}
	b.ReportMetric(float64(handNS.Nanoseconds())/float64(n), "hand-ns")
	b.ReportMetric(float64(jsonNS.Nanoseconds())/float64(n), "json-ns")
	b.ReportMetric(float64(handNS)/float64(jsonNS), "ratio")
}
