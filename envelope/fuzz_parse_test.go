package envelope_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/fixtures"
)

// fixtureEnvelopes returns the expected envelopes of fixtures/envelope
// (every object of every NAME.jsonl that is not an error) and the vector
// inputs; it fails the fuzz target when there are none.
func fixtureEnvelopes(f *testing.F) (envs []map[string]any, inputs [][]byte) {
	f.Helper()
	names, err := fixtures.Envelopes()
	if err != nil || len(names) == 0 {
		f.Fatalf("no fuzz seeds: fixtures.Envelopes() = %d names, %v", len(names), err)
	}
	for _, n := range names {
		in, err := fixtures.FS.ReadFile("envelope/" + n + ".txt")
		if err != nil {
			f.Fatal(err)
		}
		inputs = append(inputs, in)
		data, err := fixtures.FS.ReadFile("envelope/" + n + ".jsonl")
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range bytes.Split(data, []byte("\n")) {
			var m map[string]any
			if json.Unmarshal(l, &m) == nil && m["error"] == nil {
				envs = append(envs, m)
			}
		}
	}
	return envs, inputs
}

// FuzzParseAddress checks ParseAddress: it never panics, errors start with
// "envelope: ", an accepted address is classified with a target taken from
// it, and — the property the header grammar needs — an accepted address
// written as the sender and as the receiver of an envelope reads back
// unchanged in strict mode.
func FuzzParseAddress(f *testing.F) {
	envs, _ := fixtureEnvelopes(f)
	for _, m := range envs {
		for _, k := range []string{"from", "to"} {
			if s, ok := m[k].(string); ok {
				f.Add(s)
			}
		}
	}
	for _, s := range []string{"*", "@all", "email:a@b.org?subject=x", "tel:+1 (555) 0100", "Brother AI", "x://y", "a@b@c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := envelope.ParseAddress(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "envelope: ") {
				t.Fatalf("ParseAddress(%q) = %v, want an error starting with \"envelope: \"", s, err)
			}
			return
		}
		if a.Kind == envelope.AddressInvalid || a.Raw != s || a.Target == "" || !strings.Contains(strings.ToLower(s), strings.ToLower(a.Target)) {
			t.Fatalf("ParseAddress(%q) = %+v", s, a)
		}
		for _, e := range []*envelope.Envelope{
			envelope.New(s, "CLAUDE", envelope.IntentRequest, "x"),
			envelope.New("CLAUDE", s, envelope.IntentRequest, "x"),
		} {
			b, err := envelope.Marshal(e)
			if err != nil {
				t.Fatalf("ParseAddress(%q) accepts it, but Marshal refuses it: %v", s, err)
			}
			back, err := envelope.Unmarshal(b)
			if err != nil {
				t.Fatalf("ParseAddress(%q) accepts it, but Unmarshal(%q) = %v", s, b, err)
			}
			if back.From != e.From || back.To != e.To {
				t.Fatalf("Unmarshal(%q) = %q→%q, want %q→%q", b, back.From, back.To, e.From, e.To)
			}
		}
	})
}

// FuzzUnmarshal checks Unmarshal, the strict one-envelope parser: every
// failure is a *SyntaxError; what it accepts has ids that are ULIDs or
// UUIDv7s and addresses ParseAddress accepts, marshals, and unmarshals to
// the same value and the same canonical bytes.
func FuzzUnmarshal(f *testing.F) {
	_, inputs := fixtureEnvelopes(f)
	for _, in := range inputs {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		e, err := envelope.Unmarshal(in)
		if err != nil {
			var se *envelope.SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Unmarshal(%q) = %T %v, want *SyntaxError", in, err, err)
			}
			return
		}
		for _, id := range []string{e.Thread, e.Parent, e.Message} {
			if id != "" && !envelope.IsID(id) {
				t.Fatalf("Unmarshal(%q) accepted id %q in strict mode", in, id)
			}
		}
		for _, a := range []string{e.From, e.To} {
			if _, err := envelope.ParseAddress(a); err != nil {
				t.Fatalf("Unmarshal(%q) accepted address %q in strict mode: %v", in, a, err)
			}
		}
		b, err := envelope.Marshal(e)
		if err != nil {
			t.Fatalf("Marshal(Unmarshal(%q)) = %v", in, err)
		}
		e2, err := envelope.Unmarshal(b)
		if err != nil {
			t.Fatalf("Unmarshal(Marshal(Unmarshal(%q))) = %v\n%s", in, err, b)
		}
		assertSameValue(t, e2, e)
		if b2, err := envelope.Marshal(e2); err != nil || !bytes.Equal(b2, b) {
			t.Fatalf("Marshal is not idempotent:\n%q\n%q (%v)", b, b2, err)
		}
	})
}

// FuzzIDsAndIntents checks the small validators of header values: IsULID
// and IsUUIDv7 ignore case, accept only their fixed lengths, and
// IDFromHash always makes a ULID; NormalizeIntent is idempotent, maps known
// intents (legacy ones included) onto the registry and keeps unknown ones
// verbatim.
func FuzzIDsAndIntents(f *testing.F) {
	envs, _ := fixtureEnvelopes(f)
	for _, m := range envs {
		for _, k := range []string{"thread", "parent", "message", "intent", "legacy_intent"} {
			if s, ok := m[k].(string); ok {
				f.Add(s)
			}
		}
	}
	f.Add(envelope.NewID())
	f.Add("018f6b2e-3c4d-7a1b-9c2d-0123456789ab")
	f.Add("question")
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range []string{strings.ToUpper(s), strings.ToLower(s)} {
			if len(c) == len(s) && (envelope.IsULID(c) != envelope.IsULID(s) || envelope.IsUUIDv7(c) != envelope.IsUUIDv7(s)) {
				t.Fatalf("IsULID/IsUUIDv7 of %q and %q differ", s, c)
			}
		}
		if envelope.IsULID(s) && len(s) != 26 || envelope.IsUUIDv7(s) && len(s) != 36 {
			t.Fatalf("id %q accepted with length %d", s, len(s))
		}
		if envelope.IsID(s) != (envelope.IsULID(s) || envelope.IsUUIDv7(s)) {
			t.Fatalf("IsID(%q) = %v", s, envelope.IsID(s))
		}
		if id := envelope.IDFromHash([]byte(s)); !envelope.IsULID(id) || id != envelope.IDFromHash([]byte(s)) {
			t.Fatalf("IDFromHash(%q) = %q, not a deterministic ULID", s, id)
		}
		intent, legacy, known := envelope.NormalizeIntent(s)
		if !known {
			if intent != s || legacy != "" {
				t.Fatalf("NormalizeIntent(%q) = %q, %q, unknown: want it verbatim", s, intent, legacy)
			}
			return
		}
		if !envelope.KnownIntent(intent) || legacy != "" && legacy != s {
			t.Fatalf("NormalizeIntent(%q) = %q, %q, known", s, intent, legacy)
		}
		if i2, l2, k2 := envelope.NormalizeIntent(intent); i2 != intent || l2 != "" || !k2 {
			t.Fatalf("NormalizeIntent(%q) = %q, %q, %v; not idempotent", intent, i2, l2, k2)
		}
	})
}

// FuzzMarshal checks Marshal from the value side, as the relay's compose
// API and `crosstalk new` use it with values from outside: for any sender,
// receiver, intent, body (cleaned with CleanBody), context and extra
// field, Marshal either refuses with ErrInvalid or writes an envelope that
// reads back as the same value.
func FuzzMarshal(f *testing.F) {
	envs, _ := fixtureEnvelopes(f)
	for _, m := range envs {
		from, _ := m["from"].(string)
		to, _ := m["to"].(string)
		intent, _ := m["intent"].(string)
		body, _ := m["body"].(string)
		ctx, _ := m["context"].(string)
		f.Add(from, to, intent, body, ctx, "x-note", "v")
	}
	f.Add("CLAUDE", "CHATGPT", "question", "a\r\n  b\n\n[[END]]\nsig: x\n", "deploy", "Public-Key", "ed25519:AAAA")
	f.Fuzz(func(t *testing.T, from, to, intent, body, context, key, value string) {
		intent, _, _ = envelope.NormalizeIntent(strings.TrimSpace(intent))
		e := envelope.New(from, to, intent, envelope.CleanBody(body))
		e.Context = context
		if key != "" {
			e.Fields = []envelope.Field{{Key: key, Value: value}}
			e.Meta = []envelope.Meta{{Namespace: "signing", Fields: []envelope.Field{{Key: key, Value: value}}}}
		}
		b, err := envelope.Marshal(e)
		if err != nil {
			if !errors.Is(err, envelope.ErrInvalid) {
				t.Fatalf("Marshal(%+v) = %v, want ErrInvalid", e, err)
			}
			return
		}
		back, err := envelope.NewReader(bytes.NewReader(b)).Next()
		if err != nil {
			t.Fatalf("Marshal(%+v) wrote %q, which reads as %v", e, b, err)
		}
		assertSameValue(t, back, e)
	})
}
