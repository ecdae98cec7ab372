package mail

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/emersion/go-smtp"
)

// What one answer of a server may hold. go-imap and go-smtp bound an
// answer only by time (30 s, or Options.Timeout, per answer), and read it
// whole into memory first: a server sending an endless line, or endless
// "250-" continuation lines, would grow the process for as long as that
// lasts, at the network's speed. These bounds end the connection with an
// error naming them instead.
const (
	// MaxSMTPReply bounds one SMTP reply, all its lines: RFC 5321 lines
	// are at most 512 bytes, an EHLO answer a few dozen of them.
	MaxSMTPReply = 64 << 10
	// MaxIMAPResponse bounds one IMAP response, its literals included
	// except a mail's body sections (BODY[…], BINARY[…], RFC822…), which
	// the Receiver reads up to MaxMessageSize and discards beyond: a
	// SEARCH answer for half a million UIDs fits. go-imap reads every
	// other literal (a mailbox name, an ENVELOPE string) whole into
	// memory.
	MaxIMAPResponse = 4 << 20
)

// errAnswerTooLong is the error of a server answer above its bound.
var errAnswerTooLong = errors.New("answer too long")

// boundedConn is a connection whose reads fail once one server answer —
// an SMTP reply with its continuation lines, or an IMAP response outside
// its literals — passes max bytes. It sits above TLS, where the protocol
// is readable. pre, when set, is read first (a greeting the server sent
// before STARTTLS, for a client that waits for one).
type boundedConn struct {
	net.Conn
	imap bool
	max  int
	pre  []byte
	err  error

	n    int    // bytes of the current answer counted so far
	col  int    // SMTP: position in the current line
	sep  byte   // SMTP: the byte after the code: '-' continues the reply
	lit  int64  // IMAP: literal bytes still to pass
	body bool   // IMAP: the literal is a body section, passed uncounted
	head []byte // IMAP: the start of the current response
	tail []byte // IMAP: the end of the current line, for a literal's {n}
	// IMAP: inside a quoted string (esc: after its backslash), or inside
	// a status response's "[code" (code 1; 2 once closed). go-imap reads
	// both across line ends — a quoted string into memory, an unknown
	// code skipped up to its "]" — so a line end there ends no response.
	quoted, esc bool
	code        int
	// lines: IMAP read as lines by the transport itself (before
	// STARTTLS), not by go-imap: no literal is a stream, all count.
	lines bool
}

func newBoundedConn(conn net.Conn, imap bool, pre string) *boundedConn {
	c := &boundedConn{Conn: conn, imap: imap, max: MaxSMTPReply, pre: []byte(pre)}
	if imap {
		c.max = MaxIMAPResponse
	}
	return c
}

// Read reads from the connection, counting what the server sends.
func (c *boundedConn) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	n, err := c.Conn.Read(p)
	if cerr := c.count(p[:n]); cerr != nil {
		c.err = cerr
		return 0, cerr
	}
	return n, err
}

func (c *boundedConn) count(b []byte) error {
	for i := 0; i < len(b); {
		if c.lit > 0 {
			k := min(int64(len(b)-i), c.lit)
			c.lit -= k
			i += int(k)
			if !c.body {
				if c.n += int(k); c.n > c.max {
					return c.tooLong()
				}
			}
			continue
		}
		ch := b[i]
		i++
		if c.n++; c.n > c.max {
			return c.tooLong()
		}
		if ch == '\n' {
			c.endLine()
			continue
		}
		if c.imap {
			if len(c.head) < 32 {
				c.head = append(c.head, ch)
			}
			if len(c.tail) == 128 {
				c.tail = append(c.tail[:0], c.tail[64:]...)
			}
			c.tail = append(c.tail, ch)
			c.inString(ch)
			continue
		}
		if c.col == 3 {
			c.sep = ch
		}
		c.col++
	}
	return nil
}

// endLine ends a line: the answer ends with it unless an SMTP reply
// continues ("250-") or an IMAP line announces a literal ("{123}").
func (c *boundedConn) endLine() {
	if c.imap {
		switch n, before, ok := literalSize(c.tail); {
		case c.quoted || c.code == 1:
			// The string or the code goes on: the same response.
		case ok && !statusResponse(c.head):
			c.lit, c.body = n, !c.lines && fetchResponse(c.head) && bodyLiteral(before)
		default:
			c.n, c.head, c.code = 0, c.head[:0], 0
		}
		c.tail = c.tail[:0]
		return
	}
	if c.col < 4 || c.sep != '-' {
		c.n = 0
	}
	c.col, c.sep = 0, 0
}

// inString follows an IMAP response's quoted strings and its status
// response code, as go-imap reads them: ch is the response's next byte
// outside literals, already in head.
func (c *boundedConn) inString(ch byte) {
	switch {
	case c.quoted:
		if c.esc {
			c.esc = false
		} else if ch == '\\' {
			c.esc = true
		} else if ch == '"' {
			c.quoted = false
		}
	case c.code == 1:
		if ch == ']' {
			c.code = 2
		}
	case ch == '[' && c.code == 0 && codeStart(c.head):
		c.code = 1
	case ch == '"' && !statusResponse(c.head):
		// A status response's text is read to its line's end.
		c.quoted = true
	}
}

func (c *boundedConn) tooLong() error {
	if c.imap {
		return fmt.Errorf("%w: the server's response is longer than %d bytes outside a mail's body (a line without end?)", errAnswerTooLong, c.max)
	}
	return fmt.Errorf("%w: the server's reply is longer than %d bytes (endless continuation lines?)", errAnswerTooLong, c.max)
}

// literalSize reads the "{123}" (or "~{123}") a line ends with before
// its CRLF: a literal of that many bytes follows. before is the line up
// to it.
func literalSize(line []byte) (n int64, before string, ok bool) {
	s := strings.TrimSuffix(string(line), "\r")
	if !strings.HasSuffix(s, "}") {
		return 0, "", false
	}
	i := strings.LastIndexByte(s, '{')
	if i < 0 || strings.HasPrefix(s[i+1:], "+") {
		return 0, "", false
	}
	n, err := strconv.ParseInt(s[i+1:len(s)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, "", false
	}
	return n, strings.TrimSuffix(s[:i], "~"), true
}

// statusResponse reports whether the response that starts with head is
// a status response — tagged, "+", or "* [n] OK/NO/BAD/BYE/PREAUTH" —
// whose text ends with its line: a "{n}" there is text, not a literal.
func statusResponse(head []byte) bool {
	h := strings.ToUpper(string(head))
	if !strings.HasPrefix(h, "* ") {
		return true // tagged, or a continuation request
	}
	h = skipNumber(h[2:])
	for _, s := range []string{"OK", "NO", "BAD", "BYE", "PREAUTH"} {
		if rest, ok := strings.CutPrefix(h, s); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\r' || rest[0] == '[') {
			return true
		}
	}
	return false
}

// skipNumber returns s without a leading "123 " (go-imap reads
// "* 123 OK" as a status response, "* 123 FETCH" as a FETCH).
func skipNumber(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if i > 0 && s[i] == ' ' {
		return s[i+1:]
	}
	return s
}

// codeStart reports whether head, ending with "[", is the start of a
// status response up to its response code: "tag TYPE [" or
// "* [n] TYPE [" with TYPE OK, NO, BAD, BYE or PREAUTH.
func codeStart(head []byte) bool {
	h := strings.ToUpper(string(head))
	tag, rest, ok := strings.Cut(h, " ")
	if !ok || tag == "+" {
		return false
	}
	if tag == "*" {
		rest = skipNumber(rest)
	}
	typ, rest, _ := strings.Cut(rest, " ")
	return rest == "[" && slices.Contains([]string{"OK", "NO", "BAD", "BYE", "PREAUTH"}, typ)
}

// fetchResponse reports whether the response that starts with head is
// "* n FETCH", the only one whose body section literals go-imap streams;
// it reads every other literal whole (a METADATA value after an entry
// name ending in "]", say).
func fetchResponse(head []byte) bool {
	h, ok := strings.CutPrefix(strings.ToUpper(string(head)), "* ")
	if !ok {
		return false
	}
	if r := skipNumber(h); r != h {
		return strings.HasPrefix(r, "FETCH ") || strings.HasPrefix(r, "FETCH(")
	}
	return false
}

// bodyLiteral reports whether the literal after before is a FETCH body
// section — "BODY[…] ", "BODY[…]<0> ", "BINARY[…] ", "RFC822 ",
// "RFC822.HEADER ", "RFC822.TEXT " — which go-imap streams to the
// Receiver, rather than a string it reads whole into memory.
func bodyLiteral(before string) bool {
	b, ok := strings.CutSuffix(strings.ToUpper(before), " ")
	if !ok {
		return false
	}
	if i := strings.LastIndexByte(b, '<'); i >= 0 && strings.HasSuffix(b, ">") && strings.HasSuffix(b[:i], "]") {
		if _, err := strconv.ParseUint(b[i+1:len(b)-1], 10, 32); err == nil {
			b = b[:i]
		}
	}
	if strings.HasSuffix(b, "]") {
		return true
	}
	for _, name := range []string{" RFC822", " RFC822.HEADER", " RFC822.TEXT", "(RFC822", "(RFC822.HEADER", "(RFC822.TEXT"} {
		if strings.HasSuffix(b, name) {
			return true
		}
	}
	return false
}

// smtpStartTLS greets an SMTP server, checks that its EHLO answer offers
// STARTTLS (errNoStartTLS when it does not), upgrades the connection, and
// returns a client over TLS whose replies are bounded. go-smtp's own
// STARTTLS puts TLS above any wrapper of the connection given, where a
// bound could not read the replies.
func smtpStartTLS(conn net.Conn, cfg *tls.Config, host string) (*smtp.Client, error) {
	br := bufio.NewReader(newBoundedConn(conn, false, ""))
	if code, text, err := readReply(br); err != nil {
		return nil, err
	} else if code != 220 {
		return nil, &smtp.SMTPError{Code: code, Message: text}
	}
	cmd := func(line string, want int) ([]string, error) {
		if _, err := io.WriteString(conn, line+"\r\n"); err != nil {
			return nil, err
		}
		code, text, err := readReply(br)
		if err != nil {
			return nil, err
		}
		if code != want {
			return nil, &smtp.SMTPError{Code: code, Message: text}
		}
		return strings.Split(text, "\n"), nil
	}
	lines, err := cmd("EHLO "+host, 250)
	var se *smtp.SMTPError
	if errors.As(err, &se) && (se.Code == 500 || se.Code == 502) {
		return nil, errNoStartTLS // no EHLO, no STARTTLS
	}
	if err != nil {
		return nil, err
	}
	offered := false
	for _, l := range lines {
		if strings.EqualFold(strings.TrimSpace(l), "STARTTLS") {
			offered = true
		}
	}
	if !offered {
		return nil, errNoStartTLS
	}
	if _, err := cmd("STARTTLS", 220); err != nil {
		return nil, err
	}
	if br.Buffered() > 0 {
		// Bytes before the handshake would be read as if they came over
		// TLS (CVE-2011-0411, STARTTLS command injection).
		return nil, errors.New("the server sent data after its STARTTLS answer, before TLS")
	}
	tc := tls.Client(conn, cfg)
	if err := tc.Handshake(); err != nil {
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	// go-smtp waits for a greeting, then says EHLO again, as RFC 3207
	// asks after STARTTLS.
	return smtp.NewClient(newBoundedConn(tc, false, "220 "+host+" TLS started\r\n")), nil
}

// readReply reads one SMTP reply: its code and its lines' text, joined
// by newlines. The reader is bounded (boundedConn).
func readReply(br *bufio.Reader) (int, string, error) {
	var texts []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return 0, "", err
		}
		line = strings.TrimRight(line, "\r\n")
		if len(line) < 3 {
			return 0, "", fmt.Errorf("malformed reply line %q", oneLine(line))
		}
		code, err := strconv.Atoi(line[:3])
		if err != nil {
			return 0, "", fmt.Errorf("malformed reply line %q", oneLine(line))
		}
		if len(line) > 4 {
			texts = append(texts, line[4:])
		}
		if len(line) == 3 || line[3] != '-' {
			return code, strings.Join(texts, "\n"), nil
		}
	}
}

// imapStartTLS reads an IMAP server's greeting, upgrades the connection
// with STARTTLS and returns it over TLS, bounded, with a greeting for
// imapclient to read first (which then asks for the capabilities again,
// as RFC 9051 asks after STARTTLS). imapclient's own STARTTLS puts TLS
// above any wrapper of the connection given, where a bound could not read
// the responses.
func imapStartTLS(conn net.Conn, cfg *tls.Config) (net.Conn, error) {
	bc := newBoundedConn(conn, true, "")
	bc.lines = true // read by br.ReadString below, whole
	br := bufio.NewReader(bc)
	greeting, err := br.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("greeting: %w", err)
	}
	if !strings.HasPrefix(strings.ToUpper(greeting), "* OK") {
		return nil, fmt.Errorf("greeting %q: want * OK before STARTTLS", oneLine(strings.TrimSpace(greeting)))
	}
	if _, err := io.WriteString(conn, "T0 STARTTLS\r\n"); err != nil {
		return nil, err
	}
	for untagged := 0; ; untagged++ {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(line, "T0 ") {
			if !strings.HasPrefix(strings.ToUpper(line), "T0 OK") {
				return nil, fmt.Errorf("refused: %q", oneLine(strings.TrimSpace(line)))
			}
			break
		}
		if untagged >= 100 {
			return nil, errors.New("no answer to STARTTLS after 100 other responses")
		}
	}
	if br.Buffered() > 0 {
		// Bytes before the handshake would be read as if they came over
		// TLS (STARTTLS command injection).
		return nil, errors.New("the server sent data after its STARTTLS answer, before TLS")
	}
	tc := tls.Client(conn, cfg)
	if err := tc.Handshake(); err != nil {
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return newBoundedConn(tc, true, "* OK TLS started\r\n"), nil
}
