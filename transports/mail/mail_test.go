package mail

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/crosstalk-go/crosstalk/transports"
	"github.com/crosstalk-go/crosstalk/transports/mail/mailtest"
	"github.com/crosstalk-go/crosstalk/transports/transporttest"
)

// One real mail stack serves every test of the package; each test takes
// its own users (mailboxes). TestMain stops it.
var (
	stackOnce sync.Once
	stack     *mailtest.Stack
	stackErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if stack != nil {
		if err := stack.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// realStack returns the shared Dovecot + Postfix stack, starting it on
// first use; it skips (or, with CI=true, fails) when the packages are
// missing.
func realStack(t *testing.T) *mailtest.Stack {
	t.Helper()
	mailtest.Require(t)
	stackOnce.Do(func() {
		t0 := time.Now()
		stack, stackErr = mailtest.Start(context.Background())
		if stackErr == nil {
			fmt.Fprintf(os.Stderr, "mail: test stack up in %v\n", time.Since(t0).Round(time.Millisecond))
		}
	})
	if stackErr != nil {
		t.Fatal(stackErr)
	}
	return stack
}

// testLogger logs to t until the test ends.
func testLogger(t testing.TB) *slog.Logger {
	w := &tlog{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tlog struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *tlog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// submission returns a Sender for user through Dovecot submission:
// STARTTLS with the stack's self-signed certificate, AUTH PLAIN.
func submission(t testing.TB, s *mailtest.Stack, user string, mod func(*Options)) *Sender {
	t.Helper()
	o := &Options{From: mailtest.Address(user), TLSConfig: s.TLSConfig(), Logger: testLogger(t), Timeout: 10 * time.Second}
	if mod != nil {
		mod(o)
	}
	snd, err := NewSender(Server{Addr: s.SubmissionAddr, Security: SecurityRequireStartTLS, Username: user, Password: mailtest.Password}, o)
	if err != nil {
		t.Fatal(err)
	}
	return snd
}

// receiver returns a Receiver for user's INBOX over IMAP with STARTTLS,
// answering through reply.
func receiver(t testing.TB, s *mailtest.Stack, user, state string, reply *Sender, mod func(*Options)) *Receiver {
	t.Helper()
	o := &Options{StateFile: state, TLSConfig: s.TLSConfig(), Logger: testLogger(t), PollInterval: 5 * time.Second}
	if mod != nil {
		mod(o)
	}
	r, err := NewReceiver(Server{Addr: s.IMAPAddr, Security: SecurityRequireStartTLS, Username: user, Password: mailtest.Password}, reply, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// plainMail is a mail as another party writes it.
func plainMail(from, to, subject string, text []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: %s\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: <%d.%s>\r\nDate: %s\r\n",
		from, to, subject, time.Now().UnixNano(), from, time.Now().Format(time.RFC1123Z))
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
	b.Write(bytes.ReplaceAll(text, []byte("\n"), []byte("\r\n")))
	return b.Bytes()
}

// viaPostfix sends a mail through Postfix (SMTP, no AUTH), the way mail
// from the outside arrives.
func viaPostfix(ctx context.Context, s *mailtest.Stack, from, to string, raw []byte) error {
	c, err := smtp.Dial(s.SMTPAddr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SendMail(from, []string{to}, bytes.NewReader(raw)); err != nil {
		return err
	}
	return c.Quit()
}

// inbox returns the texts of the mail in user's INBOX, decoded.
func inbox(t testing.TB, s *mailtest.Stack, user string) [][]byte {
	t.Helper()
	msgs, err := s.Messages(user, "")
	if err != nil {
		t.Fatal(err)
	}
	var texts [][]byte
	for _, m := range msgs {
		for _, p := range extract(m.Raw).Texts {
			texts = append(texts, p.Text)
		}
	}
	return texts
}

// TestConformance runs the transport conformance suite against the real
// stack: mail arrives from outside through Postfix, the Receiver reads
// Dovecot over IMAP with STARTTLS, and Send and replies go through Dovecot
// submission with STARTTLS + AUTH PLAIN (→ Postfix → LMTP).
func TestConformance(t *testing.T) {
	s := realStack(t)
	alice, bob := s.NewUser(), s.NewUser()
	state := filepath.Join(t.TempDir(), "state.json")
	transporttest.Run(t, transporttest.Harness{
		New: func(t *testing.T) (transports.Receiver, transports.Sender) {
			snd := submission(t, s, alice, nil)
			return receiver(t, s, alice, state, snd, nil), snd
		},
		Put: func(ctx context.Context, t *testing.T, text []byte) error {
			return viaPostfix(ctx, s, mailtest.Address(bob), mailtest.Address(alice),
				plainMail(mailtest.Address(bob), mailtest.Address(alice), "conformance", text))
		},
		Address: "email:" + mailtest.Address(alice),
		// Postfix delivers queued mail concurrently, so mail sent in a
		// burst may get UIDs out of send order. The Receiver keeps UID
		// order (TestUIDOrder), but SMTP does not promise send order.
		Ordered: false,
		Replies: true,
		Replied: func(ctx context.Context, t *testing.T) [][]byte { return inbox(t, s, bob) },
		Settle:  time.Second,
	})
}
