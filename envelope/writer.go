package envelope

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"
)

// Writer writes envelopes in canonical form (docs/design.md §3.2, docs/format.md
// §10), separated by one blank line. Like go-imap's encoder it keeps the
// first error: once a write fails, every later Write returns that error.
//
// Set Fence and V10 before the first Write.
type Writer struct {
	// Fence wraps each envelope in a ``` fence, longer when the envelope
	// itself contains a backtick run, for chat UIs that collapse newlines.
	Fence bool
	// V10 writes the v1.0 form: legacy intents as written (QUESTION
	// rather than REQUEST; see ToV10), a `response: |` body with no intent
	// line where the envelope was read in that form, and thread, parent
	// and message after the intent, where v1.0 readers ignore them.
	V10 bool

	w   io.Writer
	n   int
	err error
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes e in canonical form. An envelope that cannot be written so
// that it reads back the same (a value with a line break, a META key that
// would end its block, …) is an error, and nothing of it is written.
func (w *Writer) Write(e *Envelope) error {
	if w.err != nil {
		return w.err
	}
	if err := checkWritable(e); err != nil {
		return err // the envelope's fault, not the stream's: not sticky
	}
	// One buffer and one Write: the separator, the fence and the
	// envelope go out together or not at all. The buffer is recycled: an
	// io.Writer must not retain what it is given.
	out := writeBufs.Get().(*bytes.Buffer)
	defer putWriteBuf(out)
	out.Grow(sizeHint(e) + 1)
	if w.n > 0 {
		out.WriteByte('\n')
	}
	if w.Fence {
		var env bytes.Buffer
		writeEnvelope(&env, e, w.V10)
		fence := strings.Repeat("`", max(3, longestRun(env.Bytes(), '`')+1))
		out.WriteString(fence + "\n")
		out.Write(env.Bytes())
		out.WriteString(fence + "\n")
	} else {
		writeEnvelope(out, e, w.V10)
	}
	if _, err := w.w.Write(out.Bytes()); err != nil {
		w.err = fmt.Errorf("envelope: write: %w", err)
		return w.err
	}
	w.n++
	return nil
}

// writeBufs recycles Write's buffers, which never leave it.
var writeBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledWrite bounds the buffers writeBufs keeps, so that one large
// envelope does not pin its buffer.
const maxPooledWrite = 64 << 10

func putWriteBuf(b *bytes.Buffer) {
	if b.Cap() <= maxPooledWrite {
		b.Reset()
		writeBufs.Put(b)
	}
}

// Marshal returns the canonical form of e. Marshal(Unmarshal(x)) is x for
// every canonical x.
func Marshal(e *Envelope) ([]byte, error) { return marshal(e, false) }

// Unmarshal parses data, which must hold exactly one complete envelope
// (text around it is allowed), in strict mode.
func Unmarshal(data []byte) (*Envelope, error) {
	r := readerPool.Get().(*Reader)
	defer func() {
		*r = Reader{} // keeps nothing of data
		readerPool.Put(r)
	}()
	r.data, r.Strict = data, true
	e, err := r.Next()
	if err == io.EOF {
		return nil, &SyntaxError{Code: CodeFormat, Msg: "no envelope found"}
	}
	if err != nil {
		return nil, err
	}
	if _, err := r.Next(); err != io.EOF {
		return nil, &SyntaxError{Code: CodeFormat, Line: r.sc.line, Msg: "more than one envelope"}
	}
	return e, nil
}

// readerPool recycles Unmarshal's Readers, which never leave it: a Reader
// is a tenth of what parsing a small envelope allocates.
var readerPool = sync.Pool{New: func() any { return new(Reader) }}

// ErrInvalid is wrapped by every error Marshal returns for an envelope that
// cannot be written.
var ErrInvalid = errors.New("envelope: cannot be written")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

func marshal(e *Envelope, v10 bool) ([]byte, error) {
	if err := checkWritable(e); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(sizeHint(e))
	writeEnvelope(&b, e, v10)
	return b.Bytes(), nil
}

// sizeHint is at least the length of e's canonical form, so that
// writeEnvelope fills one buffer without growing it: every value, and 16
// bytes of key and punctuation for each line, 2 of indent for each body
// line.
func sizeHint(e *Envelope) int {
	n := 64 + len(e.From) + len(e.To) + len(e.User) + len(e.Session) + len(e.Thread) + len(e.Parent) +
		len(e.Message) + len(e.Context) + len(e.Intent) + len(e.LegacyIntent) + len(e.Sig) + 9*16
	for _, f := range e.Fields {
		n += len(f.Key) + len(f.Value) + 16
	}
	for _, m := range e.Meta {
		n += len(m.Namespace) + 16
		for _, f := range m.Fields {
			n += len(f.Key) + len(f.Value) + 16
		}
	}
	return n + len(e.Body) + 3*strings.Count(e.Body, "\n") + 3
}

// writeEnvelope writes the canonical form of e, which checkWritable
// accepted, to b.
func writeEnvelope(b *bytes.Buffer, e *Envelope, v10 bool) {
	b.WriteString("[[")
	b.WriteString(e.From)
	b.WriteString("→")
	b.WriteString(e.To)
	b.WriteString(" v1]]\n")
	field := func(k, v string) {
		if v != "" {
			b.WriteString(k)
			b.WriteString(": ")
			b.WriteString(v)
			b.WriteByte('\n')
		}
	}
	// line writes a field or META line as read back: a colon, and the
	// value after one space unless it is empty.
	line := func(f Field) {
		b.WriteString(f.Key)
		b.WriteByte(':')
		if f.Value != "" {
			b.WriteByte(' ')
			b.WriteString(f.Value)
		}
		b.WriteByte('\n')
	}
	field("user", e.User)
	field("session", e.Session)
	ids := func() {
		field("thread", e.Thread)
		field("parent", e.Parent)
		field("message", e.Message)
	}
	if !v10 {
		ids()
	}
	field("context", e.Context)
	responseForm := v10 && e.ResponseForm && e.Intent == IntentRespond
	switch {
	case responseForm:
	case v10 && e.LegacyIntent != "":
		field("intent", e.LegacyIntent)
	default:
		field("intent", e.Intent)
	}
	if v10 {
		// v1.0 readers take everything between session: and the next
		// context:/intent: line as the session (the original parser's
		// regular expression), so the ids v1.0 lacks come after them.
		ids()
	}
	for _, f := range e.Fields {
		line(f)
	}
	for _, m := range e.Meta {
		b.WriteString("\nmeta: ")
		b.WriteString(m.Namespace)
		b.WriteByte('\n')
		for _, f := range m.Fields {
			line(f)
		}
	}
	if responseForm {
		b.WriteString("\nresponse: |\n")
	} else {
		b.WriteString("\nbody: |\n")
	}
	for rest := e.Body; rest != ""; {
		l, tail, found := strings.Cut(rest, "\n")
		if l != "" {
			b.WriteString("  ")
			b.WriteString(l)
		}
		b.WriteByte('\n')
		if !found {
			break
		}
		rest = tail
		if rest == "" {
			b.WriteByte('\n') // the body ended in a line break: an empty last line
		}
	}
	field("sig", e.Sig)
	b.WriteString("[[END]]\n")
}

// checkWritable reports what in e would not read back as written.
func checkWritable(e *Envelope) error {
	if err := checkUTF8(e); err != nil {
		return err
	}
	for _, a := range [...]struct{ name, v string }{{"sender", e.From}, {"receiver", e.To}} {
		switch {
		case a.v == "":
			return invalid("empty %s", a.name)
		case a.v != strings.TrimSpace(a.v) || strings.ContainsAny(a.v, "\r\n"):
			return invalid("%s %q has surrounding space or a line break", a.name, a.v)
		case strings.Contains(a.v, "[[") || strings.Contains(a.v, "]]"):
			return invalid("%s %q contains brackets", a.name, a.v)
		}
		for _, arrow := range arrows {
			if strings.Contains(a.v, arrow) {
				return invalid("%s %q contains an arrow", a.name, a.v)
			}
		}
	}
	if e.Intent == "" {
		return invalid("missing intent")
	}
	values := [...]struct{ k, v string }{
		{"user", e.User}, {"session", e.Session}, {"thread", e.Thread}, {"parent", e.Parent},
		{"message", e.Message}, {"context", e.Context}, {"intent", e.Intent},
		{"legacy_intent", e.LegacyIntent}, {"sig", e.Sig},
	}
	for _, f := range values {
		if err := checkValue(f.k, f.v); err != nil {
			return err
		}
	}
	for _, f := range e.Fields {
		if key, _, ok := topField(withColon(f.Key, new([64]byte))); !ok || len(key) != len(f.Key) || knownKey(key) >= 0 || f.Key == "meta" {
			return invalid("unknown field key %q is not a lower-case key, or is reserved", f.Key)
		}
		if err := checkValue(f.Key, f.Value); err != nil {
			return err
		}
	}
	// The Reader refuses identifiers with characters a person could not
	// see (NormalizeIdentifiers), so Marshal must not write them. After
	// the framing checks: a line break in a value is that, not a name.
	for _, id := range [...]struct{ name, v string }{{"sender", e.From}, {"receiver", e.To}, {"context", e.Context}} {
		if _, err := NormalizeIdentifier(id.v); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalid, id.name, err) // and ErrIdentifier
		}
	}
	for _, m := range e.Meta {
		if m.Namespace == "" {
			return invalid("META block without a namespace")
		}
		if err := checkValue("meta", m.Namespace); err != nil {
			return err
		}
		if _, err := NormalizeIdentifier(m.Namespace); err != nil {
			return fmt.Errorf("%w: META namespace: %w", ErrInvalid, err)
		}
		for _, f := range m.Fields {
			c := withColon(f.Key, new([64]byte))
			key, _, ok := metaField(c)
			if !ok || len(key) != len(f.Key) {
				return invalid("META key %q is not a valid key", f.Key)
			}
			if tk, _, ok := topField(c); ok && (knownKey(tk) >= 0 || f.Key == "meta") {
				return invalid("META key %q would end its block", f.Key)
			}
			if err := checkValue(f.Key, f.Value); err != nil {
				return err
			}
		}
	}
	if strings.ContainsRune(e.Body, '\r') {
		return invalid("body contains a carriage return")
	}
	return nil
}

// checkUTF8 refuses invalid UTF-8 anywhere in e: the Reader rejects any
// line that is not valid UTF-8 (docs/format.md), so it would not read back.
func checkUTF8(e *Envelope) error {
	for _, f := range [...]struct{ k, v string }{
		{"sender", e.From}, {"receiver", e.To}, {"user", e.User}, {"session", e.Session},
		{"thread", e.Thread}, {"parent", e.Parent}, {"message", e.Message}, {"context", e.Context},
		{"intent", e.Intent}, {"legacy_intent", e.LegacyIntent}, {"sig", e.Sig}, {"body", e.Body},
	} {
		if !utf8.ValidString(f.v) {
			return invalid("%s is not valid UTF-8", f.k)
		}
	}
	for _, f := range e.Fields {
		if !utf8.ValidString(f.Key) || !utf8.ValidString(f.Value) {
			return invalid("field %q is not valid UTF-8", f.Key)
		}
	}
	for _, m := range e.Meta {
		if !utf8.ValidString(m.Namespace) {
			return invalid("META namespace %q is not valid UTF-8", m.Namespace)
		}
		for _, f := range m.Fields {
			if !utf8.ValidString(f.Key) || !utf8.ValidString(f.Value) {
				return invalid("META field %q is not valid UTF-8", f.Key)
			}
		}
	}
	return nil
}

func checkValue(k, v string) error {
	if strings.IndexByte(v, '\n') >= 0 || strings.IndexByte(v, '\r') >= 0 {
		return invalid("%s value contains a line break", k)
	}
	if v != "" && (isSpaceOrTab(v[0]) || isSpaceOrTab(v[len(v)-1])) { // v != strings.Trim(v, " \t")
		return invalid("%s value %q has surrounding space", k, v)
	}
	return nil
}

func isSpaceOrTab(c byte) bool { return c == ' ' || c == '\t' }

// withColon returns key + ":" as a line to split, in buf when it fits:
// checkWritable asks the Reader's own line splitters about every key.
func withColon(key string, buf *[64]byte) []byte {
	return append(append(buf[:0], key...), ':')
}

func longestRun(b []byte, c byte) int {
	best, n := 0, 0
	for _, x := range b {
		if x == c {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	return best
}
