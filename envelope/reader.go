package envelope

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Limits bound what the Reader accepts (DESIGN §3.1). Passing one is an
// E-TOO-LARGE error for that envelope.
type Limits struct {
	Envelope   int // bytes of source from header to [[END]]
	Line       int // bytes in one line
	MetaBlocks int // META blocks in one envelope
	Fields     int // fields in one META block, and unknown top-level fields
}

// The default limits.
const (
	MaxEnvelopeSize = 1 << 20
	MaxLineLength   = 64 << 10
	MaxMetaBlocks   = 64
	MaxFields       = 256
)

// DefaultLimits are the limits a Reader uses unless told otherwise.
var DefaultLimits = Limits{
	Envelope:   MaxEnvelopeSize,
	Line:       MaxLineLength,
	MetaBlocks: MaxMetaBlocks,
	Fields:     MaxFields,
}

// Reader finds envelopes in text: a chat transcript, a mail body, a file, a
// clipboard. It skips everything that is not an envelope, reads each
// envelope it finds, and returns them one at a time from Next.
//
// Set Strict and Limits before the first call to Next.
type Reader struct {
	// Strict makes a missing [[END]], an invalid id or an unclassifiable
	// address an error instead of a warning.
	Strict bool
	// Limits bounds each envelope; the zero value means DefaultLimits.
	Limits Limits

	src     io.Reader
	sc      *lineScanner
	err     error // sticky: io.EOF or a read error
	started bool

	// a line pushed back to be read again by the outer loop
	pend     []byte
	pendLong bool
	pendNo   int
	hasPend  bool

	// the fence open at the current position, outside envelopes
	fenceChar byte
	fenceLen  int

	body []byte // scratch for the body being read, reused
}

// bodyPool recycles body scratch buffers between Readers; buffers that grew
// past maxPooledBody are left to the garbage collector.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

const maxPooledBody = 64 << 10

// NewReader returns a Reader reading from r.
func NewReader(r io.Reader) *Reader { return &Reader{src: r} }

func (r *Reader) limits() Limits {
	l := r.Limits
	if l.Envelope <= 0 {
		l.Envelope = DefaultLimits.Envelope
	}
	if l.Line <= 0 {
		l.Line = DefaultLimits.Line
	}
	if l.MetaBlocks <= 0 {
		l.MetaBlocks = DefaultLimits.MetaBlocks
	}
	if l.Fields <= 0 {
		l.Fields = DefaultLimits.Fields
	}
	return l
}

func (r *Reader) readLine() (line []byte, long bool, no int, ok bool) {
	if r.hasPend {
		r.hasPend = false
		return r.pend, r.pendLong, r.pendNo, true
	}
	line, long, ok = r.sc.next()
	if ok && r.sc.line == 1 {
		line = bytes.TrimPrefix(line, []byte("\ufeff")) // BOM (DESIGN §3.1)
	}
	return line, long, r.sc.line, ok
}

func (r *Reader) unread(line []byte, long bool, no int) {
	r.pend, r.pendLong, r.pendNo, r.hasPend = line, long, no, true
}

// Next returns the next envelope in the input. At the end of the input it
// returns io.EOF. A malformed envelope gives a *SyntaxError; the Reader then
// skips to the end of that envelope and the next call continues with the
// following one. Read errors are returned as they are, and again on every
// later call.
func (r *Reader) Next() (*Envelope, error) {
	if r.err != nil {
		return nil, r.err
	}
	if !r.started {
		r.started = true
		r.sc = newLineScanner(r.src, r.limits().Line)
		r.body = (*bodyPool.Get().(*[]byte))[:0]
	}
	for {
		line, long, no, ok := r.readLine()
		if !ok {
			r.err = io.EOF
			if r.sc.err != nil {
				r.err = r.sc.err
			}
			r.sc.release()
			if cap(r.body) <= maxPooledBody {
				b := r.body[:0]
				bodyPool.Put(&b)
			}
			r.body = nil
			return nil, r.err
		}
		if long {
			continue // a line too long to be a header is chat text
		}
		content, quoted := stripQuote(line)
		if c, n, closing := fenceLine(content); n > 0 {
			if r.fenceLen == 0 {
				r.fenceChar, r.fenceLen = c, n
			} else if closing && c == r.fenceChar && n >= r.fenceLen {
				r.fenceChar, r.fenceLen = 0, 0
			}
			continue
		}
		h := parseHeader(content)
		if h.kind == notHeader {
			continue
		}
		st := &envState{r: r, lim: r.limits(), quoted: quoted, spaced: quoted && len(line) > 1 && line[1] == ' ', fenceChar: r.fenceChar, fenceLen: r.fenceLen, headerLine: no}
		if h.kind != headerOK {
			return st.abort(h.err(no))
		}
		if !utf8.Valid(content) {
			return st.abort(syntaxErr(CodeFormat, no, 0, "header is not valid UTF-8"))
		}
		return st.read(h, content)
	}
}

// stripQuote removes one level of "> " quoting (DESIGN §3.1).
func stripQuote(line []byte) ([]byte, bool) {
	if len(line) == 0 || line[0] != '>' {
		return line, false
	}
	line = line[1:]
	if len(line) > 0 && line[0] == ' ' {
		line = line[1:]
	}
	return line, true
}

// fenceLine reports whether line is a Markdown code fence: three or more
// backticks or tildes, optionally followed by an info string (opening
// fences only). It returns the fence character, its length (0 when not a
// fence) and whether it could close a fence (nothing but blanks after it).
func fenceLine(line []byte) (c byte, n int, closing bool) {
	if len(line) < 3 || line[0] != '`' && line[0] != '~' {
		return 0, 0, false
	}
	c = line[0]
	for n < len(line) && line[n] == c {
		n++
	}
	if n < 3 {
		return 0, 0, false
	}
	rest := bytes.TrimRight(line[n:], " \t")
	if c == '`' && bytes.IndexByte(rest, '`') >= 0 {
		return 0, 0, false // not a fence in CommonMark
	}
	return c, n, len(rest) == 0
}

type headerKind int

const (
	notHeader headerKind = iota
	headerOK
	headerBadVersion
	headerMalformed
)

type header struct {
	kind     headerKind
	from, to string
	version  int
	detail   string
}

func (h header) err(line int) *SyntaxError {
	if h.kind == headerBadVersion {
		return syntaxErr(CodeUnsupported, line, 0, "unsupported envelope version %s (only v1 is defined)", h.detail)
	}
	return syntaxErr(CodeFormat, line, 0, "malformed header: %s", h.detail)
}

var arrows = []string{"→", "->", "=>"}

// parseHeader recognises `[[SENDER→RECEIVER vN]]` (DESIGN §3.1). Lines that
// do not have that shape at all are notHeader; lines that have it but a bad
// part are headerMalformed or headerBadVersion, so that a broken envelope is
// reported rather than skipped.
func parseHeader(line []byte) header {
	if len(line) < 5 || line[0] != '[' || line[1] != '[' {
		return header{} // the common case: not even a candidate
	}
	t := bytes.TrimRight(line, " \t")
	if len(t) < 5 || t[0] != '[' || t[1] != '[' || t[len(t)-1] != ']' || t[len(t)-2] != ']' {
		return header{}
	}
	inner := string(t[2 : len(t)-2])
	ai, alen := -1, 0
	for _, a := range arrows {
		if i := strings.Index(inner, a); i >= 0 && (ai < 0 || i < ai) {
			ai, alen = i, len(a)
		}
	}
	if ai < 0 {
		return header{}
	}
	sp := strings.LastIndexAny(inner, " \t")
	if sp < ai+alen {
		return header{} // no version: not a header (docs/format.md §2)
	}
	ver := inner[sp+1:]
	if len(ver) < 2 || ver[0] != 'v' && ver[0] != 'V' {
		return header{}
	}
	h := header{from: strings.TrimSpace(inner[:ai]), to: strings.TrimSpace(inner[ai+alen : sp])}
	major, minor, hasMinor := strings.Cut(ver[1:], ".")
	n, err := strconv.Atoi(major)
	if err != nil || n < 0 || strings.HasPrefix(major, "+") || hasMinor && !isDigits(minor) {
		h.kind, h.detail = headerMalformed, "bad version "+strconv.Quote(ver)
		return h
	}
	if n != 1 {
		h.kind, h.detail = headerBadVersion, ver
		return h
	}
	switch {
	case h.from == "":
		h.kind, h.detail = headerMalformed, "empty sender"
	case h.to == "":
		h.kind, h.detail = headerMalformed, "empty receiver"
	case strings.Contains(h.from, "[[") || strings.Contains(h.from, "]]") || strings.Contains(h.to, "[[") || strings.Contains(h.to, "]]"):
		h.kind, h.detail = headerMalformed, "brackets inside an address"
	case strings.Contains(h.to, "→") || strings.Contains(h.to, "->") || strings.Contains(h.to, "=>"):
		h.kind, h.detail = headerMalformed, "more than one arrow"
	default:
		h.kind, h.version = headerOK, 1
	}
	return h
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func isEnd(c []byte) bool {
	if len(c) < 7 || c[0] != '[' {
		return false
	}
	return bytes.Equal(bytes.TrimRight(c, " \t"), []byte("[[END]]"))
}
