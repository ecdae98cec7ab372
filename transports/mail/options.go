package mail

import (
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	netmail "net/mail"
	"strings"
	"time"
)

// Security says how a connection to a mail server is protected.
type Security int

const (
	// SecurityStartTLS (the zero value) upgrades the connection with
	// STARTTLS when the server offers it. When it does not, the
	// connection stays plaintext, and a password is then sent only to a
	// loopback address: elsewhere the connection is refused with an
	// error rather than leaking the password.
	SecurityStartTLS Security = iota
	// SecurityRequireStartTLS upgrades with STARTTLS or fails.
	SecurityRequireStartTLS
	// SecurityTLS is implicit TLS from the first byte (ports 465, 993).
	SecurityTLS
	// SecurityNone never encrypts, even when the server offers STARTTLS,
	// and sends passwords in the clear. Only for loopback or a trusted
	// network.
	SecurityNone
)

// String returns the config spelling: starttls, require-starttls, tls or none.
func (s Security) String() string {
	switch s {
	case SecurityStartTLS:
		return "starttls"
	case SecurityRequireStartTLS:
		return "require-starttls"
	case SecurityTLS:
		return "tls"
	case SecurityNone:
		return "none"
	}
	return fmt.Sprintf("Security(%d)", int(s))
}

// Server is an SMTP server to send through or an IMAP server to read from.
type Server struct {
	// Addr is host:port, e.g. "smtp.example.org:587" or
	// "imap.example.org:143".
	Addr string
	// Security is how the connection is protected; STARTTLS when offered
	// by default.
	Security Security
	// Username and Password authenticate: AUTH PLAIN for SMTP (no AUTH
	// when Username is empty), LOGIN for IMAP (required).
	Username string
	Password string
}

func (s Server) host() string {
	h, _, err := net.SplitHostPort(s.Addr)
	if err != nil {
		return s.Addr
	}
	return h
}

// loopback reports whether the server is on this machine.
func (s Server) loopback() bool {
	h := s.host()
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Defaults.
const (
	// DefaultMailbox is the mailbox the Receiver watches.
	DefaultMailbox = "INBOX"
	// DefaultPollInterval is how often the Receiver looks for new mail
	// when it cannot IDLE, and how often it refreshes IDLE with a full
	// scan when it can.
	DefaultPollInterval = time.Minute
	// DefaultProcessedKeyword flags processed mail.
	DefaultProcessedKeyword = "$CrosstalkProcessed"
	// DefaultMaxMessageSize bounds a mail the Receiver fetches: 8 MiB, the
	// relay's intake limit. Larger mail is not fetched (see Receiver).
	DefaultMaxMessageSize = 8 << 20
	// DefaultTimeout bounds dialing, the TLS handshake and each command.
	DefaultTimeout = 30 * time.Second
)

// Options configures a Sender or a Receiver. A nil *Options means the
// defaults; a zero field means that field's default.
type Options struct {
	// TLSConfig is used for STARTTLS and implicit TLS. Nil means the
	// system roots, with the server name taken from Server.Addr. Tests
	// may set InsecureSkipVerify or RootCAs for a self-signed server.
	TLSConfig *tls.Config

	// From is the address outgoing mail comes from, "relay@example.org"
	// or "Crosstalk Relay <relay@example.org>". A Sender requires it.
	From string
	// Hostname is the right-hand side of the Message-IDs made from
	// envelope ids (<message-id@Hostname>) and the name sent with EHLO.
	// The default is the domain of From.
	Hostname string

	// Mailbox is the mailbox the Receiver watches; DefaultMailbox.
	Mailbox string
	// StateFile is where the Receiver remembers the mailbox's
	// UIDVALIDITY, the last processed UID and the Message-IDs of recent
	// mail, durably (write temp + rename). A Receiver requires it. One
	// Receiver per state file.
	StateFile string
	// PollInterval is how often to look for new mail without IDLE, and
	// how often a full scan runs even with IDLE; DefaultPollInterval.
	PollInterval time.Duration
	// DisableIdle makes the Receiver poll even when the server has IDLE.
	DisableIdle bool
	// ProcessedKeyword is the IMAP keyword set (with \Seen) on processed
	// mail; DefaultProcessedKeyword.
	ProcessedKeyword string
	// MoveTo, when set, is a mailbox processed mail is moved to (after
	// flagging); it is created if missing. Empty keeps mail in Mailbox.
	MoveTo string
	// MaxMessageSize bounds the mail the Receiver fetches;
	// DefaultMaxMessageSize.
	MaxMessageSize int64

	// Timeout bounds dialing, TLS handshakes and each SMTP command;
	// DefaultTimeout. (IMAP commands have go-imap's own 30 s bound.)
	Timeout time.Duration

	// Logger receives connection events, retries and rejected mail; nil
	// discards. Bodies are never logged.
	Logger *slog.Logger
	// DebugWriter, when set, receives the raw SMTP and IMAP traffic.
	// WARNING: that includes passwords (AUTH PLAIN, LOGIN) and every mail
	// body: use it only for debugging, never in production logs.
	DebugWriter io.Writer
}

// options is Options with the defaults filled in.
type options struct {
	Options
	from *netmail.Address
}

func newOptions(o *Options) options {
	var op options
	if o != nil {
		op.Options = *o
	}
	if op.Mailbox == "" {
		op.Mailbox = DefaultMailbox
	}
	if op.PollInterval <= 0 {
		op.PollInterval = DefaultPollInterval
	}
	if op.ProcessedKeyword == "" {
		op.ProcessedKeyword = DefaultProcessedKeyword
	}
	if op.MaxMessageSize <= 0 {
		op.MaxMessageSize = DefaultMaxMessageSize
	}
	if op.Timeout <= 0 {
		op.Timeout = DefaultTimeout
	}
	if op.Logger == nil {
		op.Logger = slog.New(slog.DiscardHandler)
	}
	return op
}

// tlsConfig returns the TLS configuration for a connection to srv.
func (o *options) tlsConfig(srv Server) *tls.Config {
	var c *tls.Config
	if o.TLSConfig != nil {
		c = o.TLSConfig.Clone()
	} else {
		c = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if c.ServerName == "" {
		c.ServerName = srv.host()
	}
	return c
}

// check reports a Server without a usable host:port address; role and
// proto name it in the error ("sender", "SMTP").
func (s Server) check(role, proto string) error {
	if s.Addr == "" {
		return fmt.Errorf("mail: %s: no %s server address", role, proto)
	}
	if _, _, err := net.SplitHostPort(s.Addr); err != nil {
		return fmt.Errorf("mail: %s: %s address %q: %w", role, proto, s.Addr, err)
	}
	return nil
}
