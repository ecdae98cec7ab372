package envelope_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/fixtures"
)

// result is one value of Next in a form that can be compared: the
// envelope with its source and warnings, or the error.
type result struct {
	Env      envelope.Envelope
	Source   string
	Warnings []string
	Err      string
}

func results(t testing.TB, r *envelope.Reader, strict bool) []result {
	t.Helper()
	r.Strict = strict
	var out []result
	for {
		e, err := r.Next()
		if err == io.EOF {
			return out
		}
		var se *envelope.SyntaxError
		if errors.As(err, &se) {
			out = append(out, result{Err: fmt.Sprintf("%s %d:%d %s", se.Code, se.Line, se.Column, se.Msg)})
			continue
		}
		if err != nil {
			t.Fatalf("Next() = %v, want an envelope, a *SyntaxError or io.EOF", err)
		}
		out = append(out, result{Env: *e, Source: string(e.Source()), Warnings: e.Warnings()})
	}
}

// sameResults checks that NewBytesReader, which parses its input in place,
// reads in exactly as NewReader does over a stream that arrives one byte
// at a time (the scanner's slowest path) and over a bytes.Reader.
func sameResults(t *testing.T, in []byte, strict bool) {
	t.Helper()
	want := results(t, envelope.NewReader(iotest.OneByteReader(bytes.NewReader(in))), strict)
	if got := results(t, envelope.NewReader(bytes.NewReader(in)), strict); !reflect.DeepEqual(got, want) {
		t.Fatalf("NewReader(bytes.Reader) =\n%+v\nwant (one byte at a time)\n%+v", got, want)
	}
	if got := results(t, envelope.NewBytesReader(in), strict); !reflect.DeepEqual(got, want) {
		t.Fatalf("NewBytesReader =\n%+v\nwant (NewReader)\n%+v", got, want)
	}
}

func TestBytesReaderMatchesReader(t *testing.T) {
	names := fixtureNames(t)
	for _, name := range names {
		in, err := fixtures.FS.ReadFile("envelope/" + name + ".txt")
		if err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) {
			sameResults(t, in, false)
			sameResults(t, in, true)
		})
	}
	// The source is taken from the input in place only while it is
	// LF-terminated and unquoted: each way of breaking that, at each line.
	for _, tc := range []struct{ name, in string }{
		{"crlf", strings.ReplaceAll(basic, "\n", "\r\n")},
		{"cr-from-body", strings.Replace(basic, "  hello\n", "  hello\r", 1)},
		{"quoted", "> " + strings.ReplaceAll(strings.TrimSuffix(basic, "\n"), "\n", "\n> ") + "\n"},
		{"no-final-newline", strings.TrimSuffix(basic, "\n")},
		{"no-end", strings.TrimSuffix(basic, "[[END]]\n")},
		{"bom", "\ufeff" + basic},
		{"two", basic + "chat\n" + basic},
		{"fenced", "```\n" + basic + "```\n"},
		// Read one byte at a time, a line over the limit once cost a
		// search of everything buffered per byte: billions of steps here.
		{"long-line", strings.Repeat("x", 3*envelope.MaxLineLength) + "\n" + basic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sameResults(t, []byte(tc.in), false)
			sameResults(t, []byte(tc.in), true)
		})
	}
}

func FuzzBytesReader(f *testing.F) {
	names, err := fixtures.Envelopes()
	if err != nil || len(names) == 0 {
		f.Fatalf("no fuzz seeds: fixtures.Envelopes() = %d names, %v", len(names), err)
	}
	for _, n := range names {
		b, err := fixtures.FS.ReadFile("envelope/" + n + ".txt")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
	}
	f.Fuzz(func(t *testing.T, in []byte, strict bool) { sameResults(t, in, strict) })
}

func TestBytesReaderDoesNotKeepInput(t *testing.T) {
	in := []byte(basic)
	e, err := envelope.NewBytesReader(in).Next()
	if err != nil {
		t.Fatal(err)
	}
	before := *e
	src := string(e.Source())
	for i := range in {
		in[i] = 'x'
	}
	if !reflect.DeepEqual(*e, before) || string(e.Source()) != src || e.Body != "hello\nworld" || e.User != "kalle" {
		t.Errorf("envelope changed with its input: %+v, source %q", e, e.Source())
	}
}

func TestMetaBlocksDoNotShareAppends(t *testing.T) {
	in := "[[A→B v1]]\nintent: REQUEST\nmeta: one\nK: 1\nmeta: two\nL: 2\nbody: |\n  x\n[[END]]\n"
	e, err := envelope.Unmarshal([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	e.Meta[0].Fields = append(e.Meta[0].Fields, envelope.Field{Key: "Z", Value: "z"})
	if got := e.Meta[1].Fields; len(got) != 1 || got[0] != (envelope.Field{Key: "L", Value: "2"}) {
		t.Errorf("appending to META block one changed block two: %+v", got)
	}
}

// TestSourceOwnsItsBytes pins what the relay relies on when it keeps an
// envelope's source as a string without copying it (gateway's event
// data): Source never aliases the caller's input nor a buffer the Reader
// reuses, so neither overwriting the input nor reading more envelopes
// changes an envelope already returned. Checked for both constructors,
// on envelopes small and large, plain and quoted.
func TestSourceOwnsItsBytes(t *testing.T) {
	text := func(body string) string {
		var b bytes.Buffer
		if err := envelope.NewWriter(&b).Write(envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, body)); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	small := text("Please review.")
	large := text(strings.Repeat("A line of body text.\n", 2000))
	quoted := "> " + strings.ReplaceAll(strings.TrimSuffix(text("Quoted."), "\n"), "\n", "\n> ") + "\n"
	for _, in := range []string{small, large, quoted, small + large + quoted} {
		for _, ctor := range []struct {
			name string
			new  func([]byte) *envelope.Reader
		}{
			{"NewBytesReader", envelope.NewBytesReader},
			{"NewReader", func(b []byte) *envelope.Reader { return envelope.NewReader(bytes.NewReader(b)) }},
		} {
			buf := []byte(in)
			rd := ctor.new(buf)
			var envs []*envelope.Envelope
			var want []string
			for {
				e, err := rd.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%s: Next() error = %v", ctor.name, err)
				}
				envs = append(envs, e)
				want = append(want, string(e.Source()))
			}
			if len(envs) == 0 {
				t.Fatalf("%s: no envelope read", ctor.name)
			}
			for i := range buf {
				buf[i] = '#'
			}
			for i, e := range envs {
				if got := string(e.Source()); got != want[i] {
					t.Errorf("%s: envelope %d's source changed after its input was overwritten: %.40q, want %.40q", ctor.name, i, got, want[i])
				}
			}
		}
	}
}

// TestBytesReaderCROnlyIsLinear parses 16 MiB of envelopes and chat text
// with lone CR line ends (a classic Mac or some clipboards) in place.
// NewBytesReader once looked for an LF through the whole rest of the
// input for every line of such input: quadratic, hours for this input
// instead of a second. There is no timing threshold here: before the fix
// this test does not finish within go test's default timeout.
func TestBytesReaderCROnlyIsLinear(t *testing.T) {
	unit := strings.ReplaceAll(basic+"chat line\n\n", "\n", "\r")
	n := (16 << 20) / len(unit)
	in := []byte(strings.Repeat(unit, n))
	envs := 0
	for _, e := range results(t, envelope.NewBytesReader(in), false) {
		if e.Err != "" || e.Env.Body != "hello\nworld" {
			t.Fatalf("got %+v, want the envelope", e)
		}
		envs++
	}
	if envs != n {
		t.Fatalf("got %d envelopes, want %d", envs, n)
	}
}

// TestSameResultsAtEveryEnvelopeLimit: with the envelope size limit at
// every length up to parsevsjs's small v1.1 envelope (followed by a second
// one), NewBytesReader and NewReader over a bytes.Reader, which read the
// lines of their buffer in one pass (envState.run), refuse the envelope at
// the same line as NewReader one byte at a time, which never does.
func TestSameResultsAtEveryEnvelopeLimit(t *testing.T) {
	in := append(append([]byte(nil), smallV11...), "chat\n"+basic...)
	read := func(r *envelope.Reader, limit int) []result {
		r.Limits = envelope.Limits{Envelope: limit}
		return results(t, r, false)
	}
	for limit := 1; limit <= len(smallV11)+1; limit++ {
		want := read(envelope.NewReader(iotest.OneByteReader(bytes.NewReader(in))), limit)
		if got := read(envelope.NewReader(bytes.NewReader(in)), limit); !reflect.DeepEqual(got, want) {
			t.Fatalf("limit %d: NewReader(bytes.Reader) =\n%+v\nwant (one byte at a time)\n%+v", limit, got, want)
		}
		if got := read(envelope.NewBytesReader(in), limit); !reflect.DeepEqual(got, want) {
			t.Fatalf("limit %d: NewBytesReader =\n%+v\nwant (one byte at a time)\n%+v", limit, got, want)
		}
	}
}
