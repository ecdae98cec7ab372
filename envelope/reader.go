package envelope

import (
	"bytes"
	"io"
	"strconv"
	"strings"
)

// Limits bound what the Reader accepts (docs/design.md §3.1). Passing one is an
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

	sc      lineScanner
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

	src  io.Reader
	data []byte // the input of NewBytesReader
}

// NewReader returns a Reader reading from r. It buffers what it reads in a
// 4 KiB buffer (growing for long lines up to Limits.Line) that it shares
// with other Readers whenever it holds no unread input, so a Reader used
// for one call to Next and then dropped costs no buffer.
func NewReader(r io.Reader) *Reader { return &Reader{src: r} }

// NewBytesReader returns a Reader reading data, which it parses in place:
// no buffer and no copy besides what the envelopes keep. Use it when the
// input is already in memory (a request body, a file read whole, a
// clipboard). data must not change while the Reader is in use; the
// envelopes returned do not refer to it.
func NewBytesReader(data []byte) *Reader { return &Reader{data: data} }

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
		line = bytes.TrimPrefix(line, []byte("\ufeff")) // BOM (docs/design.md §3.1)
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
		if r.src == nil {
			r.sc.initBytes(r.data, r.limits().Line)
			r.data = nil
		} else {
			r.sc.init(r.src, r.limits().Line)
		}
	}
	e, err := r.next()
	if r.sc.pooled != nil && r.sc.start == r.sc.end && !r.hasPend {
		r.sc.release() // nothing unread: let another Reader use the buffer
	}
	return e, err
}

func (r *Reader) next() (*Envelope, error) {
	for {
		line, long, no, ok := r.readLine()
		if !ok {
			r.err = io.EOF
			if r.sc.err != nil {
				r.err = r.sc.err
			}
			r.sc.release()
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
		content = trimInvisiblePrefix(content)
		if !maybeHeader(content) {
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
		if !validUTF8(content) {
			return st.abort(syntaxErr(CodeFormat, no, 0, "header is not valid UTF-8"))
		}
		return st.read(h, content)
	}
}

// invisiblePrefixes are the characters a chat UI, an editor or a
// concatenation leaves at the start of a line without showing them: a BOM,
// a zero-width space, non-joiner or joiner, a word joiner, and the
// left-to-right and right-to-left marks of bidirectional text.
var invisiblePrefixes = [...]string{"\ufeff", "\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u2060"}

// trimInvisiblePrefix drops invisiblePrefixes from the start of line, so
// that a header after one is found (docs/format.md §1). Lines that do not
// start with 0xEF or 0xE2 return at once.
func trimInvisiblePrefix(line []byte) []byte {
	for len(line) >= 3 && (line[0] == 0xef || line[0] == 0xe2) {
		n := len(line)
		for _, p := range invisiblePrefixes {
			line = bytes.TrimPrefix(line, []byte(p))
		}
		if len(line) == n {
			break
		}
	}
	return line
}

// stripQuote removes one level of "> " quoting (docs/design.md §3.1).
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
	rest := trimBlanksRight(line[n:])
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
	from, to []byte // sub-slices of the line
	detail   string
}

func (h header) err(line int) *SyntaxError {
	if h.kind == headerBadVersion {
		return syntaxErr(CodeUnsupported, line, 0, "unsupported envelope version %s (only v1 is defined)", h.detail)
	}
	return syntaxErr(CodeFormat, line, 0, "malformed header: %s", h.detail)
}

var arrows = []string{"→", "->", "=>"}

// maybeHeader is parseHeader's first test, cheap enough to inline: lines
// that fail it are not headers.
func maybeHeader(line []byte) bool { return len(line) >= 5 && line[0] == '[' && line[1] == '[' }

// parseHeader recognises `[[SENDER→RECEIVER vN]]` (docs/design.md §3.1). Lines that
// do not have that shape at all are notHeader; lines that have it but a bad
// part are headerMalformed or headerBadVersion, so that a broken envelope is
// reported rather than skipped.
func parseHeader(line []byte) header {
	if !maybeHeader(line) {
		return header{} // the common case: not even a candidate
	}
	t := line
	for k := headerBlankSuffix(t); k > 0; k = headerBlankSuffix(t) {
		t = t[:len(t)-k]
	}
	if len(t) < 5 || t[len(t)-1] != ']' || t[len(t)-2] != ']' {
		return header{}
	}
	inner := t[2 : len(t)-2]
	ai, alen := indexArrow(inner)
	if ai < 0 {
		return header{}
	}
	sp, k := len(inner), 0 // the blank before the version is inner[sp-k:sp]
	for sp > 0 {
		if k = headerBlankSuffix(inner[:sp]); k > 0 {
			break
		}
		sp--
	}
	if k == 0 || sp-k < ai+alen {
		return header{} // no version: not a header (docs/format.md §2)
	}
	ver := inner[sp:]
	if len(ver) < 2 || ver[0] != 'v' && ver[0] != 'V' {
		return header{}
	}
	h := header{from: trimSpace(inner[:ai]), to: trimSpace(inner[ai+alen : sp-k])}
	if len(ver) != 2 || ver[1] != '1' { // anything but the usual "v1"
		major, minor, hasMinor := strings.Cut(string(ver[1:]), ".")
		n, err := strconv.Atoi(major)
		if err != nil || n < 0 || strings.HasPrefix(major, "+") || hasMinor && !isDigits(minor) {
			h.kind, h.detail = headerMalformed, "bad version "+strconv.Quote(string(ver))
			return h
		}
		if n != 1 {
			h.kind, h.detail = headerBadVersion, string(ver)
			return h
		}
	}
	switch {
	case len(h.from) == 0:
		h.kind, h.detail = headerMalformed, "empty sender"
	case len(h.to) == 0:
		h.kind, h.detail = headerMalformed, "empty receiver"
	case hasBrackets(h.from) || hasBrackets(h.to):
		h.kind, h.detail = headerMalformed, "brackets inside an address"
	case indexArrowAt(h.to) >= 0:
		h.kind, h.detail = headerMalformed, "more than one arrow"
	default:
		h.kind = headerOK
	}
	return h
}

// trimSpace is bytes.TrimSpace, answered without the call when b starts
// and ends with a printable ASCII byte (no space, ASCII or Unicode,
// starts or ends with one), as a sender and a receiver do.
func trimSpace(b []byte) []byte {
	if len(b) > 0 && b[0]-0x21 < 0x7f-0x21 && b[len(b)-1]-0x21 < 0x7f-0x21 {
		return b
	}
	return bytes.TrimSpace(b)
}

// headerBlankSuffix returns the length of the blank that ends b, or 0.
// In a header a blank is a space, a tab, or the no-break spaces U+00A0
// and U+202F that rich-text chat UIs and editors put in place of spaces
// (docs/format.md §2): a header spaced with them is found, not skipped
// as chat text.
func headerBlankSuffix(b []byte) int {
	n := len(b)
	switch {
	case n == 0:
		return 0
	case b[n-1] == ' ' || b[n-1] == '\t':
		return 1
	case n >= 2 && b[n-2] == 0xc2 && b[n-1] == 0xa0:
		return 2
	case n >= 3 && b[n-3] == 0xe2 && b[n-2] == 0x80 && b[n-1] == 0xaf:
		return 3
	}
	return 0
}

func hasBrackets(b []byte) bool {
	for i := 1; i < len(b); i++ {
		if (b[i] == '[' || b[i] == ']') && b[i-1] == b[i] {
			return true
		}
	}
	return false
}

// indexArrow returns the position and length of the first arrow (→, -> or
// =>, the arrows list) in b, or -1.
func indexArrow(b []byte) (int, int) {
	i := indexArrowAt(b)
	if i < 0 {
		return -1, 0
	}
	if b[i] == 0xE2 {
		return i, len("→")
	}
	return i, 2
}

func indexArrowAt(b []byte) int {
	for i := 0; i+1 < len(b); i++ {
		switch b[i] {
		case '-', '=':
			if b[i+1] == '>' {
				return i
			}
		case 0xE2: // "→" is E2 86 92
			if i+2 < len(b) && b[i+1] == 0x86 && b[i+2] == 0x92 {
				return i
			}
		}
	}
	return -1
}

// trimBlanks removes leading and trailing spaces and tabs (the blanks of
// docs/format.md), without the cutset set-up of bytes.Trim.
func trimBlanks(b []byte) []byte {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	return trimBlanksRight(b[i:])
}

// trimBlanksRight removes trailing spaces and tabs.
func trimBlanksRight(b []byte) []byte {
	n := len(b)
	for n > 0 && (b[n-1] == ' ' || b[n-1] == '\t') {
		n--
	}
	return b[:n]
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
	return string(trimBlanksRight(c)) == "[[END]]"
}
