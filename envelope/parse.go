package envelope

import (
	"bytes"
	"unicode/utf8"
)

var sigPrefix = []byte("sig:")

type parseMode int

const (
	modeFields   parseMode = iota // top-level fields
	modeMeta                      // inside a META block
	modeBody                      // inside the body block
	modeAfterSig                  // after sig:, waiting for [[END]]
)

// The known top-level keys (DESIGN §3.1). body and response share a slot.
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

// envState reads one envelope after its header line.
type envState struct {
	r          *Reader
	lim        Limits
	quoted     bool
	spaced     bool // the header's quote prefix was "> ", not ">"
	fenceChar  byte
	fenceLen   int
	headerLine int

	env       *Envelope
	src       []byte
	mode      parseMode
	body      []byte
	bodyKeep  int // length of body up to the end of its last non-blank line
	bodyLines int
	seen      [numKeys]int // line of each known key, 0 when not seen
	failed    *SyntaxError
}

func (st *envState) fail(err *SyntaxError) { st.failed = err }

// read parses the envelope whose header h stood in content.
func (st *envState) read(h header, content []byte) (*Envelope, error) {
	st.env = &Envelope{From: h.from, To: h.to, Version: h.version, Line: st.headerLine}
	st.src = make([]byte, 0, min(len(content)+1+st.r.sc.sizeHint(), st.lim.Envelope))
	st.body = st.r.body[:0]
	defer func() { st.r.body = st.body[:0] }()
	if err := st.appendSrc(content, st.headerLine); err != nil {
		return st.abort(err)
	}
	r := st.r
	for {
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
		if st.endsFence(c) || parseHeader(c).kind != notHeader {
			// The closing fence or a new header ends an envelope that
			// had no [[END]] (lenient mode, DESIGN §3.1).
			r.unread(line, long, no)
			return st.finish(false)
		}
		if !utf8.Valid(c) {
			// Envelopes are UTF-8 (spec "File"); replacing bad bytes would
			// change what was signed and what the ledger keeps.
			return st.abort(syntaxErr(CodeFormat, no, 0, "line is not valid UTF-8"))
		}
		if err := st.appendSrc(c, no); err != nil {
			return st.abort(err)
		}
		if isEnd(c) {
			return st.finish(true)
		}
		if err := st.line(c, no, 1+len(line)-len(c)); err != nil {
			return st.abort(err)
		}
	}
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
	if st.fenceLen == 0 {
		return false
	}
	ch, n, closing := fenceLine(c)
	return closing && ch == st.fenceChar && n >= st.fenceLen
}

func (st *envState) appendSrc(c []byte, no int) *SyntaxError {
	if len(st.src)+len(c)+1 > st.lim.Envelope {
		return syntaxErr(CodeTooLarge, no, 0, "envelope larger than %d bytes", st.lim.Envelope)
	}
	st.src = append(st.src, c...)
	st.src = append(st.src, '\n')
	return nil
}

// abort records err, skips the rest of the envelope and returns err.
func (st *envState) abort(err *SyntaxError) (*Envelope, error) {
	st.fail(err)
	st.resync()
	return nil, err
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
		if st.endsFence(c) || parseHeader(c).kind != notHeader {
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
		if bytes.HasPrefix(c, sigPrefix) {
			st.mode = modeFields
			return st.known(keySig, sigPrefix[:3], bytes.Trim(c[4:], " \t"), no, col)
		}
		if key, _, ok := topField(c); !ok || knownKey(key) < 0 {
			// Column-0 text that is not a known key is body text
			// (DESIGN §3.1).
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
	env := st.env
	if bytes.HasPrefix(c, sigPrefix) {
		// Any column-0 line starting with "sig:" is the sig line, with or
		// without a blank after the colon: the signed bytes end there
		// (DESIGN §4.1), so the parser must end there too.
		return st.known(keySig, sigPrefix[:3], bytes.Trim(c[4:], " \t"), no, col)
	}
	if key, val, ok := topField(c); ok {
		if string(key) == "meta" {
			if len(val) == 0 {
				return syntaxErr(CodeFormat, no, col, "meta: needs a namespace")
			}
			if len(env.Meta) >= st.lim.MetaBlocks {
				return syntaxErr(CodeTooLarge, no, col, "more than %d META blocks", st.lim.MetaBlocks)
			}
			env.Meta = append(env.Meta, Meta{Namespace: string(val), Fields: []Field{}})
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
		if len(env.Fields) >= st.lim.Fields {
			return syntaxErr(CodeTooLarge, no, col, "more than %d unknown fields", st.lim.Fields)
		}
		env.Fields = append(env.Fields, Field{Key: string(key), Value: string(val)})
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
	m := &st.env.Meta[len(st.env.Meta)-1]
	if len(m.Fields) >= st.lim.Fields {
		return syntaxErr(CodeTooLarge, no, col, "more than %d fields in META block %q", st.lim.Fields, m.Namespace)
	}
	m.Fields = append(m.Fields, Field{Key: string(key), Value: string(val)})
	return nil
}

func (st *envState) known(k int, key, val []byte, no, col int) *SyntaxError {
	if prev := st.seen[k]; prev != 0 {
		return syntaxErr(CodeFormat, no, col, "duplicate field %q (first on line %d)", key, prev)
	}
	st.seen[k] = no
	env := st.env
	v := string(val)
	switch k {
	case keyUser:
		env.User = v
	case keySession:
		env.Session = v
	case keyThread:
		env.Thread = v
	case keyParent:
		env.Parent = v
	case keyMessage:
		env.Message = v
	case keyContext:
		env.Context = v
	case keyIntent:
		env.Intent = v
	case keyBody:
		env.ResponseForm = string(key) == "response"
		st.mode = modeBody
		switch v {
		case "", "|", "|-", "|+":
		default:
			st.addBody(val) // inline body: its first line
		}
	case keySig:
		env.Sig = v
		st.mode = modeAfterSig
	}
	return nil
}

func (st *envState) addBody(c []byte) {
	if st.bodyLines > 0 {
		st.body = append(st.body, '\n')
	}
	st.bodyLines++
	if len(c) >= 2 && c[0] == ' ' && c[1] == ' ' {
		c = c[2:] // one two-space indent (DESIGN §3.1); anything else verbatim
	}
	st.body = append(st.body, c...)
	if !isBlank(c) {
		st.bodyKeep = len(st.body)
	}
}

// finish checks the envelope read so far and returns it.
func (st *envState) finish(complete bool) (*Envelope, error) {
	env := st.env
	env.Complete = complete
	line := st.headerLine
	if !complete && st.r.Strict {
		return nil, syntaxErr(CodeFormat, line, 0, "envelope not terminated: missing [[END]]")
	}
	if st.seen[keyBody] == 0 {
		return nil, syntaxErr(CodeFormat, line, 0, "missing body (want `body: |`)")
	}
	env.Body = string(st.body[:st.bodyKeep])
	if env.Intent == "" {
		if !env.ResponseForm {
			return nil, syntaxErr(CodeFormat, line, 0, "missing intent")
		}
		env.Intent = IntentRespond // v1.0 answer form (DESIGN §3.1)
	} else {
		intent, legacy, known := NormalizeIntent(env.Intent)
		if !known {
			env.warnings = append(env.warnings, "unknown intent "+quote(intent))
		}
		env.Intent, env.LegacyIntent = intent, legacy
	}
	ids := [...]struct {
		k   int
		val string
	}{{keyThread, env.Thread}, {keyParent, env.Parent}, {keyMessage, env.Message}}
	for _, id := range ids {
		if id.val == "" || IsID(id.val) {
			continue
		}
		msg := idName(id.k) + " " + quote(id.val) + " is neither a ULID nor a UUIDv7"
		if st.r.Strict {
			return nil, syntaxErr(CodeFormat, st.seen[id.k], 0, "%s", msg)
		}
		env.warnings = append(env.warnings, msg)
	}
	for _, a := range [...]string{env.From, env.To} {
		if _, err := ParseAddress(a); err != nil {
			msg := err.Error()[len("envelope: "):]
			if st.r.Strict {
				return nil, syntaxErr(CodeFormat, line, 0, "%s", msg)
			}
			env.warnings = append(env.warnings, msg)
		}
	}
	env.source = st.src
	if err := env.NormalizeIdentifiers(); err != nil { // ident.go
		return nil, err
	}
	return env, nil
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

// topField splits a top-level `key: value` line: key is [a-z][a-z0-9_-]*
// and the colon is followed by a blank or the end of the line
// (docs/format.md §3). The value is trimmed.
func topField(c []byte) (key, val []byte, ok bool) {
	if len(c) == 0 || c[0] < 'a' || c[0] > 'z' {
		return nil, nil, false
	}
	i := 1
	for i < len(c) && (c[i] >= 'a' && c[i] <= 'z' || c[i] >= '0' && c[i] <= '9' || c[i] == '_' || c[i] == '-') {
		i++
	}
	return splitAt(c, i)
}

// metaField splits a META `Key: value` line: Key is [A-Za-z0-9][A-Za-z0-9_.-]*.
func metaField(c []byte) (key, val []byte, ok bool) {
	i := 0
	for i < len(c) && (isAlnum(c[i]) || i > 0 && (c[i] == '_' || c[i] == '.' || c[i] == '-')) {
		i++
	}
	if i == 0 {
		return nil, nil, false
	}
	return splitAt(c, i)
}

func splitAt(c []byte, i int) (key, val []byte, ok bool) {
	if i >= len(c) || c[i] != ':' {
		return nil, nil, false
	}
	if i+1 < len(c) && c[i+1] != ' ' && c[i+1] != '\t' {
		return nil, nil, false
	}
	return c[:i], bytes.Trim(c[i+1:], " \t"), true
}

func isAlnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

func isBlank(c []byte) bool {
	for _, b := range c {
		if b != ' ' && b != '\t' {
			return false
		}
	}
	return true
}
