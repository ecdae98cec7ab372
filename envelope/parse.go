package envelope

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"
)

var sigPrefix = []byte("sig:")

// isSigLine reports whether c starts with "sig:": as bytes.HasPrefix(c,
// sigPrefix), but compiled to one 4-byte comparison instead of a call,
// on the path of every field line.
func isSigLine(c []byte) bool { return len(c) >= 4 && string(c[:4]) == "sig:" }

type parseMode int

const (
	modeFields   parseMode = iota // top-level fields
	modeMeta                      // inside a META block
	modeBody                      // inside the body block
	modeAfterSig                  // after sig:, waiting for [[END]]
)

// The known top-level keys (docs/design.md §3.1). body and response share a slot.
const (
	keyUser = iota
	keySession
	keyThread
	keyParent
	keyMessage
	keyContext
	keyIntent
	keyBody
	keySig
	numKeys
)

func knownKey(k []byte) int {
	switch string(k) {
	case "user":
		return keyUser
	case "session":
		return keySession
	case "thread":
		return keyThread
	case "parent":
		return keyParent
	case "message":
		return keyMessage
	case "context":
		return keyContext
	case "intent":
		return keyIntent
	case "body", "response":
		return keyBody
	case "sig":
		return keySig
	}
	return -1
}

// span is a value kept in scratch.arena: arena[off:end].
type span struct{ off, end int32 }

type spanField struct{ key, val span }

type spanMeta struct {
	ns      span
	nFields int
}

// scratch holds what an envelope is built from while it is read: where
// its body lines are in its source, and its field values copied into one
// arena that becomes one string when the envelope is complete (so an
// envelope with twenty fields costs one allocation for them, not twenty).
// It is taken from scratchPool for one envelope and given back when Next
// returns, whatever the Reader does next.
type scratch struct {
	body       []span // the body's lines in the source, indent removed
	arena      []byte
	fields     []spanField // unknown top-level fields
	metas      []spanMeta
	metaFields []spanField // the fields of all META blocks, in order
}

var scratchPool = sync.Pool{New: func() any { return &scratch{body: make([]span, 0, 64), arena: make([]byte, 0, 512)} }}

// maxPooledScratch bounds the arena, and the body lines, of a scratch kept
// for reuse; larger ones are left to the garbage collector.
const maxPooledScratch = 64 << 10

func (sc *scratch) keep(b []byte) span {
	off := len(sc.arena)
	sc.arena = append(sc.arena, b...)
	return span{int32(off), int32(len(sc.arena))}
}

func (sc *scratch) str(sp span) string { return string(sc.arena[sp.off:sp.end]) }

func (sc *scratch) release() {
	if cap(sc.body) > maxPooledScratch/8 || cap(sc.arena) > maxPooledScratch {
		return
	}
	sc.body, sc.arena = sc.body[:0], sc.arena[:0]
	sc.fields, sc.metas, sc.metaFields = sc.fields[:0], sc.metas[:0], sc.metaFields[:0]
	scratchPool.Put(sc)
}

// envState reads one envelope after its header line.
type envState struct {
	r          *Reader
	lim        Limits
	quoted     bool
	spaced     bool // the header's quote prefix was "> ", not ">"
	fenceChar  byte
	fenceLen   int
	headerLine int

	sc       *scratch
	from, to span
	vals     [numKeys]span // values of the known keys (not the body)
	response bool          // the body came as `response: |`

	// The source: while every line of the envelope follows the previous
	// one in the scanner's buffer, LF-terminated and unquoted, and the
	// buffer holds the rest of the input (lineScanner.stable), it is
	// buf[srcOff:srcEnd] and nothing is copied; src is built only when that
	// stops being true.
	contig         bool
	srcOff, srcEnd int
	src            []byte
	cur            []byte // the line last added to the source by appendSrc, for srcOffset once the source is copied (not kept by run, whose lines are in the buffer)

	mode     parseMode
	bodyKeep int          // body lines up to the last non-blank one
	seen     [numKeys]int // line of each known key, 0 when not seen
}

// read parses the envelope whose header h stood in content.
func (st *envState) read(h header, content []byte) (*Envelope, error) {
	st.sc = scratchPool.Get().(*scratch)
	defer st.sc.release()
	st.from, st.to = st.sc.keep(h.from), st.sc.keep(h.to)
	if st.r.sc.stable() {
		st.contig = true
		st.srcOff = st.r.sc.offset(content)
		st.srcEnd = st.srcOff
	} else {
		st.src = make([]byte, 0, min(len(content)+1+st.r.sc.sizeHint(), st.lim.Envelope))
	}
	if err := st.appendSrc(content, st.headerLine); err != nil {
		return st.abort(err)
	}
	r := st.r
	for {
		if st.contig && !st.quoted && !r.hasPend && !r.sc.skipLF {
			if err := st.run(); err != nil {
				return st.abort(err)
			}
		}
		line, long, no, ok := r.readLine()
		if !ok {
			return st.finish(false)
		}
		c := line
		if st.quoted {
			if long || len(line) == 0 || line[0] != '>' {
				// The quote ends here, and so does the envelope.
				r.unread(line, long, no)
				return st.finish(false)
			}
			c = st.unquote(line)
		}
		if long {
			return st.abort(syntaxErr(CodeTooLarge, no, 0, "line longer than %d bytes", st.lim.Line))
		}
		// [[END]] starts with '[', not a fence's character, and has no
		// arrow: it is neither test below, and need not be parsed as a
		// header to find that out.
		end := isEnd(c)
		if !end && (st.endsFence(c) || maybeHeader(c) && parseHeader(c).kind != notHeader) {
			// The closing fence or a new header ends an envelope that
			// had no [[END]] (lenient mode, docs/design.md §3.1).
			r.unread(line, long, no)
			return st.finish(false)
		}
		if err := st.appendSrc(c, no); err != nil {
			if !utf8.Valid(c) {
				err = badUTF8(no) // what the line would have failed first
			}
			return st.abort(err)
		}
		if end {
			return st.finish(true)
		}
		if err := st.line(c, no, 1+len(line)-len(c)); err != nil {
			return st.abort(err)
		}
	}
}

// run is read's loop, in one pass and without the scanner, for the lines
// that follow in a buffer holding the rest of the input (st.contig,
// unquoted) and that can neither end the envelope nor be a header: not
// starting with '[' or the open fence's character. For those, read's
// quote, length, fence, header and [[END]] tests are all false and their
// source is the buffer itself; body lines that nothing but the body can
// claim (empty or indented) skip line too. It stops, leaving the line to
// read, at a CR (read's scanner handles the other line ends), at the end
// of the buffer, and at a line over the line or envelope size limit. It
// returns a line's error, which read reports.
func (st *envState) run() *SyntaxError {
	s := &st.r.sc
	buf := s.buf[:s.end]
	if cr := s.firstCR(); cr >= 0 {
		buf = buf[:cr]
	}
	if end := st.srcOff + st.lim.Envelope; end < len(buf) {
		buf = buf[:end] // a line whose LF is not before end is over the envelope limit
	}
	maxLine := s.maxLine
	for p := s.start; p < len(buf); {
		i := bytes.IndexByte(buf[p:], '\n')
		if i < 0 || i > maxLine {
			break
		}
		c := buf[p : p+i]
		if len(c) > 0 && (c[0] == '[' || st.fenceLen > 0 && c[0] == st.fenceChar) {
			break
		}
		off := p - st.srcOff
		p += i + 1
		s.start, s.line = p, s.line+1
		st.srcEnd = p
		if st.mode == modeBody && (len(c) == 0 || c[0] == ' ' || c[0] == '\t') {
			st.addBodyAt(c, off)
			continue
		}
		if err := st.line(c, s.line, 1); err != nil {
			return err
		}
	}
	return nil
}

// unquote removes the envelope's quote prefix from a line that starts with
// '>': "> " when the header had it (a bare ">" line is an empty line), else
// only ">". Taking the header's form for every line keeps body indents exact
// (">   x" is "  x" under "> ", ">  x" is "  x" under ">").
func (st *envState) unquote(line []byte) []byte {
	line = line[1:]
	if st.spaced && len(line) > 0 && line[0] == ' ' {
		line = line[1:]
	}
	return line
}

func (st *envState) endsFence(c []byte) bool {
	if st.fenceLen == 0 || len(c) == 0 || c[0] != st.fenceChar {
		return false
	}
	ch, n, closing := fenceLine(c)
	return closing && ch == st.fenceChar && n >= st.fenceLen
}

// appendSrc adds line c, LF-terminated, to the envelope's source.
func (st *envState) appendSrc(c []byte, no int) *SyntaxError {
	st.cur = c
	if st.contig {
		in := st.r.sc.buf
		off := st.r.sc.offset(c)
		if off == st.srcEnd && off+len(c) < len(in) && in[off+len(c)] == '\n' {
			if off+len(c)+1-st.srcOff > st.lim.Envelope {
				return syntaxErr(CodeTooLarge, no, 0, "envelope larger than %d bytes", st.lim.Envelope)
			}
			st.srcEnd = off + len(c) + 1
			return nil
		}
		// A quote prefix, a CR or the end of the input: copy from here on.
		st.contig = false
		st.src = append(make([]byte, 0, st.srcEnd-st.srcOff+len(c)+1+st.r.sc.sizeHint()), in[st.srcOff:st.srcEnd]...)
	}
	if len(st.src)+len(c)+1 > st.lim.Envelope {
		return syntaxErr(CodeTooLarge, no, 0, "envelope larger than %d bytes", st.lim.Envelope)
	}
	st.src = append(st.src, c...)
	st.src = append(st.src, '\n')
	return nil
}

// abort skips the rest of the envelope and returns err, or the error of
// an earlier line that is not valid UTF-8.
func (st *envState) abort(err *SyntaxError) (*Envelope, error) {
	if bad := st.checkUTF8(); bad != nil {
		err = bad
	}
	st.resync()
	return nil, err
}

// checkUTF8 returns an error naming the first line of the source read so
// far that is not valid UTF-8, or nil. Envelopes are UTF-8 (spec "File");
// replacing bad bytes would change what was signed and what the ledger
// keeps. The source is checked in one pass when the envelope ends rather
// than line by line; the error is the one a line-by-line check would have
// stopped at, since every line before the one that ended the envelope is
// in the source, one source line per input line.
func (st *envState) checkUTF8() *SyntaxError {
	src := st.src
	if st.contig {
		src = st.r.sc.buf[st.srcOff:st.srcEnd]
	}
	if validUTF8(src) {
		return nil
	}
	no := st.headerLine
	for len(src) > 0 { // LF is in no multi-byte sequence: some line is bad
		line, rest, _ := bytes.Cut(src, []byte{'\n'})
		if !utf8.Valid(line) {
			break
		}
		src, no = rest, no+1
	}
	return badUTF8(no)
}

func badUTF8(line int) *SyntaxError {
	return syntaxErr(CodeFormat, line, 0, "line is not valid UTF-8")
}

// resync skips to the end of a malformed envelope: a column-0 [[END]]
// (consumed), or a header, closing fence or end of quote (left for the
// next call).
func (st *envState) resync() {
	r := st.r
	for {
		line, long, no, ok := r.readLine()
		if !ok {
			return
		}
		c := line
		if st.quoted {
			if long || len(line) == 0 || line[0] != '>' {
				r.unread(line, long, no)
				return
			}
			c = st.unquote(line)
		}
		if long {
			continue
		}
		if isEnd(c) {
			return
		}
		if st.endsFence(c) || maybeHeader(c) && parseHeader(c).kind != notHeader {
			r.unread(line, long, no)
			return
		}
	}
}

// line handles one line of the envelope between header and [[END]].
func (st *envState) line(c []byte, no, col int) *SyntaxError {
	switch st.mode {
	case modeBody:
		if len(c) == 0 || c[0] == ' ' || c[0] == '\t' {
			st.addBody(c)
			return nil
		}
		if isSigLine(c) {
			st.mode = modeFields
			return st.known(keySig, sigPrefix[:3], trimBlanks(c[4:]), no, col)
		}
		if key, _, ok := topField(c); !ok || knownKey(key) < 0 {
			// Column-0 text that is not a known key is body text
			// (docs/design.md §3.1).
			st.addBody(c)
			return nil
		}
		st.mode = modeFields
	case modeAfterSig:
		if isBlank(c) {
			return nil
		}
		return syntaxErr(CodeFormat, no, col, "text after the sig: line (only [[END]] may follow; lines after sig: are not signed)")
	}

	if isBlank(c) {
		if st.mode == modeMeta {
			st.mode = modeFields
		}
		return nil
	}
	if isSigLine(c) {
		// Any column-0 line starting with "sig:" is the sig line, with or
		// without a blank after the colon: the signed bytes end there
		// (docs/design.md §4.1), so the parser must end there too.
		return st.known(keySig, sigPrefix[:3], trimBlanks(c[4:]), no, col)
	}
	sc := st.sc
	if key, val, ok := topField(c); ok {
		if string(key) == "meta" {
			if len(val) == 0 {
				return syntaxErr(CodeFormat, no, col, "meta: needs a namespace")
			}
			if len(sc.metas) >= st.lim.MetaBlocks {
				return syntaxErr(CodeTooLarge, no, col, "more than %d META blocks", st.lim.MetaBlocks)
			}
			sc.metas = append(sc.metas, spanMeta{ns: sc.keep(val)})
			st.mode = modeMeta
			return nil
		}
		if k := knownKey(key); k >= 0 {
			st.mode = modeFields
			return st.known(k, key, val, no, col)
		}
		if st.mode == modeMeta {
			return st.addMeta(key, val, no, col)
		}
		if len(sc.fields) >= st.lim.Fields {
			return syntaxErr(CodeTooLarge, no, col, "more than %d unknown fields", st.lim.Fields)
		}
		sc.fields = append(sc.fields, spanField{sc.keep(key), sc.keep(val)})
		return nil
	}
	if key, val, ok := metaField(c); ok {
		if st.mode == modeMeta {
			return st.addMeta(key, val, no, col)
		}
		return syntaxErr(CodeFormat, no, col, "field key %q is not lower case (META keys belong in a meta: block)", key)
	}
	if st.mode == modeMeta {
		return syntaxErr(CodeFormat, no, col, "malformed META line: want `Key: value`")
	}
	return syntaxErr(CodeFormat, no, col, "malformed field: want `key: value`")
}

func (st *envState) addMeta(key, val []byte, no, col int) *SyntaxError {
	sc := st.sc
	m := &sc.metas[len(sc.metas)-1]
	if m.nFields >= st.lim.Fields {
		return syntaxErr(CodeTooLarge, no, col, "more than %d fields in META block %q", st.lim.Fields, sc.str(m.ns))
	}
	m.nFields++
	sc.metaFields = append(sc.metaFields, spanField{sc.keep(key), sc.keep(val)})
	return nil
}

func (st *envState) known(k int, key, val []byte, no, col int) *SyntaxError {
	if prev := st.seen[k]; prev != 0 {
		return syntaxErr(CodeFormat, no, col, "duplicate field %q (first on line %d)", key, prev)
	}
	st.seen[k] = no
	switch k {
	case keyBody:
		st.response = string(key) == "response"
		st.mode = modeBody
		switch string(val) {
		case "", "|", "|-", "|+":
		default:
			st.addBody(val) // inline body: its first line
		}
	case keySig:
		st.vals[k] = st.sc.keep(val)
		st.mode = modeAfterSig
	default:
		st.vals[k] = st.sc.keep(val)
	}
	return nil
}

// addBody adds c, the line last added to the source or a part of it, to
// the body.
func (st *envState) addBody(c []byte) {
	off := 0
	if len(c) > 0 {
		off = st.srcOffset(c)
	}
	st.addBodyAt(c, off)
}

// addBodyAt adds c, which starts at off in the source, to the body.
func (st *envState) addBodyAt(c []byte, off int) {
	if len(c) >= 2 && c[0] == ' ' && c[1] == ' ' {
		c = c[2:] // one two-space indent (docs/design.md §3.1); anything else verbatim
		off += 2
	}
	st.sc.body = append(st.sc.body, span{int32(off), int32(off + len(c))})
	if !isBlank(c) {
		st.bodyKeep = len(st.sc.body)
	}
}

// srcOffset returns where x, a non-empty part of the line last added to
// the source, starts in the source. Lines are sub-slices of the scanner's
// buffer that keep its capacity, so capacities give positions.
func (st *envState) srcOffset(x []byte) int {
	if st.contig {
		return st.r.sc.offset(x) - st.srcOff
	}
	return len(st.src) - 1 - len(st.cur) + cap(st.cur) - cap(x)
}

// smallEnvelope is the source size up to which an envelope's body and field
// values share one string and its Envelope, META blocks and fields one
// allocation: a third of the allocations of a typical envelope. Sharing
// means a value kept keeps the others alive, so larger envelopes, whose
// body may be a megabyte, keep them apart.
const smallEnvelope = 4 << 10

// srcLen returns the length of the source read so far.
func (st *envState) srcLen() int {
	if st.contig {
		return st.srcEnd - st.srcOff
	}
	return len(st.src)
}

// bodyLen returns the body lines up to the last non-blank one and the
// length of the body they make, LF-joined.
func (st *envState) bodyLen() ([]span, int) {
	lines := st.sc.body[:st.bodyKeep]
	n := 0
	if len(lines) > 0 {
		n = len(lines) - 1
	}
	for _, l := range lines {
		n += int(l.end - l.off)
	}
	return lines, n
}

// packed returns, for a small envelope whose source is still in the
// scanner's buffer (st.contig), a copy of the source, the body and the
// field arena in one allocation instead of two: the source first, its
// capacity cut to its length, then the body, then the arena, the last two
// as one string over the rest of the allocation.
//
// That string is made with unsafe.String, whose rule is that the bytes
// under it are never modified while it lives: they are written here,
// before it is made, and nothing else can reach them — buf does not
// escape, and the only slice of it handed out, the source, ends where the
// body begins and has no spare capacity, so even an append to Source()
// (which its contract forbids modifying) copies rather than writes past
// it. TestPackedSourceIsolated checks this.
func (st *envState) packed() (src []byte, body, arena string) {
	in := st.r.sc.buf[st.srcOff:st.srcEnd]
	lines, n := st.bodyLen()
	buf := make([]byte, 0, len(in)+n+len(st.sc.arena))
	buf = append(buf, in...)
	for i, l := range lines {
		if i > 0 {
			buf = append(buf, '\n')
		}
		buf = append(buf, in[l.off:l.end]...)
	}
	buf = append(buf, st.sc.arena...)
	src = buf[:len(in):len(in)]
	tail := buf[len(in):]
	if len(tail) == 0 {
		return src, "", ""
	}
	s := unsafe.String(unsafe.SliceData(tail), len(tail))
	return src, s[:n], s[n:]
}

// strings returns the body, joined from the body lines kept in src, and
// the field arena as one string (the values' spans index it). When shared,
// both are parts of one string.
func (st *envState) strings(src []byte, shared bool) (body, arena string) {
	lines, n := st.bodyLen()
	if !shared {
		return st.join(src, lines, n, 0), string(st.sc.arena)
	}
	s := st.join(src, lines, n, len(st.sc.arena))
	return s[:n], s[n:]
}

// join returns the body lines of src joined with LF, followed by the
// first extra bytes of the field arena; n is the length of the body.
func (st *envState) join(src []byte, lines []span, n, extra int) string {
	if n+extra == 0 {
		return ""
	}
	var b strings.Builder
	b.Grow(n + extra)
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.Write(src[l.off:l.end])
	}
	b.Write(st.sc.arena[:extra])
	return b.String()
}

// allocEnvelope returns a new Envelope, and room for its META blocks and
// all its fields: when small, in the Envelope's own allocation if they
// are few (sized so that the one allocation is at most 48 bytes larger
// than the three it replaces).
func allocEnvelope(metas, fields int, small bool) (*Envelope, []Meta, []Field) {
	switch {
	case metas == 0 && fields == 0:
		return new(Envelope), nil, nil
	case small && metas <= 1 && fields <= 4:
		p := new(struct {
			e Envelope
			m [1]Meta
			f [4]Field
		})
		return &p.e, p.m[:metas:metas], p.f[:fields:fields]
	case small && metas <= 2 && fields <= 6:
		p := new(struct {
			e Envelope
			m [2]Meta
			f [6]Field
		})
		return &p.e, p.m[:metas:metas], p.f[:fields:fields]
	}
	return new(Envelope), make([]Meta, metas), make([]Field, fields)
}

// finish checks the envelope read so far and returns it.
func (st *envState) finish(complete bool) (*Envelope, error) {
	if err := st.checkUTF8(); err != nil {
		return nil, err
	}
	line := st.headerLine
	if !complete && st.r.Strict {
		return nil, syntaxErr(CodeFormat, line, 0, "envelope not terminated: missing [[END]]")
	}
	if st.seen[keyBody] == 0 {
		return nil, syntaxErr(CodeFormat, line, 0, "missing body (want `body: |`)")
	}
	sc := st.sc
	intent := sc.arena[st.vals[keyIntent].off:st.vals[keyIntent].end]
	if len(intent) == 0 && !st.response {
		return nil, syntaxErr(CodeFormat, line, 0, "missing intent")
	}
	ids := [...]int{keyThread, keyParent, keyMessage}
	var badID [len(ids)]bool
	for i, k := range ids {
		if v := sc.arena[st.vals[k].off:st.vals[k].end]; len(v) > 0 && !isIDBytes(v) && !isIDBytes([]byte(nfc(string(v)))) {
			if st.r.Strict {
				return nil, syntaxErr(CodeFormat, st.seen[k], 0, "%s", badIDMsg(k, string(v)))
			}
			badID[i] = true
		}
	}
	from, to := sc.arena[st.from.off:st.from.end], sc.arena[st.to.off:st.to.end]
	var badAddr [2]string
	for i, a := range [...][]byte{from, to} {
		if isPlainName(a) {
			continue // the common case, and a valid name (ParseAddress)
		}
		// Classified in NFC; one NormalizeIdentifier refuses is E-ADDRESS
		// below (NormalizeIdentifiers), not a bad address.
		n, err := NormalizeIdentifier(string(a))
		if err != nil {
			continue
		}
		var ae *AddressError
		if _, err := ParseAddress(n); errors.As(err, &ae) {
			msg := ae.Detail()
			if st.r.Strict {
				return nil, syntaxErr(CodeFormat, line, 0, "%s", msg)
			}
			badAddr[i] = msg
		}
	}

	// Everything checked: build the envelope.
	var src []byte
	var body, a string
	small := st.srcLen() <= smallEnvelope
	switch {
	case st.contig && small:
		src, body, a = st.packed()
	case st.contig:
		src = make([]byte, st.srcEnd-st.srcOff)
		copy(src, st.r.sc.buf[st.srcOff:st.srcEnd])
		body, a = st.strings(src, false)
	default:
		src = st.src
		body, a = st.strings(src, small)
	}
	get := func(sp span) string { return a[sp.off:sp.end] }
	nFields, nMeta := len(sc.fields), len(sc.metas)
	env, metas, fields := allocEnvelope(nMeta, nFields+len(sc.metaFields), small)
	// Field by field into the new (zeroed) Envelope: a composite literal
	// would be built on the stack and copied over it whole.
	env.From, env.To, env.Version, env.Line, env.Complete = get(st.from), get(st.to), 1, line, complete
	env.User, env.Session = get(st.vals[keyUser]), get(st.vals[keySession])
	// Ids and the intent in NFC, as they are signed (docs/signing.md §1):
	// a KELVIN SIGN for the K of a signed ULID must not make the same
	// signed envelope another message.
	env.Thread, env.Parent, env.Message = nfc(get(st.vals[keyThread])), nfc(get(st.vals[keyParent])), nfc(get(st.vals[keyMessage]))
	env.Context, env.Sig = get(st.vals[keyContext]), get(st.vals[keySig])
	env.ResponseForm, env.Body, env.source = st.response, body, src
	if len(intent) == 0 {
		env.Intent = IntentRespond // v1.0 answer form (docs/design.md §3.1)
	} else {
		in, legacy, known := NormalizeIntent(nfc(get(st.vals[keyIntent])))
		if !known {
			env.warnings = append(env.warnings, "unknown intent "+quote(in))
		}
		env.Intent, env.LegacyIntent = in, legacy
	}
	for i, k := range ids {
		if badID[i] {
			env.warnings = append(env.warnings, badIDMsg(k, get(st.vals[k])))
		}
	}
	for _, msg := range badAddr {
		if msg != "" {
			env.warnings = append(env.warnings, msg)
		}
	}
	for i, f := range sc.fields {
		fields[i] = Field{Key: get(f.key), Value: get(f.val)}
	}
	if nFields > 0 {
		env.Fields = fields[:nFields:nFields]
	}
	fields = fields[nFields:]
	for i, f := range sc.metaFields {
		fields[i] = Field{Key: get(f.key), Value: get(f.val)}
	}
	for i, m := range sc.metas {
		metas[i] = Meta{Namespace: get(m.ns), Fields: fields[:m.nFields:m.nFields]}
		fields = fields[m.nFields:]
	}
	if nMeta > 0 {
		env.Meta = metas
	}
	if err := env.NormalizeIdentifiers(); err != nil { // ident.go
		return nil, err
	}
	return env, nil
}

func badIDMsg(k int, v string) string {
	return idName(k) + " " + quote(v) + " is neither a ULID nor a UUIDv7"
}

func idName(k int) string {
	switch k {
	case keyThread:
		return "thread"
	case keyParent:
		return "parent"
	}
	return "message"
}

// keyClass marks, for each byte, the keys it may stand in: bits of
// topKeyChar, metaKeyFirst and metaKeyChar. A line's key is looked up in
// it byte by byte rather than tested against ranges: every field line of
// every envelope goes through topField, and META lines through metaField.
var keyClass = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		lower, upper, digit := 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9'
		if lower || digit || c == '_' || c == '-' {
			t[c] |= topKeyChar
		}
		if lower || upper || digit {
			t[c] |= metaKeyFirst | metaKeyChar
		}
		if c == '_' || c == '.' || c == '-' {
			t[c] |= metaKeyChar
		}
	}
	return t
}()

const (
	topKeyChar   = 1 << iota // [a-z0-9_-], after a top-level key's first letter
	metaKeyFirst             // [A-Za-z0-9], a META key's first character
	metaKeyChar              // [A-Za-z0-9_.-], a META key's other characters
)

// topField splits a top-level `key: value` line: key is [a-z][a-z0-9_-]*
// and the colon is followed by a blank or the end of the line
// (docs/format.md §3). The value is trimmed; it is nil when ok is false.
func topField(c []byte) (key, val []byte, ok bool) {
	if len(c) == 0 || c[0] < 'a' || c[0] > 'z' {
		return nil, nil, false
	}
	i := 1
	for i < len(c) && keyClass[c[i]]&topKeyChar != 0 {
		i++
	}
	key, val, ok = splitAt(c, i)
	return key, trimBlanks(val), ok
}

// metaField splits a META `Key: value` line: Key is [A-Za-z0-9][A-Za-z0-9_.-]*.
func metaField(c []byte) (key, val []byte, ok bool) {
	if len(c) == 0 || keyClass[c[0]]&metaKeyFirst == 0 {
		return nil, nil, false
	}
	i := 1
	for i < len(c) && keyClass[c[i]]&metaKeyChar != 0 {
		i++
	}
	key, val, ok = splitAt(c, i)
	return key, trimBlanks(val), ok
}

// splitAt splits c into the key c[:i] and what follows the colon at c[i],
// which must be a blank or the end of the line. It is small enough to be
// inlined into topField and metaField, which trim the value.
func splitAt(c []byte, i int) (key, rest []byte, ok bool) {
	if i >= len(c) || c[i] != ':' || i+1 < len(c) && c[i+1] != ' ' && c[i+1] != '\t' {
		return nil, nil, false
	}
	return c[:i], c[i+1:], true
}

func isBlank(c []byte) bool {
	for _, b := range c {
		if b != ' ' && b != '\t' {
			return false
		}
	}
	return true
}
