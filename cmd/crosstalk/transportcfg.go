package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/crosstalk-go/crosstalk/gateway/server"
	"github.com/crosstalk-go/crosstalk/transports/mail"
)

// FolderConfig is the relay's watched folder (docs/design.md §5.5). It is on by
// default: DataDir/inbox is watched, DataDir/outbox/<receiver>/ written.
type FolderConfig struct {
	// Disabled turns the folder transport off.
	Disabled bool `toml:"disabled"`
	// Inbox is the watched directory; DataDir/inbox by default.
	Inbox string `toml:"inbox"`
	// Outbox is where envelopes for agents with transport "folder" are
	// written, one subdirectory per address; DataDir/outbox by default.
	Outbox string `toml:"outbox"`
}

// ClipboardConfig is the clipboard transport. Watching is off by default:
// a daemon that reads the clipboard should be asked for.
type ClipboardConfig struct {
	// Watch ingests envelopes copied to the clipboard.
	Watch bool `toml:"watch"`
	// Fence wraps envelopes the relay copies in a ``` fence.
	Fence bool `toml:"fence"`
}

// MailConfig is the email transport: IMAP in, SMTP out. Absent: no mail.
type MailConfig struct {
	IMAP         string `toml:"imap"`          // host:port of the IMAP server
	IMAPSecurity string `toml:"imap_security"` // starttls (default), require-starttls, tls, none
	SMTP         string `toml:"smtp"`          // host:port of the SMTP submission server
	SMTPSecurity string `toml:"smtp_security"` // as imap_security
	Username     string `toml:"username"`
	Password     string `toml:"password"`
	PasswordFile string `toml:"password_file"`
	From         string `toml:"from"`       // sender address of the relay's mail
	Mailbox      string `toml:"mailbox"`    // INBOX by default
	MoveTo       string `toml:"move_to"`    // move processed mail there instead of flagging it
	StateFile    string `toml:"state_file"` // DataDir/mail-state.json by default
}

func parseSecurity(field, s string) (mail.Security, error) {
	for _, v := range []mail.Security{mail.SecurityStartTLS, mail.SecurityRequireStartTLS, mail.SecurityTLS, mail.SecurityNone} {
		if s == v.String() || s == "" && v == mail.SecurityStartTLS {
			return v, nil
		}
	}
	return 0, fmt.Errorf("mail.%s: %q is not starttls, require-starttls, tls or none", field, s)
}

// validate checks the transport sections.
func (c *Config) validateTransports() error {
	var errs []error
	if m := c.Mail; m != nil {
		if m.IMAP == "" && m.SMTP == "" {
			errs = append(errs, errors.New("mail: give imap, smtp or both"))
		}
		if _, err := parseSecurity("imap_security", m.IMAPSecurity); err != nil {
			errs = append(errs, err)
		}
		if _, err := parseSecurity("smtp_security", m.SMTPSecurity); err != nil {
			errs = append(errs, err)
		}
		if m.SMTP != "" && m.From == "" {
			errs = append(errs, errors.New("mail.from: needed to send mail"))
		}
	}
	for _, a := range c.Agents {
		switch a.Transport {
		case "", "http", "clipboard":
		case "a2a":
			if u, err := url.Parse(a.Address); a.Address != "" && (err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "") {
				errs = append(errs, fmt.Errorf("agents %q: transport a2a needs the agent's http(s) URL as address, not %q", a.ID, a.Address))
			}
		case "folder":
			if c.Folder.Disabled {
				errs = append(errs, fmt.Errorf("agents %q: transport folder, but [folder] is disabled", a.ID))
			}
		case "mail":
			if c.Mail == nil || c.Mail.SMTP == "" {
				errs = append(errs, fmt.Errorf("agents %q: transport mail needs [mail] smtp", a.ID))
			}
		default:
			errs = append(errs, fmt.Errorf("agents %q: transport %q is not http, a2a, folder, mail or clipboard", a.ID, a.Transport))
		}
		if a.Transport != "" && a.Transport != "clipboard" && a.Address == "" {
			errs = append(errs, fmt.Errorf("agents %q: transport %s needs an address", a.ID, a.Transport))
		}
	}
	return errors.Join(errs...)
}

// mailOptions turns [mail] into the server's mail transport (nil when
// absent), reading password_file.
func (c *Config) mailOptions() (*server.MailOptions, error) {
	m := c.Mail
	if m == nil {
		return nil, nil
	}
	password := m.Password
	if m.PasswordFile != "" {
		b, err := os.ReadFile(m.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("mail.password_file: %w", err)
		}
		password = strings.TrimSpace(string(b))
	}
	o := &server.MailOptions{Options: mail.Options{From: m.From, Mailbox: m.Mailbox, MoveTo: m.MoveTo, StateFile: m.StateFile}}
	if m.SMTP != "" {
		sec, _ := parseSecurity("smtp_security", m.SMTPSecurity) // validated
		o.SMTP = &mail.Server{Addr: m.SMTP, Security: sec, Username: m.Username, Password: password}
	}
	if m.IMAP != "" {
		sec, _ := parseSecurity("imap_security", m.IMAPSecurity)
		o.IMAP = &mail.Server{Addr: m.IMAP, Security: sec, Username: m.Username, Password: password}
	}
	return o, nil
}
