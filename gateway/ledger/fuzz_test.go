package ledger_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
)

// fuzzNow is the fixed clock of the fuzz targets' stores.
func fuzzNow() time.Time { return time.Date(2026, 1, 13, 10, 0, 0, 0, time.UTC) }

// exportSeed returns the export of a memory store holding a few events of
// two groups, with and without dedupe keys and data.
func exportSeed(f *testing.F) []byte {
	f.Helper()
	s := memory.New(fuzzNow)
	defer s.Close()
	recs := []ledger.Record{
		{Kind: "chat.message", GroupID: "deploy", By: "claude", Data: json.RawMessage(`{"from":"CLAUDE","to":"CHATGPT","body":"is it <blocked>?\u2028"}`), DedupeKey: "m1"},
		{Kind: "chat.message", GroupID: "deploy", ScopeKey: "s", By: "chatgpt"},
		{Kind: "system.notify", GroupID: "other", Data: json.RawMessage(`{ "n" : [1, 2.5e3, null, true] }`)},
	}
	if _, err := s.Append(f.Context(), recs); err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ledger.Export(f.Context(), s, &buf); err != nil {
		f.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzImport checks the JSON Lines reader of `crosstalk ledger import`:
// it never panics, every error says "ledger: import: …", a successful
// import counts every non-blank line, importing the same input again skips
// every event, and the store's export survives an import into a fresh
// store byte for byte.
func FuzzImport(f *testing.F) {
	seed := exportSeed(f)
	f.Add(seed)
	f.Add(bytes.ReplaceAll(seed, []byte("\n"), []byte("\r\n\n")))
	f.Add([]byte(`{"v":1,"id":"A","ts":"2026-01-13T10:00:00.5+01:00","seq":1,"kind":"k","group_id":"g","scope_key":"","by":"u","data":{},"x_dedupe_key":"m1"}` + "\n"))
	f.Add([]byte(`{"v":1,"id":"A","ts":"2026-01-13T10:00:00Z","seq":2,"kind":"k","group_id":"g","data":null}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		ctx := t.Context()
		s := memory.New(fuzzNow)
		defer s.Close()
		n, err := ledger.Import(ctx, s, bytes.NewReader(in))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "ledger: import: ") {
				t.Fatalf("Import(%q) = %d, %v, want an error starting with \"ledger: import: \"", in, n, err)
			}
			return
		}
		lines := 0
		for _, l := range strings.Split(string(in), "\n") {
			if len(bytes.TrimSpace([]byte(l))) > 0 {
				lines++
			}
		}
		if n != lines {
			t.Fatalf("Import(%q) = %d, want %d (one per non-blank line)", in, n, lines)
		}
		if again, err := ledger.Import(ctx, s, bytes.NewReader(in)); err != nil || again != n {
			t.Fatalf("Import(%q) again = %d, %v, want %d, nil (every event skipped)", in, again, err, n)
		}
		exported := export(t, s)
		s2 := memory.New(fuzzNow)
		defer s2.Close()
		if _, err := ledger.Import(ctx, s2, bytes.NewReader(exported)); err != nil {
			t.Fatalf("Import(Export(Import(%q))) = %v\nexport:\n%s", in, err, exported)
		}
		if got := export(t, s2); !bytes.Equal(got, exported) {
			t.Fatalf("export of the re-imported store differs:\n%s\nwant\n%s", got, exported)
		}
	})
}

func export(t *testing.T, s ledger.Store) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := ledger.Export(t.Context(), s, &buf); err != nil {
		t.Fatalf("Export() = %v", err)
	}
	return buf.Bytes()
}

// FuzzNormalizeData checks NormalizeData: it never panics, rejects with
// ErrInvalid, and what it returns is one valid JSON object, compact (no
// byte of it changes when normalized again) and the same value as the
// input.
func FuzzNormalizeData(f *testing.F) {
	for _, l := range bytes.Split(exportSeed(f), []byte("\n")) {
		var ev ledger.Event
		if json.Unmarshal(l, &ev) == nil {
			f.Add([]byte(ev.Data))
		}
	}
	for _, s := range []string{"", "  \n", "{ \"a\" : [1, 2],\n \"b\": {\"c\": \"x y\"} }", `{"t":"<&>"}`, "[1]", "null", `{"a":1}x`, `{"a":"\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := ledger.NormalizeData(in)
		if err != nil {
			if !errors.Is(err, ledger.ErrInvalid) {
				t.Fatalf("NormalizeData(%q) = %v, want ErrInvalid", in, err)
			}
			return
		}
		if !json.Valid(out) || out[0] != '{' {
			t.Fatalf("NormalizeData(%q) = %q, not a JSON object", in, out)
		}
		if again, err := ledger.NormalizeData(out); err != nil || !bytes.Equal(again, out) {
			t.Fatalf("NormalizeData(%q) = %q, %v; want it unchanged", out, again, err)
		}
		if bytes.ContainsAny(out, "\n\r") {
			t.Fatalf("NormalizeData(%q) = %q, more than one line", in, out)
		}
		if len(bytes.Trim(in, " \t\r\n")) == 0 {
			return
		}
		// Numbers as written (UseNumber): JSON allows 1e700, a float64 not.
		a, err := decodeJSON(in)
		if err != nil {
			t.Fatalf("NormalizeData(%q) accepted what json.Decoder rejects: %v", in, err)
		}
		if b, err := decodeJSON(out); err != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("NormalizeData(%q) = %q: value %v, want %v (%v)", in, out, b, a, err)
		}
	})
}

// decodeJSON decodes the one JSON value in b, keeping numbers as written.
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("more than one value")
	}
	return v, nil
}
