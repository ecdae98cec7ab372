package mail

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	netmail "net/mail"
	"net/textproto"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/signing"
	"github.com/crosstalk-go/crosstalk/transports"
	"github.com/crosstalk-go/crosstalk/transports/mail/mailtest"
)

// TestSignedEnvelopeTrip: a signed envelope with everything mail likes to
// mangle (long lines, trailing blanks, non-ASCII, "From " and "." lines)
// goes out through Dovecot submission (STARTTLS, AUTH) → Postfix → LMTP
// and still verifies when the Receiver reads it back over IMAP.
func TestSignedEnvelopeTrip(t *testing.T) {
	s := realStack(t)
	user := s.NewUser()
	key, err := signing.GenerateKey(signing.Ed25519, "tester@example.test")
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Join([]string{
		"Grüße — ünïcödé ✓ and a very long line: " + strings.Repeat("0123456789 ", 30),
		"trailing blanks   ",
		"From the start of a line",
		".",
		"tab\tinside",
	}, "\n")
	e := envelope.New("TESTER", "RELAY", envelope.IntentRequest, body)
	e.Context = "signing über mail"
	text, err := envelope.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := signing.Sign(text, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	snd := submission(t, s, user, nil)
	if err := snd.Send(context.Background(), "email:"+mailtest.Address(user), e.Message, signed); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	run(t, receiver(t, s, user, filepath.Join(t.TempDir(), "state"), nil, nil), rec.handle)
	got := rec.wait(t, 1, 5*time.Second)
	envs := readAll(t, got[0].Data)
	if len(envs) != 1 {
		t.Fatalf("received %d envelopes, want 1: %q", len(envs), got[0].Data)
	}
	if res := signing.Verify(envs[0], key.Public()); res.Status != signing.StatusVerified {
		t.Errorf("Verify after the trip = %s (%v), want verified\nsent:\n%s\nreceived:\n%s", res.Status, res.Err, signed, got[0].Data)
	}
	if envs[0].Body != body {
		t.Errorf("body = %q, want %q", envs[0].Body, body)
	}
	msgs, err := s.Messages(user, "")
	if err != nil || len(msgs) != 1 {
		t.Fatalf("%d mails (%v), want 1", len(msgs), err)
	}
	m, err := netmail.ReadMessage(bytes.NewReader(msgs[0].Raw))
	if err != nil {
		t.Fatal(err)
	}
	subj, err := (&mime.WordDecoder{}).DecodeHeader(m.Header.Get("Subject"))
	if err != nil || subj != "[AI Crosstalk] signing über mail - REQUEST" {
		t.Errorf("Subject = %q (%v), want the decoded context and intent", subj, err)
	}
	if got, want := m.Header.Get("Message-Id"), "<"+e.Message+"@example.test>"; got != want {
		t.Errorf("Message-ID = %q, want %q", got, want)
	}
}

// TestHeaderInjection: hostile context, intent, message and parent ids
// and recipient addresses cannot add or split a header.
func TestHeaderInjection(t *testing.T) {
	hostile := []string{
		"x\r\nBcc: evil@example.test",
		"x\nBcc: evil@example.test",
		"x\rBcc: evil@example.test",
		"x\x00\x1b[31m\u2028X-Evil: 1\u0085X-Evil: 2\u2029",
		"=?utf-8?q?=0D=0ABcc:_evil@example.test?=",
		"ümlaut\r\n\r\nbody injection " + strings.Repeat("long ", 100),
		"",
	}
	from := &netmail.Address{Name: "Relay", Address: "relay@example.test"}
	to := &netmail.Address{Address: "bob@example.test"}
	for _, h := range hostile {
		o := &outgoing{to: to, text: []byte("hi\n"), id: h, context: h, intent: h, inReplyTo: msgID(h, "example.test"), references: []string{msgID(h, "example.test")}}
		raw := compose(from, "example.test", o)
		checkHeaders(t, raw, false)
	}
	// Whole messages through the real stack, with an envelope the Reader
	// accepts: control characters in values, hostile ids. (The Reader
	// refuses controls in a context, E-ADDRESS, docs/format.md §12;
	// compose gets them above.)
	s := realStack(t)
	user := s.NewUser()
	text := []byte("[[TESTER→RELAY v1]]\n" +
		"message: evil>\tX-Injected: yes\n" +
		"parent: <p>@x Bcc: evil@example.test\n" +
		"context: ctx Bcc: evil@example.test X-Evil: 1\n" +
		"intent: REQUEST\u2029X-Evil: 2\n\nbody: |\n  hi\nsig: none\n[[END]]\n")
	if _, err := envelope.NewReader(bytes.NewReader(text)).Next(); err != nil {
		t.Fatalf("the hostile envelope does not parse: %v", err)
	}
	snd := submission(t, s, user, nil)
	if err := snd.Send(context.Background(), mailtest.Address(user), "", text); err != nil {
		t.Fatal(err)
	}
	for _, to := range []string{
		mailtest.Address(user) + "\r\nBcc: evil@example.test",
		mailtest.Address(user) + ">\r\nX-Evil: 1",
		"email:" + mailtest.Address(user) + "\nBcc: x@example.test",
		"Evil\r\n <" + mailtest.Address(user) + ">",
	} {
		err := snd.Send(context.Background(), to, "", text)
		if !errors.Is(err, transports.ErrPermanent) {
			t.Errorf("Send(to %q) = %v, want ErrPermanent", to, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	var msgs []mailtest.Message
	for len(msgs) == 0 && time.Now().Before(deadline) {
		var err error
		if msgs, err = s.Messages(user, ""); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(msgs) != 1 {
		t.Fatalf("%d mails arrived, want 1", len(msgs))
	}
	checkHeaders(t, msgs[0].Raw, true)
	if !bytes.Contains(msgs[0].Raw, []byte("Message-ID: <sha256-")) {
		t.Errorf("a non-dot-atom message id was not replaced by its hash:\n%s", msgs[0].Raw)
	}
}

// checkHeaders checks that raw's header holds exactly the fields the
// Sender writes (plus the servers' trace fields when delivered), each once,
// and that the Subject decodes to one line without control characters.
func checkHeaders(t *testing.T, raw []byte, delivered bool) {
	t.Helper()
	head, _, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
	if !ok {
		t.Fatalf("no header end in %q", raw)
	}
	allowed := map[string]bool{"From": true, "To": true, "Subject": true, "Date": true, "Message-Id": true,
		"In-Reply-To": true, "References": true, "Mime-Version": true, "Content-Type": true, "Content-Transfer-Encoding": true,
		"Auto-Submitted": true} // a Receiver's reply
	if delivered {
		for _, k := range []string{"Return-Path", "Delivered-To", "Received"} {
			allowed[k] = true
		}
	}
	seen := map[string]int{}
	for _, line := range strings.Split(string(head), "\r\n") {
		if strings.ContainsAny(line, "\r\n\x00") {
			t.Errorf("header line %q holds a bare CR, LF or NUL", line)
		}
		if line == "" || line[0] == ' ' || line[0] == '\t' {
			continue // continuation
		}
		name, _, ok := strings.Cut(line, ":")
		if !ok {
			t.Errorf("header line %q is neither a field nor a continuation", line)
			continue
		}
		name = textproto.CanonicalMIMEHeaderKey(name)
		if !allowed[name] {
			t.Errorf("unexpected header field %q in:\n%s", name, head)
		}
		seen[name]++
	}
	for name, n := range seen {
		if n > 1 && name != "Received" {
			t.Errorf("header field %s appears %d times", name, n)
		}
	}
	m, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	subj, err := (&mime.WordDecoder{}).DecodeHeader(m.Header.Get("Subject"))
	if err != nil {
		t.Errorf("Subject %q does not decode: %v", m.Header.Get("Subject"), err)
	}
	if strings.ContainsFunc(subj, isControl) || !strings.HasPrefix(subj, SubjectPrefix) {
		t.Errorf("decoded Subject = %q, want %q… without control characters", subj, SubjectPrefix)
	}
	for _, k := range []string{"Message-Id", "In-Reply-To"} {
		if v := m.Header.Get(k); v != "" && cleanMsgID(v) != v {
			t.Errorf("%s = %q is not a clean msg-id", k, v)
		}
	}
}

// TestCompose checks the shape of a mail: headers, quoted-printable body
// that decodes to the text byte for byte, line lengths.
func TestCompose(t *testing.T) {
	text := []byte("[[A→B v1]]\nmessage: 01J9Z8Y7X6W5V4T3S2R1Q0PA01\nparent: 01J9Z8Y7X6W5V4T3S2R1Q0PA00\ncontext: Grüße\nintent: RESPOND\n\nbody: |\n  " +
		strings.Repeat("ä", 200) + "   \n  = sign\nsig: none\n[[END]]\n")
	o := &outgoing{to: &netmail.Address{Name: "Bob Ü", Address: "bob@example.test"}, text: text, date: time.Date(2025, 10, 9, 16, 2, 0, 0, time.UTC)}
	if err := o.fromText("relay.example.test"); err != nil {
		t.Fatal(err)
	}
	raw := compose(&netmail.Address{Address: "relay@example.test"}, "relay.example.test", o)
	checkHeaders(t, raw, false)
	for _, line := range strings.Split(string(raw), "\r\n") {
		if len(line) > 78 {
			t.Errorf("line of %d bytes: %q", len(line), line)
		}
	}
	m, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"Message-Id":                "<01J9Z8Y7X6W5V4T3S2R1Q0PA01@relay.example.test>",
		"In-Reply-To":               "<01J9Z8Y7X6W5V4T3S2R1Q0PA00@relay.example.test>",
		"References":                "<01J9Z8Y7X6W5V4T3S2R1Q0PA00@relay.example.test>",
		"Date":                      "Thu, 09 Oct 2025 16:02:00 +0000",
		"Mime-Version":              "1.0",
		"Content-Type":              "text/plain; charset=utf-8",
		"Content-Transfer-Encoding": "quoted-printable",
		"From":                      "<relay@example.test>",
	} {
		if got := m.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if m.Header.Get("Auto-Submitted") != "" {
		t.Errorf("Send mail is marked Auto-Submitted; only replies are")
	}
	subj, _ := (&mime.WordDecoder{}).DecodeHeader(m.Header.Get("Subject"))
	if subj != "[AI Crosstalk] Grüße - RESPOND" {
		t.Errorf("Subject = %q", subj)
	}
	body, err := io.ReadAll(quotedprintable.NewReader(m.Body))
	if err != nil {
		t.Fatal(err)
	}
	if got := bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n")); !bytes.Equal(got, text) {
		t.Errorf("body decodes to\n%q\nwant\n%q", got, text)
	}
}

func TestParseRecipient(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"bob@example.test", "bob@example.test"},
		{"email:bob@example.test", "bob@example.test"},
		{"EMAIL:bob@example.test?subject=AI+Crosstalk", "bob@example.test"},
		{"mailto:bob@example.test", "bob@example.test"},
		{"Bob <bob@example.test>", "bob@example.test"},
		{"", ""},
		{"CLAUDE", ""},
		{"claude://session/abc", ""},
		{"bob@example.test\r\nBcc: x@example.test", ""},
		{"bob@example.test, eve@example.test", ""},
		{`"victim@other.test> ORCPT=rfc822;x"@evil.test`, ""},
		{`email:"a b"@example.test`, ""},
		{"bob@[192.0.2.1]", "bob@[192.0.2.1]"},
		{"jürgen@example.test", "jürgen@example.test"},
	} {
		a, err := parseRecipient(tc.in)
		got := ""
		if err == nil {
			got = a.Address
		} else if !errors.Is(err, transports.ErrPermanent) {
			t.Errorf("parseRecipient(%q) = %v, want an ErrPermanent", tc.in, err)
		}
		if got != tc.want {
			t.Errorf("parseRecipient(%q) = %q (%v), want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestMsgID(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"01J9Z8Y7X6W5V4T3S2R1Q0PA01", "<01J9Z8Y7X6W5V4T3S2R1Q0PA01@h.test>"},
		{"0192b6a4-1a2b-7c3d-8e4f-5a6b7c8d9e0f", "<0192b6a4-1a2b-7c3d-8e4f-5a6b7c8d9e0f@h.test>"},
		{"a>b", "<sha256-"},
		{"a b", "<sha256-"},
		{"a..b", "<sha256-"},
		{".a", "<sha256-"},
	} {
		if got := msgID(tc.id, "h.test"); !strings.HasPrefix(got, tc.want) || cleanMsgID(got) != got {
			t.Errorf("msgID(%q) = %q, want %q…", tc.id, got, tc.want)
		}
	}
	if first, again := msgID("a b", "h"), msgID("a b", "h"); first != again {
		t.Error("msgID is not deterministic: a retry would get another Message-ID")
	}
}

// smtpServer is an in-test go-smtp server without TLS that keeps what it
// receives; password "pw" for any user.
type smtpServer struct {
	mu    sync.Mutex
	msgs  [][]byte
	users []string
}

func startSMTP(t *testing.T) (*smtpServer, string) {
	t.Helper()
	b := &smtpServer{}
	srv := smtp.NewServer(b)
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return b, ln.Addr().String()
}

func (b *smtpServer) NewSession(*smtp.Conn) (smtp.Session, error) { return &smtpSession{b: b}, nil }

type smtpSession struct{ b *smtpServer }

func (s *smtpSession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *smtpSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if pass != "pw" {
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "bad credentials"}
		}
		s.b.mu.Lock()
		s.b.users = append(s.b.users, user)
		s.b.mu.Unlock()
		return nil
	}), nil
}
func (s *smtpSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *smtpSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	s.b.mu.Lock()
	s.b.msgs = append(s.b.msgs, b)
	s.b.mu.Unlock()
	return err
}
func (s *smtpSession) Reset()        {}
func (s *smtpSession) Logout() error { return nil }

// TestSendPlainWhenNoStartTLS: by default STARTTLS is used when offered;
// a loopback server without it gets the mail (and the password) in the
// clear, while SecurityRequireStartTLS refuses.
func TestSendPlainWhenNoStartTLS(t *testing.T) {
	b, addr := startSMTP(t)
	text, id := testEnvelope(t, "plain")
	for _, sec := range []Security{SecurityStartTLS, SecurityNone} {
		snd, err := NewSender(Server{Addr: addr, Security: sec, Username: "u", Password: "pw"}, &Options{From: "relay@example.test", Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		if err := snd.Send(context.Background(), "bob@example.test", id, text); err != nil {
			t.Fatalf("Send with %v = %v", sec, err)
		}
	}
	b.mu.Lock()
	n, users := len(b.msgs), b.users
	b.mu.Unlock()
	if n != 2 || len(users) != 2 {
		t.Errorf("server got %d mails from users %v, want 2 and [u u]", n, users)
	}
	snd, _ := NewSender(Server{Addr: addr, Security: SecurityRequireStartTLS}, &Options{From: "relay@example.test"})
	if err := snd.Send(context.Background(), "bob@example.test", id, text); err == nil || !strings.Contains(err.Error(), "STARTTLS") {
		t.Errorf("Send with SecurityRequireStartTLS to a server without it = %v, want a STARTTLS error", err)
	}
	snd, _ = NewSender(Server{Addr: addr, Username: "u", Password: "wrong"}, &Options{From: "relay@example.test"})
	if err := snd.Send(context.Background(), "bob@example.test", id, text); !errors.Is(err, transports.ErrPermanent) {
		t.Errorf("Send with a wrong password = %v, want ErrPermanent", err)
	}
}

// TestSendErrors: an unreachable, silent or refusing server gives a
// clear, wrapped error quickly; never a hang.
func TestSendErrors(t *testing.T) {
	text, id := testEnvelope(t, "errors")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := ln.Addr().String()
	ln.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var hmu sync.Mutex
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			hmu.Lock()
			held = append(held, c) // accept, never greet
			hmu.Unlock()
		}
	}()
	t.Cleanup(func() {
		silent.Close()
		hmu.Lock()
		for _, c := range held {
			c.Close()
		}
		hmu.Unlock()
	})
	send := func(ctx context.Context, addr string, timeout time.Duration, to string, text []byte) (time.Duration, error) {
		snd, err := NewSender(Server{Addr: addr}, &Options{From: "relay@example.test", Timeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		err = snd.Send(ctx, to, id, text)
		return time.Since(t0), err
	}

	d, err := send(context.Background(), closedAddr, 5*time.Second, "bob@example.test", text)
	if !errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, transports.ErrPermanent) || !strings.HasPrefix(err.Error(), "mail: smtp "+closedAddr) || d > 2*time.Second {
		t.Errorf("unreachable: Send = %v after %v, want a quick, retryable, wrapped ECONNREFUSED", err, d)
	}
	d, err = send(context.Background(), silent.Addr().String(), 300*time.Millisecond, "bob@example.test", text)
	if err == nil || !strings.Contains(err.Error(), "no greeting") || !errors.Is(err, context.DeadlineExceeded) || d > 3*time.Second {
		t.Errorf("silent server: Send = %v after %v, want 'no greeting' within ~0.3s", err, d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	d, err = send(ctx, silent.Addr().String(), 30*time.Second, "bob@example.test", text)
	if !errors.Is(err, context.DeadlineExceeded) || d > 3*time.Second {
		t.Errorf("silent server, ctx deadline: Send = %v after %v, want the context's error within ~0.2s", err, d)
	}
	for _, tc := range []struct {
		name, to string
		text     []byte
	}{
		{"BadAddress", "CLAUDE", text},
		{"NoEnvelope", "bob@example.test", []byte("just chat\n")},
	} {
		_, err := send(context.Background(), closedAddr, time.Second, tc.to, tc.text)
		if !errors.Is(err, transports.ErrPermanent) {
			t.Errorf("%s: Send = %v, want ErrPermanent", tc.name, err)
		}
	}
}

// TestSendRefusedByServer: real servers' refusals are permanent: Postfix
// refusing a foreign domain at RCPT, Dovecot submission refusing a
// password.
func TestSendRefusedByServer(t *testing.T) {
	s := realStack(t)
	text, id := testEnvelope(t, "refused")
	snd, err := NewSender(Server{Addr: s.SMTPAddr}, &Options{From: "relay@example.test", TLSConfig: s.TLSConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if err := snd.Send(context.Background(), "someone@other.example", id, text); !errors.Is(err, transports.ErrPermanent) {
		t.Errorf("Send to a refused domain = %v, want ErrPermanent", err)
	}
	snd, err = NewSender(Server{Addr: s.SubmissionAddr, Username: s.NewUser(), Password: "wrong"}, &Options{From: "relay@example.test", TLSConfig: s.TLSConfig()})
	if err != nil {
		t.Fatal(err)
	}
	err = snd.Send(context.Background(), "bob@example.test", id, text)
	if !errors.Is(err, transports.ErrPermanent) || !strings.Contains(err.Error(), "AUTH") {
		t.Errorf("Send with a wrong password = %v, want a permanent AUTH error", err)
	}
	// Opportunistic STARTTLS against Postfix (which offers none here)
	// and Dovecot submission (which does) both deliver.
	user := s.NewUser()
	for _, srv := range []Server{{Addr: s.SMTPAddr}, {Addr: s.SubmissionAddr, Username: user, Password: mailtest.Password}} {
		snd, err := NewSender(srv, &Options{From: "relay@example.test", TLSConfig: s.TLSConfig()})
		if err != nil {
			t.Fatal(err)
		}
		if err := snd.Send(context.Background(), mailtest.Address(user), "", text); err != nil {
			t.Errorf("Send via %s = %v", srv.Addr, err)
		}
	}
}

func TestNewSenderOptions(t *testing.T) {
	for _, tc := range []struct {
		srv  Server
		o    *Options
		want string
	}{
		{Server{Addr: "h:25"}, nil, "Options.From is required"},
		{Server{}, &Options{From: "a@b.test"}, "no SMTP server address"},
		{Server{Addr: "h"}, &Options{From: "a@b.test"}, "SMTP address"},
		{Server{Addr: "h:25"}, &Options{From: "not an address"}, "Options.From"},
		{Server{Addr: "h:25"}, &Options{From: "a@b.test", Hostname: "bad host>"}, "hostname"},
	} {
		if _, err := NewSender(tc.srv, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "mail: ") {
			t.Errorf("NewSender(%+v, %+v) = %v, want an error mentioning %q", tc.srv, tc.o, err, tc.want)
		}
	}
	if (Server{Addr: "192.0.2.1:25"}).loopback() || !(Server{Addr: "127.0.0.1:25"}).loopback() || !(Server{Addr: "[::1]:25"}).loopback() {
		t.Error("loopback() is wrong")
	}
}

// TestImplicitTLS: SecurityTLS for both directions, against Dovecot's
// implicit-TLS submission and IMAP listeners; a certificate the client
// does not trust is refused.
func TestImplicitTLS(t *testing.T) {
	s := realStack(t)
	user := s.NewUser()
	snd, err := NewSender(Server{Addr: s.SubmissionsAddr, Security: SecurityTLS, Username: user, Password: mailtest.Password},
		&Options{From: mailtest.Address(user), TLSConfig: s.TLSConfig(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	text, id := testEnvelope(t, "implicit TLS")
	if err := snd.Send(context.Background(), mailtest.Address(user), id, text); err != nil {
		t.Fatal(err)
	}
	rc := receiver(t, s, user, filepath.Join(t.TempDir(), "state"), nil, nil)
	rc.srv.Addr, rc.srv.Security = s.IMAPSAddr, SecurityTLS
	rec := newRecorder()
	run(t, rc, rec.handle)
	if got := messageIDsOf(t, rec.wait(t, 1, 5*time.Second)); len(got) != 1 || got[0] != id {
		t.Errorf("received %v, want [%s]", got, id)
	}
	// The system roots do not know the test certificate.
	untrusted, _ := NewSender(Server{Addr: s.SubmissionsAddr, Security: SecurityTLS}, &Options{From: "relay@example.test", Timeout: 5 * time.Second})
	if err := untrusted.Send(context.Background(), mailtest.Address(user), id, text); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Send to an untrusted certificate = %v, want a certificate error", err)
	}
	untrustedIMAP, _ := NewReceiver(Server{Addr: s.IMAPAddr, Username: user, Password: mailtest.Password}, nil,
		&Options{StateFile: filepath.Join(t.TempDir(), "s"), Timeout: 5 * time.Second})
	if err := untrustedIMAP.Receive(context.Background(), rec.handle); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Receive with STARTTLS to an untrusted certificate = %v, want a certificate error", err)
	}
}
