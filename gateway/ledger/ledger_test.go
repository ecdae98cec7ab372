package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

func TestNormalizeData(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{"", "{}", false},
		{"  \n", "{}", false},
		{"{}", "{}", false},
		{"{ \"a\" : [1, 2],\n \"b\": {\"c\": \"x y\"} }", `{"a":[1,2],"b":{"c":"x y"}}`, false},
		{`{"t":"<&>"}`, `{"t":"<&>"}`, false},
		{"[1]", "", true},
		{`"s"`, "", true},
		{"null", "", true},
		{`{"a":`, "", true},
		{`{"a":1}x`, "", true},
		{"{}\v", "", true},     // \v is not JSON whitespace
		{"\u00a0{}", "", true}, // nor is U+00A0
		{"\u0085", "", true},   // so this is not empty data
		{" \t\r\n{}\n", "{}", false},
	}
	for _, tt := range tests {
		got, err := ledger.NormalizeData(json.RawMessage(tt.in))
		if tt.wantErr {
			if !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("NormalizeData(%q) error = %v, want ErrInvalid", tt.in, err)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("NormalizeData(%q) = %s, %v, want %s", tt.in, got, err, tt.want)
		}
	}
}

func TestFormatTime(t *testing.T) {
	tests := []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 1, 13, 10, 0, 0, 0, time.UTC), "2026-01-13T10:00:00.000Z"},
		{time.Date(2026, 1, 13, 10, 0, 0, 123999999, time.UTC), "2026-01-13T10:00:00.123Z"},
		{time.Date(2026, 1, 13, 12, 0, 0, 5e6, time.FixedZone("CEST", 2*3600)), "2026-01-13T10:00:00.005Z"},
	}
	for _, tt := range tests {
		if got := ledger.FormatTime(tt.in); got != tt.want {
			t.Errorf("FormatTime(%v) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func validEvent() ledger.Event {
	return ledger.Event{V: 1, ID: "01J9ZZZZZZZZZZZZZZZZZZZZZZ", TS: "2026-01-13T10:00:00Z", Seq: 1,
		Kind: "chat.message", GroupID: "g", Data: json.RawMessage(`{}`)}
}

func TestEventValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*ledger.Event)
		ok     bool
	}{
		{"valid", func(*ledger.Event) {}, true},
		{"nil data", func(e *ledger.Event) { e.Data = nil }, true},
		{"nano ts", func(e *ledger.Event) { e.TS = "2026-01-13T10:00:00.123456789Z" }, true},
		{"v0", func(e *ledger.Event) { e.V = 0 }, false},
		{"v2", func(e *ledger.Event) { e.V = 2 }, false},
		{"no id", func(e *ledger.Event) { e.ID = "" }, false},
		{"seq 0", func(e *ledger.Event) { e.Seq = 0 }, false},
		{"no kind", func(e *ledger.Event) { e.Kind = "" }, false},
		{"no group", func(e *ledger.Event) { e.GroupID = "" }, false},
		{"bad ts", func(e *ledger.Event) { e.TS = "2026-01-13 10:00" }, false},
		{"array data", func(e *ledger.Event) { e.Data = json.RawMessage(`[]`) }, false},
	}
	for _, tt := range tests {
		ev := validEvent()
		tt.change(&ev)
		err := ev.Validate()
		if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ledger.ErrInvalid)) {
			t.Errorf("Validate(%s) = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

func TestRecordValidate(t *testing.T) {
	tests := []struct {
		name string
		rec  ledger.Record
		ok   bool
	}{
		{"valid", ledger.Record{Kind: "k", GroupID: "g"}, true},
		{"no kind", ledger.Record{GroupID: "g"}, false},
		{"no group", ledger.Record{Kind: "k"}, false},
		{"bad data", ledger.Record{Kind: "k", GroupID: "g", Data: json.RawMessage(`1`)}, false},
	}
	for _, tt := range tests {
		if err := tt.rec.Validate(); tt.ok != (err == nil) || (err != nil && !errors.Is(err, ledger.ErrInvalid)) {
			t.Errorf("Validate(%s) = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

// TestRecordNormalizedCompact checks that data marked Compact is stored as
// given, and that the mark does not let data that is no object through.
func TestRecordNormalizedCompact(t *testing.T) {
	tests := []struct {
		name     string
		data     string
		want     string
		wantSame bool // the record's own bytes, not a compacted copy
		wantErr  error
	}{
		{"object", `{"a":1,"b":"x y"}`, `{"a":1,"b":"x y"}`, true, nil},
		{"empty", ``, `{}`, false, nil},
		{"not an object", `[1]`, ``, false, ledger.ErrInvalid},
		{"leading space", ` {"a": 1}`, `{"a":1}`, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := json.RawMessage(tt.data)
			r, err := ledger.Record{Kind: "k", GroupID: "g", Data: in, Compact: true}.Normalized()
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Normalized() error = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if string(r.Data) != tt.want {
				t.Errorf("Normalized().Data = %s, want %s", r.Data, tt.want)
			}
			if same := len(in) > 0 && &r.Data[0] == &in[0]; same != tt.wantSame {
				t.Errorf("Normalized() kept the record's bytes = %v, want %v", same, tt.wantSame)
			}
		})
	}
}

func TestEqual(t *testing.T) {
	a := validEvent()
	b := a
	b.Data = json.RawMessage("{ }")
	if !ledger.Equal(a, b) {
		t.Errorf("Equal(%s, %s) = false, want true", a.Data, b.Data)
	}
	b.DedupeKey = "k"
	if ledger.Equal(a, b) {
		t.Errorf("Equal(no key, key k) = true, want false")
	}
}

func TestClaimExpired(t *testing.T) {
	t0 := time.Date(2026, 1, 13, 10, 0, 0, 0, time.UTC)
	c := ledger.Claim{ExpiresAt: t0}
	tests := []struct {
		now  time.Time
		want bool
	}{
		{t0.Add(-time.Nanosecond), false},
		{t0, true},
		{t0.Add(time.Second), true},
	}
	for _, tt := range tests {
		if got := c.Expired(tt.now); got != tt.want {
			t.Errorf("Expired(%v) = %v, want %v", tt.now, got, tt.want)
		}
	}
}

// importStore is a Store whose ImportEvents records what it gets; the
// other methods are not used by Import.
type importStore struct {
	ledger.Store
	got []ledger.Event
}

func (s *importStore) ImportEvents(_ context.Context, evs []ledger.Event) (int, error) {
	s.got = append(s.got, evs...)
	return len(evs), nil
}

func TestImportReaderErrors(t *testing.T) {
	line := `{"v":1,"id":"A","ts":"2026-01-13T10:00:00Z","seq":1,"kind":"k","group_id":"g","scope_key":"","by":"u","data":{},"x_dedupe_key":"m1"}` + "\n"
	tests := []struct {
		name    string
		r       io.Reader
		wantN   int
		wantErr string
	}{
		{"read error", readThenFail(line), 1, "ledger: import: after line 1: boom"},
		{"too long", strings.NewReader(line + `{"v":1,"data":"` + strings.Repeat("x", ledger.MaxLineSize) + "\"}\n"), 1, "ledger: import: line 2: longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &importStore{}
			n, err := ledger.Import(t.Context(), s, tt.r)
			if n != tt.wantN || err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
				t.Errorf("Import(%s) = %d, %v, want %d, %q…", tt.name, n, err, tt.wantN, tt.wantErr)
			}
			if len(s.got) != 1 || s.got[0].DedupeKey != "m1" {
				t.Errorf("Import(%s) stored %+v, want the first line's event with dedupe key m1", tt.name, s.got)
			}
		})
	}
}

func readThenFail(s string) *failAfter {
	return &failAfter{r: strings.NewReader(s)}
}

type failAfter struct{ r *strings.Reader }

func (f *failAfter) Read(p []byte) (int, error) {
	if f.r.Len() == 0 {
		return iotest.ErrReader(errors.New("boom")).Read(p)
	}
	return f.r.Read(p)
}
