package mail

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	netmail "net/mail"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/transports"
)

// SubjectPrefix starts the subject of every mail the Sender writes
// (spec "Transport Bindings: Email", docs/design.md §5.5).
const SubjectPrefix = "[AI Crosstalk]"

// maxHeaderText bounds the context and intent copied into a Subject, in
// runes; longer values are cut and end in "…".
const maxHeaderText = 200

// maxReferences bounds the References header of a reply.
const maxReferences = 20

// outgoing is one mail to write.
type outgoing struct {
	to   *netmail.Address
	text []byte
	// id is the envelope message id the Message-ID is made from.
	id string
	// context and intent make the Subject.
	context, intent string
	// inReplyTo is a full "<…>" msg-id, or "".
	inReplyTo  string
	references []string
	// autoReplied marks a reply the Receiver sends by itself (RFC 3834),
	// which the far Receiver then never answers: no mail loops.
	autoReplied bool
	date        time.Time
}

// fromText fills id, context, intent and the parent reference of o from
// the first envelope in o.text. It fails when the text holds no envelope.
func (o *outgoing) fromText(host string) error {
	r := envelope.NewReader(bytes.NewReader(o.text))
	for {
		e, err := r.Next()
		if err != nil {
			var se *envelope.SyntaxError
			if errors.As(err, &se) {
				continue
			}
			return fmt.Errorf("mail: %w: the text holds no envelope", transports.ErrPermanent)
		}
		if o.id == "" {
			o.id = e.Message
		}
		o.context, o.intent = e.Context, e.Intent
		if o.inReplyTo == "" && e.Parent != "" {
			o.inReplyTo = msgID(e.Parent, host)
			o.references = []string{o.inReplyTo}
		}
		return nil
	}
}

// parseRecipient turns an address into a mail address: "email:a@b",
// "mailto:a@b?subject=x" and bare "a@b" or "Name <a@b>" (docs/design.md §3.3).
// Anything else is a permanent error.
func parseRecipient(to string) (*netmail.Address, error) {
	s := strings.TrimSpace(to)
	if strings.ContainsFunc(s, isControl) {
		return nil, fmt.Errorf("mail: %w: address %q holds control characters", transports.ErrPermanent, to)
	}
	for _, scheme := range []string{"email:", "mailto:"} {
		if len(s) >= len(scheme) && strings.EqualFold(s[:len(scheme)], scheme) {
			s = strings.TrimPrefix(s[len(scheme):], "//")
			if i := strings.IndexByte(s, '?'); i >= 0 {
				s = s[:i] // spec: email:user@domain.com?subject=…
			}
		}
	}
	a, err := netmail.ParseAddress(s)
	if err != nil {
		return nil, fmt.Errorf("mail: %w: address %q: %v", transports.ErrPermanent, to, err)
	}
	if err := checkPath(a.Address); err != nil {
		return nil, fmt.Errorf("mail: %w: address %q: %v", transports.ErrPermanent, to, err)
	}
	return a, nil
}

// checkPath refuses an address that cannot be written as it is between
// the angle brackets of an SMTP MAIL or RCPT command (RFC 5321 §4.1.2):
// its local part must be a dot-atom (UTF-8 allowed, RFC 6531), its domain
// a dot-atom or an address literal. net/mail unquotes a quoted local part,
// so `"victim@other.test> ORCPT=rfc822;x"@evil.test` parses to an address
// that, written into "RCPT TO:<…>", names victim@other.test as the
// recipient and turns the rest into a parameter: a mail to a third party.
func checkPath(addr string) error {
	i := strings.LastIndexByte(addr, '@')
	if i < 0 {
		return errors.New("no @ in the address")
	}
	local, domain := addr[:i], addr[i+1:]
	if !isDotAtomText(local) {
		return errors.New("the local part is not a plain dot-atom (a quoted local part is not accepted)")
	}
	if isDotAtomText(domain) {
		return nil
	}
	if len(domain) > 2 && domain[0] == '[' && domain[len(domain)-1] == ']' {
		ok := true
		for _, c := range []byte(domain[1 : len(domain)-1]) {
			// dtext: printable ASCII but "[", "]" and "\".
			if c < 33 || c > 126 || c == '[' || c == ']' || c == '\\' {
				ok = false
			}
		}
		if ok {
			return nil
		}
	}
	return errors.New("the domain is neither a dot-atom nor an address literal")
}

// isDotAtomText reports RFC 5322 dot-atom-text, where non-ASCII
// UTF-8 characters count as atext (RFC 6532 §3.2).
func isDotAtomText(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.':
		case r < utf8.RuneSelf && strings.ContainsRune("!#$%&'*+-/=?^_`{|}~", r):
		case r >= utf8.RuneSelf && !isControl(r) && unicode.IsGraphic(r):
		default:
			return false
		}
	}
	return true
}

// compose writes the mail: headers, a blank line, and the text verbatim
// as a quoted-printable text/plain body, CRLF line ends throughout.
//
// Quoted-printable, always: it keeps every byte of the envelope through
// any relay (long lines are soft-broken and rejoined, trailing blanks —
// which signed lines keep, docs/design.md §4.2 — are encoded, "From " lines
// cannot be mangled), so a signed envelope verifies after the trip.
func compose(from *netmail.Address, host string, o *outgoing) []byte {
	var b bytes.Buffer
	header := func(name, value string) {
		b.WriteString(fold(name + ": " + value))
		b.WriteString("\r\n")
	}
	date := o.date
	if date.IsZero() {
		date = time.Now()
	}
	header("From", from.String())
	header("To", o.to.String())
	header("Subject", subject(o.context, o.intent))
	header("Date", date.Format(time.RFC1123Z))
	header("Message-ID", msgID(o.id, host))
	if o.inReplyTo != "" {
		header("In-Reply-To", o.inReplyTo)
	}
	if len(o.references) > 0 {
		refs := o.references
		if len(refs) > maxReferences {
			refs = append(refs[:1:1], refs[len(refs)-maxReferences+1:]...)
		}
		header("References", strings.Join(refs, " "))
	}
	if o.autoReplied {
		header("Auto-Submitted", "auto-replied")
	}
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	qp.Write(o.text) // writes to a bytes.Buffer cannot fail
	qp.Close()
	if !bytes.HasSuffix(b.Bytes(), []byte("\r\n")) {
		b.WriteString("\r\n")
	}
	return b.Bytes()
}

// subject is "[AI Crosstalk] <context> - <intent>", with both values
// sanitized and, when not plain ASCII, RFC 2047 Q-encoded. Without a
// context it is "[AI Crosstalk] <intent>".
func subject(context, intent string) string {
	c, i := headerText(context), headerText(intent)
	if i == "" {
		i = "(no intent)"
	}
	if c == "" {
		return SubjectPrefix + " " + i
	}
	return SubjectPrefix + " " + c + " - " + i
}

// headerText makes an untrusted value safe for an unstructured header:
// every control character (CR and LF included, and the Unicode line and
// paragraph separators) becomes a space, runs of spaces collapse, the
// value is cut to maxHeaderText runes, and anything not plain printable
// ASCII — or that looks like an encoded word — is Q-encoded. The result
// can never end the header or start another one.
func headerText(s string) string {
	s = oneLine(s)
	if s == "" {
		return ""
	}
	if strings.Contains(s, "=?") {
		// Text that looks like an encoded word would be decoded by the
		// reader's client: encode it, so it reads back literally.
		return qEncode(s)
	}
	// QEncoding leaves plain printable ASCII alone and splits anything
	// else into encoded words of at most 75 characters, separated by
	// spaces that decoders drop (RFC 2047 §6.2) and fold may break at.
	return mime.QEncoding.Encode("utf-8", s)
}

// qEncode always encodes s as RFC 2047 Q encoded words (mime.QEncoding
// leaves ASCII text alone), each at most 75 characters, never splitting a
// UTF-8 sequence.
func qEncode(s string) string {
	const open, end = "=?utf-8?q?", "?="
	var b, w strings.Builder
	flush := func() {
		if w.Len() == 0 {
			return
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(open + w.String() + end)
		w.Reset()
	}
	for _, r := range s {
		var enc strings.Builder
		var buf [utf8.UTFMax]byte
		for _, c := range buf[:utf8.EncodeRune(buf[:], r)] {
			switch {
			case c == ' ':
				enc.WriteByte('_')
			case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!*+-/", c) >= 0:
				enc.WriteByte(c)
			default:
				fmt.Fprintf(&enc, "=%02X", c)
			}
		}
		if len(open)+w.Len()+enc.Len()+len(end) > 75 {
			flush()
		}
		w.WriteString(enc.String())
	}
	flush()
	return b.String()
}

// oneLine makes s one line of printable text: control characters (CR and
// LF included) become spaces, runs of spaces collapse, invalid UTF-8 is
// replaced, and the result is cut to maxHeaderText runes.
func oneLine(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if isControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > maxHeaderText {
		s = string([]rune(s)[:maxHeaderText-1]) + "…"
	}
	return s
}

// isControl reports characters that must never reach a header verbatim.
func isControl(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029'
}

// fold folds a header line at spaces so that no line exceeds 78
// characters where possible (RFC 5322 §2.2.3); a line without spaces is
// left long (still far below the 998 limit, as values are bounded).
func fold(line string) string {
	const max = 78
	if len(line) <= max {
		return line
	}
	var b strings.Builder
	for len(line) > max {
		i := strings.LastIndexByte(line[:max], ' ')
		if i <= 0 {
			i = strings.IndexByte(line[max:], ' ')
			if i < 0 {
				break
			}
			i += max
		}
		b.WriteString(line[:i])
		b.WriteString("\r\n")
		line = line[i:] // keeps the space: it starts the continuation line
	}
	b.WriteString(line)
	return b.String()
}

// msgID makes the Message-ID of an envelope id: "<id@host>". An id that
// is not a dot-atom (every ULID and UUID is) is replaced by a hash of it,
// so a hostile id can neither break the header nor forge another, and a
// retry still gets the same Message-ID.
func msgID(id, host string) string {
	if id == "" {
		id = envelope.NewID()
	}
	if !isDotAtom(id) {
		sum := sha256.Sum256([]byte(id))
		id = "sha256-" + hex.EncodeToString(sum[:16])
	}
	return "<" + id + "@" + host + ">"
}

// isDotAtom reports RFC 5322 dot-atom-text of at most 200 bytes.
func isDotAtom(s string) bool {
	if s == "" || len(s) > 200 || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("!#$%&'*+-/=?^_`{|}~.", c) >= 0) {
			return false
		}
	}
	return true
}

// cleanMsgID returns a received msg-id ("<left@right>") if it is safe to
// copy into our headers, or "".
func cleanMsgID(s string) string {
	s = strings.TrimSpace(s)
	if len(s) < 3 || len(s) > 250 || s[0] != '<' || s[len(s)-1] != '>' {
		return ""
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '<' || c == '>' {
			return ""
		}
	}
	return s
}

// msgIDList splits a References header into its safe msg-ids.
func msgIDList(s string) []string {
	var ids []string
	for {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			return ids
		}
		j := strings.IndexByte(s[i:], '>')
		if j < 0 {
			return ids
		}
		if id := cleanMsgID(s[i : i+j+1]); id != "" {
			ids = append(ids, id)
		}
		s = s[i+j+1:]
	}
}
