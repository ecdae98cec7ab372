package gateway_test

import (
	"bytes"
	"io/fs"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/fixtures"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"golang.org/x/text/unicode/norm"
)

// FuzzIngest sends arbitrary intake through a relay, as every transport
// does with what it receives: Ingest never panics or fails on a healthy
// store, every outcome is in the ledger as a valid event (a system.notify
// with a code when rejected, the envelope parsed when accepted), the receipt
// or ERROR envelope the transport answers with can be written and read
// back, and sending the same bytes again records nothing new. Seeded from
// the envelope vectors and the bodies of the hostile-input corpus.
func FuzzIngest(f *testing.F) {
	names, err := fixtures.Envelopes()
	if err != nil {
		f.Fatal(err)
	}
	for _, n := range names {
		b, err := fixtures.FS.ReadFile("envelope/" + n + ".txt")
		if err != nil {
			f.Fatal(err)
		}
		if len(b) < 64<<10 {
			f.Add(b)
		}
	}
	hostile, err := fs.Glob(fixtures.HostileFS, "hostile/*.txt")
	if err != nil || len(hostile) == 0 {
		f.Fatalf("no hostile fixtures: %v", err)
	}
	for _, p := range hostile {
		b, err := fs.ReadFile(fixtures.HostileFS, p)
		if err != nil {
			f.Fatal(err)
		}
		if _, body, ok := bytes.Cut(b, []byte("\n\n")); ok {
			f.Add(body)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ctx := t.Context()
		st := memory.New(nil)
		defer st.Close()
		r := gateway.New(st, nil)
		outs, err := r.Ingest(ctx, gateway.Intake{Transport: "fuzz", Data: bytes.NewReader(in)})
		if err != nil || len(outs) == 0 {
			t.Fatalf("Ingest(%q) = %d outcomes, %v", in, len(outs), err)
		}
		accepted := map[string]bool{}
		for i, o := range outs {
			if err := o.Event.Validate(); err != nil {
				t.Fatalf("Ingest(%q) #%d: event %+v: %v", in, i, o.Event, err)
			}
			if _, err := gateway.ParseData(o.Event); err != nil {
				t.Fatalf("Ingest(%q) #%d: data %s: %v", in, i, o.Event.Data, err)
			}
			if o.Reject != nil {
				if o.Reject.Code == "" || o.Event.Kind != gateway.KindNotify {
					t.Fatalf("Ingest(%q) #%d: rejection %+v recorded as %s", in, i, o.Reject, o.Event.Kind)
				}
			} else {
				if o.Envelope == nil {
					t.Fatalf("Ingest(%q) #%d: accepted as %s without an envelope", in, i, o.Event.Kind)
				}
				accepted[o.Event.ID] = true
			}
			rc := r.Receipt(o)
			b, err := envelope.Marshal(rc)
			if err != nil {
				t.Fatalf("Ingest(%q) #%d: Marshal(Receipt(%+v)) = %v", in, i, rc, err)
			}
			// Lenient, as the sender's tools read it: the receipt answers
			// the sender's address, which the relay need not find valid.
			if back, err := envelope.NewReader(bytes.NewReader(b)).Next(); err != nil || back.To != rc.To || back.Body != rc.Body {
				t.Fatalf("Ingest(%q) #%d: receipt %q reads back as %v, %v", in, i, b, back, err)
			}
		}
		again, err := r.Ingest(ctx, gateway.Intake{Transport: "fuzz", Data: bytes.NewReader(in)})
		if err != nil || len(again) != len(outs) {
			t.Fatalf("Ingest(%q) again = %d outcomes, %v; want %d", in, len(again), err, len(outs))
		}
		for i, o := range again {
			if accepted[outs[i].Event.ID] && (o.Reject != nil || !o.Duplicate || o.Event.ID != outs[i].Event.ID) {
				t.Fatalf("Ingest(%q) again #%d = %+v, %v; want a duplicate of %s", in, i, o.Reject, o.Duplicate, outs[i].Event.ID)
			}
		}
	})
}

// FuzzIngestIdentifiers sends id-less envelopes (v1.0 style) whose sender,
// receiver and context are arbitrary text — NFD, bidi controls,
// zero-width characters — then the same text in NFD. Accepted envelopes
// are recorded with identifiers in NFC and nothing invisible in them; a
// refusal for an identifier is E-ADDRESS with its line; and the NFD
// re-paste is the same envelope (a duplicate of the same event), never a
// new actor, group or a "squatting" refusal.
func FuzzIngestIdentifiers(f *testing.F) {
	f.Add("CAFE\u0301", "GEMINI", "cafe\u0301", "e\u0301")
	f.Add("CAF\u00c9", "CAF\u00c9", "caf\u00e9", "plain")
	f.Add("CLA\u202eUDE", "GEMINI", "proj", "x")
	f.Add("CLAUDE", "GEM\u200bINI", "pro\u200bj", "x")
	f.Add("CLAUDE", "GEMINI", "a\x00b", "x")
	f.Add("A\u0301\u0327", "@all", "Å", "\u212b")
	f.Fuzz(func(t *testing.T, from, to, context, body string) {
		text := "[[" + from + "→" + to + " v1]]\nintent: REQUEST\ncontext: " + context + "\n\nbody: |\n  " + body + "\n[[END]]\n"
		st := memory.New(nil)
		defer st.Close()
		r := gateway.New(st, nil)
		outs, err := r.Ingest(t.Context(), gateway.Intake{Transport: "fuzz", Data: strings.NewReader(text)})
		if err != nil {
			t.Fatalf("Ingest(%+q) = %v", text, err)
		}
		first := map[int]string{}
		for i, o := range outs {
			if o.Reject != nil {
				if o.Reject.Code == envelope.CodeAddress && o.Reject.Line <= 0 {
					t.Errorf("Ingest(%+q) #%d: E-ADDRESS without a line", text, i)
				}
				continue
			}
			d, err := gateway.ParseData(o.Event)
			if err != nil || d.X == nil {
				t.Fatalf("Ingest(%+q) #%d: data %v", text, i, err)
			}
			for _, id := range []string{o.Event.By, o.Event.GroupID, d.X.Sender, d.X.Envelope.From, d.X.Envelope.To, d.X.Envelope.Context} {
				if n, err := envelope.NormalizeIdentifier(id); err != nil || n != id {
					t.Errorf("Ingest(%+q) #%d: identifier %+q recorded, not NFC and visible (%v)", text, i, id, err)
				}
			}
			first[i] = o.Event.ID
		}
		again, err := r.Ingest(t.Context(), gateway.Intake{Transport: "fuzz", Data: strings.NewReader(norm.NFD.String(text))})
		if err != nil {
			t.Fatalf("Ingest(NFD %+q) = %v", text, err)
		}
		for i, id := range first {
			if i >= len(again) {
				t.Fatalf("Ingest(NFD %+q) = %d outcomes, want at least %d", text, len(again), i+1)
			}
			if o := again[i]; o.Reject != nil || !o.Duplicate || o.Event.ID != id {
				t.Errorf("Ingest(NFD %+q) #%d = %v duplicate=%v event %s; want a duplicate of %s", text, i, o.Reject, o.Duplicate, o.Event.ID, id)
			}
		}
	})
}
