package mail

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	netmail "net/mail"
	"strings"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/crosstalk-go/crosstalk/transports"
)

// Sender sends envelopes as mail through one SMTP server. It is safe for
// concurrent use; each Send uses its own connection.
type Sender struct {
	srv  Server
	o    options
	host string
}

var _ transports.Sender = (*Sender)(nil)

// NewSender returns a Sender that submits mail to srv. opts.From is
// required; nil opts is not enough.
func NewSender(srv Server, opts *Options) (*Sender, error) {
	o := newOptions(opts)
	if err := srv.check("sender", "SMTP"); err != nil {
		return nil, err
	}
	if o.From == "" {
		return nil, errors.New("mail: sender: Options.From is required")
	}
	from, err := netmail.ParseAddress(o.From)
	if err != nil {
		return nil, fmt.Errorf("mail: sender: Options.From %q: %w", o.From, err)
	}
	o.from = from
	host := o.Hostname
	if host == "" {
		host = from.Address[strings.LastIndexByte(from.Address, '@')+1:]
	}
	if !isDotAtom(host) {
		return nil, fmt.Errorf("mail: sender: hostname %q is not a domain", host)
	}
	return &Sender{srv: srv, o: o, host: host}, nil
}

// Send mails text to the address to ("email:a@b", "mailto:a@b", "a@b").
// The Subject, Message-ID (from id, else the envelope's message) and
// In-Reply-To/References (from the envelope's parent) come from the
// first envelope in text; a text without an envelope is refused.
//
// Errors wrap transports.ErrPermanent when retrying cannot help: a bad
// address, a text without envelope, and SMTP 5xx answers (including a
// refused password). A server that cannot be reached or does not answer
// within Options.Timeout gives a plain, retryable error.
func (s *Sender) Send(ctx context.Context, to, id string, text []byte) error {
	rcpt, err := parseRecipient(to)
	if err != nil {
		return err
	}
	o := &outgoing{to: rcpt, text: text, id: id}
	if err := o.fromText(s.host); err != nil {
		return err
	}
	return s.send(ctx, o)
}

// send composes and delivers one mail.
func (s *Sender) send(ctx context.Context, o *outgoing) error {
	if err := checkPath(o.to.Address); err != nil {
		return fmt.Errorf("mail: %w: address %q: %v", transports.ErrPermanent, o.to.Address, err)
	}
	msg := compose(s.o.from, s.host, o)
	start := time.Now()
	if err := s.deliver(ctx, o.to.Address, msg); err != nil {
		return err
	}
	s.o.Logger.LogAttrs(ctx, slog.LevelInfo, "mail sent", slog.String("to", o.to.Address),
		slog.String("message_id", msgID(o.id, s.host)), slog.Int("bytes", len(msg)),
		slog.Duration("took", time.Since(start)))
	return nil
}

// errNoStartTLS reports a server that does not offer STARTTLS
// (smtpStartTLS); with SecurityStartTLS the sender then goes on in the
// clear.
var errNoStartTLS = errors.New("server does not offer STARTTLS")

// deliver runs one SMTP session.
func (s *Sender) deliver(ctx context.Context, rcpt string, msg []byte) (err error) {
	where := "mail: smtp " + s.srv.Addr
	c, secure, err := s.connect(ctx)
	if err != nil && s.srv.Security == SecurityStartTLS && errors.Is(err, errNoStartTLS) {
		c, secure, err = s.connectPlain(ctx)
	}
	if err != nil {
		return classify(where, err)
	}
	defer c.Close()
	// The connection dies with ctx: no command outlives the caller.
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	c.CommandTimeout = s.o.Timeout
	c.SubmissionTimeout = 2 * s.o.Timeout
	c.DebugWriter = s.o.DebugWriter // after STARTTLS: the greeting, EHLO and STARTTLS before it are missing
	// The greeting (plaintext, implicit TLS) or the TLS handshake
	// (STARTTLS) happens here, under CommandTimeout.
	if err := c.Hello(s.host); err != nil {
		return classify(where, ctxErr(ctx, err))
	}
	if s.srv.Username != "" {
		if !secure && s.srv.Security != SecurityNone && !s.srv.loopback() {
			return fmt.Errorf("%s: %w: the server offers no STARTTLS; refusing to send the password in the clear (use Security: SecurityTLS, or SecurityNone to allow it)", where, transports.ErrPermanent)
		}
		if ok := c.SupportsAuth(sasl.Plain); !ok {
			return fmt.Errorf("%s: %w: the server offers no AUTH PLAIN", where, transports.ErrPermanent)
		}
		if err := c.Auth(sasl.NewPlainClient("", s.srv.Username, s.srv.Password)); err != nil {
			return classify(where+": AUTH", ctxErr(ctx, err))
		}
	}
	if err := c.SendMail(s.o.from.Address, []string{rcpt}, bytes.NewReader(msg)); err != nil {
		return classify(where, ctxErr(ctx, err))
	}
	if err := c.Quit(); err != nil {
		// The mail was accepted at the final dot; a failed QUIT loses
		// nothing.
		s.o.Logger.LogAttrs(ctx, slog.LevelDebug, "smtp quit", slog.String("error", err.Error()))
	}
	return nil
}

// connect dials and greets according to s.srv.Security. secure reports
// whether the session is encrypted.
func (s *Sender) connect(ctx context.Context) (c *smtp.Client, secure bool, err error) {
	switch s.srv.Security {
	case SecurityNone:
		return s.connectPlain(ctx)
	case SecurityTLS:
		conn, err := s.dial(ctx)
		if err != nil {
			return nil, false, err
		}
		tc := tls.Client(conn, s.o.tlsConfig(s.srv))
		hctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
		defer cancel()
		if err := tc.HandshakeContext(hctx); err != nil {
			conn.Close()
			return nil, false, fmt.Errorf("TLS handshake: %w", err)
		}
		c, err := s.greet(ctx, tc, func(conn net.Conn) (*smtp.Client, error) { return s.newClient(conn), nil })
		return c, true, err
	default: // SecurityStartTLS, SecurityRequireStartTLS
		conn, err := s.dial(ctx)
		if err != nil {
			return nil, false, err
		}
		c, err := s.greet(ctx, conn, func(conn net.Conn) (*smtp.Client, error) {
			return smtpStartTLS(conn, s.o.tlsConfig(s.srv), s.host)
		})
		return c, err == nil, err
	}
}

func (s *Sender) connectPlain(ctx context.Context) (*smtp.Client, bool, error) {
	conn, err := s.dial(ctx)
	if err != nil {
		return nil, false, err
	}
	c, err := s.greet(ctx, conn, func(conn net.Conn) (*smtp.Client, error) { return s.newClient(conn), nil })
	return c, false, err
}

// newClient returns a client on conn whose replies are bounded
// (MaxSMTPReply).
func (s *Sender) newClient(conn net.Conn) *smtp.Client {
	return smtp.NewClient(newBoundedConn(conn, false, ""))
}

func (s *Sender) dial(ctx context.Context) (net.Conn, error) {
	d := net.Dialer{Timeout: s.o.Timeout}
	conn, err := d.DialContext(ctx, "tcp", s.srv.Addr)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	return conn, nil
}

// greet runs mk, which reads the server's greeting (and may run EHLO and
// STARTTLS), bounded by Options.Timeout and ctx: go-smtp's own greeting
// timeout is five minutes.
func (s *Sender) greet(ctx context.Context, conn net.Conn, mk func(net.Conn) (*smtp.Client, error)) (*smtp.Client, error) {
	timedOut := make(chan struct{})
	t := time.AfterFunc(s.o.Timeout, func() { close(timedOut); conn.Close() })
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	c, err := mk(conn)
	t.Stop()
	stop()
	if err != nil {
		conn.Close()
		select {
		case <-timedOut:
			return nil, fmt.Errorf("no greeting within %v: %w", s.o.Timeout, context.DeadlineExceeded)
		default:
		}
		return nil, ctxErr(ctx, err)
	}
	return c, nil
}

// ctxErr prefers the context's error over the closed-connection error it
// caused.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

// classify wraps err with where, and with transports.ErrPermanent for
// SMTP 5xx answers.
func classify(where string, err error) error {
	var se *smtp.SMTPError
	if errors.As(err, &se) && se.Code >= 500 {
		return fmt.Errorf("%s: %w: %w", where, transports.ErrPermanent, err)
	}
	return fmt.Errorf("%s: %w", where, err)
}
