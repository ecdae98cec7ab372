package mail

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	netmail "net/mail"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/crosstalk-go/crosstalk/transports"
)

// Receiver reads envelopes from an IMAP mailbox. See the package comment
// for what it guarantees.
type Receiver struct {
	srv     Server
	reply   *Sender
	o       options
	running atomic.Bool
}

var _ transports.Receiver = (*Receiver)(nil)

// NewReceiver returns a Receiver for the mailbox Options.Mailbox on srv.
// Options.StateFile is required. reply, when not nil, sends the Handler's
// replies to each mail's From address (Inbound.CanReply; never Reply-To,
// see the package comment); with a nil reply no mail can be answered.
func NewReceiver(srv Server, reply *Sender, opts *Options) (*Receiver, error) {
	o := newOptions(opts)
	if err := srv.check("receiver", "IMAP"); err != nil {
		return nil, err
	}
	if srv.Username == "" {
		return nil, errors.New("mail: receiver: an IMAP username is required")
	}
	if o.StateFile == "" {
		return nil, errors.New("mail: receiver: Options.StateFile is required")
	}
	if !validKeyword(o.ProcessedKeyword) {
		return nil, fmt.Errorf("mail: receiver: %q is not an IMAP keyword", o.ProcessedKeyword)
	}
	return &Receiver{srv: srv, reply: reply, o: o}, nil
}

func validKeyword(k string) bool {
	if k == "" || k[0] == '\\' {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`(){%*"\]`, c) >= 0 {
			return false
		}
	}
	return true
}

// errAuth marks a refused login: reconnecting cannot fix it.
var errAuth = errors.New("login refused")

// handlerError is a Handler (or reply) failure for one mail: the mail
// stays unprocessed and is offered again after a pause.
type handlerError struct {
	uid uint32
	err error
}

func (e *handlerError) Error() string {
	return fmt.Sprintf("mail: uid %d: %v", e.uid, e.err)
}

func (e *handlerError) Unwrap() error { return e.err }

// Receive watches the mailbox and calls h for every new mail until ctx
// ends; it returns nil then. A first connection or login that fails, and
// any refused login, is returned as an error (a configuration problem);
// a connection lost later is re-established with backoff, logged, and
// never ends Receive. Only one Receive may run at a time.
func (r *Receiver) Receive(ctx context.Context, h transports.Handler) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("mail: receiver: Receive is already running")
	}
	defer r.running.Store(false)
	st, err := loadState(r.o.StateFile)
	if err != nil {
		return err
	}
	backoff := time.Second
	everConnected := false
	for {
		connected := false
		start := time.Now()
		err := r.session(ctx, h, st, &connected)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errAuth) || !everConnected && !connected {
			return err
		}
		everConnected = everConnected || connected
		if time.Since(start) > 2*time.Minute {
			backoff = time.Second
		}
		r.o.Logger.LogAttrs(ctx, slog.LevelWarn, "imap connection lost; reconnecting",
			slog.String("server", r.srv.Addr), slog.String("error", errString(err)), slog.Duration("in", backoff))
		if !sleep(ctx, backoff) {
			return nil
		}
		backoff = min(2*backoff, max(r.o.PollInterval, time.Minute))
	}
}

func errString(err error) string {
	if err == nil {
		return "closed by the server"
	}
	return err.Error()
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// session is one IMAP connection: connect, log in, select, then scan and
// wait for news until ctx ends or the connection fails.
func (r *Receiver) session(ctx context.Context, h transports.Handler, st *state, connected *bool) error {
	news := make(chan struct{}, 1)
	c, err := r.connect(ctx, news)
	if err != nil {
		return err
	}
	// Cancelling ctx lets a running command finish for a moment (a flag
	// being stored), then closes the connection.
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(3*time.Second, func() { c.Close() }) })
	defer func() {
		if stop() {
			// Not cancelled: log out politely, briefly.
			done := make(chan struct{})
			go func() { c.Logout().Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(2 * time.Second):
			}
		}
		c.Close()
	}()
	if err := c.Login(r.srv.Username, r.srv.Password).Wait(); err != nil {
		var ie *imap.Error
		if errors.As(err, &ie) && ie.Code != imap.ResponseCodeUnavailable && ie.Code != imap.ResponseCodeInUse {
			// Refused (AUTHENTICATIONFAILED, a bare NO, …): retrying with
			// the same password cannot help. UNAVAILABLE and INUSE are
			// temporary and reconnected like a lost connection.
			return fmt.Errorf("mail: imap %s: %w as %q: %w", r.srv.Addr, errAuth, r.srv.Username, err)
		}
		return fmt.Errorf("mail: imap %s: login: %w", r.srv.Addr, err)
	}
	sel, err := c.Select(r.o.Mailbox, nil).Wait()
	if err != nil {
		return fmt.Errorf("mail: imap %s: select %q: %w", r.srv.Addr, r.o.Mailbox, err)
	}
	*connected = true
	if st.UIDValidity != sel.UIDValidity || st.Mailbox != r.o.Mailbox {
		if st.UIDValidity != 0 {
			r.o.Logger.LogAttrs(ctx, slog.LevelWarn, "mailbox UIDVALIDITY changed: rescanning, skipping mail by keyword and remembered Message-IDs",
				slog.String("mailbox", r.o.Mailbox), slog.Uint64("old", uint64(st.UIDValidity)), slog.Uint64("new", uint64(sel.UIDValidity)))
		}
		st.reset(r.o.Mailbox, sel.UIDValidity)
		if err := st.save(); err != nil {
			return err
		}
	}
	if r.o.MoveTo != "" {
		if _, err := c.Status(r.o.MoveTo, &imap.StatusOptions{NumMessages: true}).Wait(); err != nil {
			if err := c.Create(r.o.MoveTo, nil).Wait(); err != nil {
				return fmt.Errorf("mail: imap %s: creating %q: %w", r.srv.Addr, r.o.MoveTo, err)
			}
		}
	}
	s := &scanner{r: r, c: c, h: h, st: st, uidValidity: sel.UIDValidity,
		keyword: keywordAllowed(sel.PermanentFlags, imap.Flag(r.o.ProcessedKeyword))}
	if !s.keyword {
		r.o.Logger.LogAttrs(ctx, slog.LevelWarn, "the mailbox does not take keywords: processed mail is marked \\Seen only; the state file alone prevents reprocessing",
			slog.String("mailbox", r.o.Mailbox))
	}
	idle := !r.o.DisableIdle && c.Caps().Has(imap.CapIdle)
	if !idle && !r.o.DisableIdle {
		r.o.Logger.LogAttrs(ctx, slog.LevelInfo, "the server has no IDLE: polling", slog.Duration("interval", r.o.PollInterval))
	}
	failures := 0
	for {
		// Anything announced from here on triggers another scan.
		drain(news)
		err := s.scan(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := r.o.PollInterval
		var he *handlerError
		switch {
		case errors.As(err, &he):
			failures++
			wait = min(time.Second<<min(failures-1, 10), r.o.PollInterval)
			r.o.Logger.LogAttrs(ctx, slog.LevelWarn, "mail not processed; offered again later",
				slog.Uint64("uid", uint64(he.uid)), slog.String("error", he.err.Error()), slog.Duration("in", wait))
		case err != nil:
			return err
		default:
			failures = 0
		}
		if idle && failures == 0 {
			ok, err := r.idle(ctx, c, news, wait)
			if err != nil {
				return err
			}
			if !ok {
				idle = false
				r.o.Logger.LogAttrs(ctx, slog.LevelWarn, "IDLE failed: polling instead", slog.Duration("interval", r.o.PollInterval))
			}
		} else {
			select {
			case <-ctx.Done():
			case <-c.Closed():
				return errors.New("mail: imap: connection closed")
			case <-time.After(wait):
			}
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

func drain(ch chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

func keywordAllowed(perm []imap.Flag, kw imap.Flag) bool {
	for _, f := range perm {
		if f == imap.FlagWildcard || strings.EqualFold(string(f), string(kw)) {
			return true
		}
	}
	return false
}

// idle waits in IDLE until the server announces new mail, d passes, or
// ctx ends. ok is false when the server refused IDLE (then the caller
// polls); err is a broken connection.
func (r *Receiver) idle(ctx context.Context, c *imapclient.Client, news chan struct{}, d time.Duration) (ok bool, err error) {
	cmd, err := c.Idle()
	if err != nil {
		var ie *imap.Error
		if errors.As(err, &ie) {
			return false, nil
		}
		return false, fmt.Errorf("mail: imap %s: IDLE: %w", r.srv.Addr, err)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-news:
	case <-t.C:
	case <-ctx.Done():
	case <-c.Closed():
	}
	if err := cmd.Close(); err != nil {
		return false, fmt.Errorf("mail: imap %s: IDLE: %w", r.srv.Addr, err)
	}
	if err := cmd.Wait(); err != nil {
		var ie *imap.Error
		if errors.As(err, &ie) {
			return false, nil
		}
		if ctx.Err() != nil {
			return true, nil
		}
		return false, fmt.Errorf("mail: imap %s: IDLE: %w", r.srv.Addr, err)
	}
	return true, nil
}

// connect dials the server and waits for its greeting.
func (r *Receiver) connect(ctx context.Context, news chan struct{}) (*imapclient.Client, error) {
	opts := &imapclient.Options{
		TLSConfig:   r.o.tlsConfig(r.srv),
		DebugWriter: r.o.DebugWriter,
		WordDecoder: &mime.WordDecoder{CharsetReader: charsetReader},
		UnilateralDataHandler: &imapclient.UnilateralDataHandler{
			Mailbox: func(data *imapclient.UnilateralDataMailbox) {
				if data.NumMessages != nil {
					select {
					case news <- struct{}{}:
					default:
					}
				}
			},
		},
	}
	where := "mail: imap " + r.srv.Addr
	dial := func() (net.Conn, error) {
		d := net.Dialer{Timeout: r.o.Timeout}
		conn, err := d.DialContext(ctx, "tcp", r.srv.Addr)
		if err != nil {
			return nil, fmt.Errorf("%s: dial: %w", where, err)
		}
		return conn, nil
	}
	// startTLS upgrades conn (imapStartTLS) and greets over TLS.
	startTLS := func(ctx context.Context, conn net.Conn) (*imapclient.Client, error) {
		tc, err := imapStartTLS(conn, opts.TLSConfig)
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("%s: STARTTLS: %w", where, ctxErr(ctx, err))
		}
		c := imapclient.New(tc, opts)
		if err := c.WaitGreeting(); err != nil {
			c.Close()
			return nil, fmt.Errorf("%s: greeting: %w", where, ctxErr(ctx, err))
		}
		return c, nil
	}
	conn, err := dial()
	if err != nil {
		return nil, err
	}
	// Bound the greeting and handshake by Timeout and ctx.
	t := time.AfterFunc(r.o.Timeout, func() { conn.Close() })
	defer t.Stop()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	switch r.srv.Security {
	case SecurityTLS:
		tc := tls.Client(conn, opts.TLSConfig)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("%s: TLS handshake: %w", where, ctxErr(ctx, err))
		}
		c := imapclient.New(newBoundedConn(tc, true, ""), opts)
		if err := c.WaitGreeting(); err != nil {
			c.Close()
			return nil, fmt.Errorf("%s: greeting: %w", where, ctxErr(ctx, err))
		}
		return c, nil
	case SecurityRequireStartTLS:
		return startTLS(ctx, conn)
	}
	c := imapclient.New(newBoundedConn(conn, true, ""), opts)
	if err := c.WaitGreeting(); err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: greeting: %w", where, ctxErr(ctx, err))
	}
	if r.srv.Security == SecurityNone {
		return c, nil
	}
	// SecurityStartTLS: go-imap upgrades only a fresh connection, so when
	// the greeting offers STARTTLS, start over with one.
	if !c.Caps().Has(imap.CapStartTLS) {
		if !r.srv.loopback() {
			c.Close()
			return nil, fmt.Errorf("%s: %w: the server offers no STARTTLS; refusing to send the password in the clear (use Security: SecurityTLS, or SecurityNone to allow it)", where, errAuth)
		}
		return c, nil
	}
	c.Close()
	conn2, err := dial()
	if err != nil {
		return nil, err
	}
	stop2 := context.AfterFunc(ctx, func() { conn2.Close() })
	defer stop2()
	t2 := time.AfterFunc(r.o.Timeout, func() { conn2.Close() })
	defer t2.Stop()
	return startTLS(ctx, conn2)
}

// scanner processes the new mail of one session.
type scanner struct {
	r           *Receiver
	c           *imapclient.Client
	h           transports.Handler
	st          *state
	uidValidity uint32
	keyword     bool
}

// scan processes every mail above the last processed UID, in UID order.
// It stops at the first mail the Handler fails on (a *handlerError): later
// mail waits, so mail is processed in order.
func (s *scanner) scan(ctx context.Context) error {
	crit := &imap.SearchCriteria{UID: []imap.UIDSet{{imap.UIDRange{Start: imap.UID(s.st.LastUID + 1), Stop: 0}}}}
	if s.keyword {
		crit.NotFlag = []imap.Flag{imap.Flag(s.r.o.ProcessedKeyword)}
	}
	data, err := s.c.UIDSearch(crit, nil).Wait()
	if err != nil {
		return fmt.Errorf("mail: imap %s: search: %w", s.r.srv.Addr, err)
	}
	var uids []uint32
	for _, u := range data.AllUIDs() {
		// "n:*" always matches the highest UID, even below n.
		if uint32(u) > s.st.LastUID {
			uids = append(uids, uint32(u))
		}
	}
	slices.Sort(uids)
	for _, uid := range uids {
		if ctx.Err() != nil {
			return nil
		}
		if err := s.process(ctx, uid); err != nil {
			return err
		}
	}
	return nil
}

var bodySection = &imap.FetchItemBodySection{Peek: true}

// maxHeaderFetch bounds the header read before the size is known (with
// MaxMessageSize, when that is smaller): a mail that is nearly all header
// must not be read whole when it is above the limit.
const maxHeaderFetch = 256 << 10

// headerSection is the header of a mail, at most limit bytes of it.
func headerSection(limit int64) *imap.FetchItemBodySection {
	return &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, Peek: true,
		Partial: &imap.SectionPartial{Offset: 0, Size: min(limit, maxHeaderFetch)}}
}

// completeLines cuts a header read only in part back to its last
// complete line, so that a field name cut in two does not make the whole
// header unreadable.
func completeLines(b []byte) []byte {
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[:i+1]
	}
	return nil
}

// process handles one mail: fetch, hand over, reply, mark, remember.
func (s *scanner) process(ctx context.Context, uid uint32) error {
	log := s.r.o.Logger.With(slog.Uint64("uid", uint64(uid)))
	set := imap.UIDSetNum(imap.UID(uid))
	hs := headerSection(s.r.o.MaxMessageSize)
	m, err := fetchOne(s.c.Fetch(set, &imap.FetchOptions{UID: true, Flags: true, RFC822Size: true,
		BodySection: []*imap.FetchItemBodySection{hs}}), hs.Partial.Size)
	if err != nil {
		return fmt.Errorf("mail: imap %s: fetch uid %d: %w", s.r.srv.Addr, uid, err)
	}
	if m == nil { // expunged meanwhile
		return s.remember(uid, "")
	}
	rawHdr := m.body
	truncated := m.over || int64(len(rawHdr)) >= hs.Partial.Size
	if truncated {
		rawHdr = completeLines(rawHdr)
	}
	hdr := parseHeader(rawHdr)
	mid := cleanMsgID(hdr.Get("Message-Id"))
	if slices.ContainsFunc(m.flags, func(f imap.Flag) bool { return strings.EqualFold(string(f), s.r.o.ProcessedKeyword) }) {
		return s.remember(uid, mid)
	}
	if s.st.seen(mid) {
		log.LogAttrs(ctx, slog.LevelInfo, "mail already processed (same Message-ID): marked, not offered again", slog.String("message_id", mid))
		if err := s.mark(uid); err != nil {
			return err
		}
		return s.remember(uid, mid)
	}

	var x extraction
	if m.size > s.r.o.MaxMessageSize {
		log.LogAttrs(ctx, slog.LevelWarn, "mail too large: not fetched", slog.Int64("size", m.size),
			slog.Int64("limit", s.r.o.MaxMessageSize), slog.String("message_id", mid))
		x.Texts = []part{{Text: tooLarge(hdr, m.size, s.r.o.MaxMessageSize)}}
	} else if b, err := fetchOne(s.c.Fetch(set, &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{bodySection}}), s.r.o.MaxMessageSize); err != nil {
		return fmt.Errorf("mail: imap %s: fetch uid %d: %w", s.r.srv.Addr, uid, err)
	} else if b == nil {
		return s.remember(uid, "")
	} else if b.over {
		// RFC822.SIZE understated the mail: only the limit was read.
		log.LogAttrs(ctx, slog.LevelWarn, "mail larger than its RFC822.SIZE and the limit: not read on", slog.Int64("size", m.size),
			slog.Int64("limit", s.r.o.MaxMessageSize), slog.String("message_id", mid))
		x.Texts = []part{{Text: tooLarge(hdr, -1, s.r.o.MaxMessageSize)}}
	} else {
		raw := b.body
		if truncated {
			// The whole header is here now: decide on all of it (an
			// Auto-Submitted field may follow the part read first).
			if msg, err := netmail.ReadMessage(bytes.NewReader(raw)); err == nil {
				hdr = msg.Header
				mid = cleanMsgID(hdr.Get("Message-Id"))
			}
		}
		x = extract(raw)
		for _, n := range x.Notes {
			log.LogAttrs(ctx, slog.LevelWarn, "mail: "+n, slog.String("message_id", mid))
		}
	}
	texts := x.Texts

	var to *netmail.Address
	canReply := false
	if s.r.reply != nil {
		to, canReply = mayReply(hdr, x.Found)
	}
	var replies [][]byte
	for _, p := range texts {
		in := transports.Inbound{Transport: "mail", Source: s.source(uid, mid, p.Path, len(texts) > 1), Data: p.Text, CanReply: canReply}
		rep, err := s.h(ctx, in)
		if errors.Is(err, transports.ErrPermanent) {
			// Refused whole for good (more envelopes than the relay
			// takes from one intake): offered again, it would be refused
			// again, and every later mail would wait behind it. The
			// relay records a notice naming it instead.
			log.LogAttrs(ctx, slog.LevelError, "mail refused whole by the handler: a notice is handed over instead, and the mail marked",
				slog.String("message_id", mid), slog.String("error", err.Error()))
			in.Data = refusedWhole(hdr, err)
			rep, err = s.h(ctx, in)
		}
		if err != nil {
			return &handlerError{uid: uid, err: err}
		}
		if len(bytes.TrimSpace(rep)) > 0 {
			replies = append(replies, rep)
		}
	}
	if canReply && len(replies) > 0 {
		if err := s.sendReply(ctx, hdr, mid, to, bytes.Join(replies, []byte("\n"))); err != nil {
			if !errors.Is(err, transports.ErrPermanent) {
				return &handlerError{uid: uid, err: fmt.Errorf("reply: %w", err)}
			}
			log.LogAttrs(ctx, slog.LevelError, "reply cannot be delivered: mail marked processed anyway",
				slog.String("to", to.Address), slog.String("error", err.Error()))
		}
	}
	if err := s.mark(uid); err != nil {
		return err
	}
	return s.remember(uid, mid)
}

// remember records uid as processed in the state file.
func (s *scanner) remember(uid uint32, mid string) error {
	s.st.done(uid, mid)
	return s.st.save()
}

// mark flags a processed mail \Seen and with the keyword, and moves it
// when Options.MoveTo is set.
func (s *scanner) mark(uid uint32) error {
	set := imap.UIDSetNum(imap.UID(uid))
	flags := []imap.Flag{imap.FlagSeen}
	if s.keyword {
		flags = append(flags, imap.Flag(s.r.o.ProcessedKeyword))
	}
	if err := s.c.Store(set, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: flags}, nil).Close(); err != nil {
		return fmt.Errorf("mail: imap %s: flag uid %d: %w", s.r.srv.Addr, uid, err)
	}
	if s.r.o.MoveTo != "" {
		if _, err := s.c.Move(set, s.r.o.MoveTo).Wait(); err != nil {
			return fmt.Errorf("mail: imap %s: move uid %d to %q: %w", s.r.srv.Addr, uid, s.r.o.MoveTo, err)
		}
	}
	return nil
}

// source names a mail as an IMAP URL (RFC 5092) plus its Message-ID.
func (s *scanner) source(uid uint32, mid, path string, several bool) string {
	u := "imap://" + url.PathEscape(s.r.srv.Username) + "@" + s.r.srv.Addr + "/" + url.PathEscape(s.r.o.Mailbox) +
		";UIDVALIDITY=" + strconv.FormatUint(uint64(s.uidValidity), 10) + "/;UID=" + strconv.FormatUint(uint64(uid), 10)
	if several {
		u += "/;SECTION=" + partName(path)
	}
	if mid != "" {
		u += " " + mid
	}
	return u
}

// mayReply returns where a reply to a mail goes, and whether one may be
// sent at all: see replyAddress. A mail without any envelope is answered
// (with the relay's ERROR envelope) only when its Subject carries
// SubjectPrefix: ordinary mail that lands in the mailbox is recorded,
// never answered.
func mayReply(h netmail.Header, found bool) (*netmail.Address, bool) {
	a, ok := replyAddress(h)
	if !ok {
		return nil, false
	}
	if !found {
		subj, err := (&mime.WordDecoder{CharsetReader: charsetReader}).DecodeHeader(h.Get("Subject"))
		if err != nil {
			subj = h.Get("Subject")
		}
		if !strings.Contains(subj, SubjectPrefix) {
			return nil, false
		}
	}
	return a, true
}

// replyAddress returns where a reply goes — the From address, never
// Reply-To, and only when the Return-Path, if any, agrees with it
// (sameSender) — and whether one may be sent at all: never to automatic
// mail — RFC 3834 §2:
// Auto-Submitted other than "no", Precedence bulk/junk/list, List-Id,
// bounces (multipart/report, an empty Return-Path, MAILER-DAEMON). That
// also ends every mail loop: the Receiver's own replies are
// Auto-Submitted.
func replyAddress(h netmail.Header) (*netmail.Address, bool) {
	if as := strings.ToLower(strings.TrimSpace(h.Get("Auto-Submitted"))); as != "" && !strings.HasPrefix(as, "no") {
		return nil, false
	}
	switch strings.ToLower(strings.TrimSpace(h.Get("Precedence"))) {
	case "bulk", "junk", "list":
		return nil, false
	}
	if h.Get("List-Id") != "" || strings.TrimSpace(h.Get("Return-Path")) == "<>" {
		return nil, false
	}
	if mt, _, _ := mime.ParseMediaType(h.Get("Content-Type")); mt == "multipart/report" {
		return nil, false
	}
	p := netmail.AddressParser{WordDecoder: &mime.WordDecoder{CharsetReader: charsetReader}}
	list, err := p.ParseList(h.Get("From"))
	if err != nil || len(list) == 0 {
		return nil, false
	}
	a := list[0]
	if local, _, _ := strings.Cut(a.Address, "@"); strings.EqualFold(local, "mailer-daemon") {
		return nil, false
	}
	if checkPath(a.Address) != nil {
		// A quoted local part would leave the angle brackets of the
		// RCPT command: the reply could go to a third party.
		return nil, false
	}
	if rp := strings.TrimSpace(h.Get("Return-Path")); rp != "" {
		ep, err := netmail.ParseAddress(rp)
		if err != nil || !sameSender(ep.Address, a.Address) {
			return nil, false
		}
	}
	return a, true
}

// sameSender reports whether the envelope sender rp (Return-Path) may be
// taken as the sender of a mail From from: the same domain, or a
// subdomain of From's (a provider's bounce domain; not From's parent,
// which could be a public suffix). Reply-To is never
// answered and From only so: both are whatever the mail says, and a reply
// to an address a stranger chose would make the relay mail third parties
// (backscatter). The Return-Path is the SMTP MAIL FROM, which the
// delivering server records and SPF checks.
func sameSender(rp, from string) bool {
	domain := func(a string) string {
		i := strings.LastIndexByte(a, '@')
		if i < 0 {
			return ""
		}
		return strings.ToLower(strings.TrimSuffix(a[i+1:], "."))
	}
	d1, d2 := domain(rp), domain(from)
	return d1 != "" && d2 != "" && (d1 == d2 || strings.HasSuffix(d1, "."+d2))
}

// sendReply mails the Handler's reply to the mail's sender, threaded
// under it.
func (s *scanner) sendReply(ctx context.Context, h netmail.Header, mid string, to *netmail.Address, text []byte) error {
	o := &outgoing{to: to, text: text, autoReplied: true}
	if mid != "" {
		o.inReplyTo = mid
		o.references = append(msgIDList(h.Get("References")), mid)
	}
	if err := o.fromText(s.r.reply.host); err != nil {
		return err
	}
	return s.r.reply.send(ctx, o)
}

// parseHeader reads a header block; a broken one gives what could be read.
func parseHeader(b []byte) netmail.Header {
	if !bytes.HasSuffix(b, []byte("\r\n\r\n")) && !bytes.HasSuffix(b, []byte("\n\n")) {
		b = append(bytes.Clone(b), "\r\n\r\n"...)
	}
	m, err := netmail.ReadMessage(bytes.NewReader(b))
	if err != nil {
		return netmail.Header{}
	}
	return m.Header
}

// tooLarge is the text handed over for mail above the size limit: no
// envelope, so the relay records an E-FORMAT notice that names the mail,
// and the sender gets an ERROR envelope back.
func tooLarge(h netmail.Header, size, limit int64) []byte {
	what := fmt.Sprintf("a mail of %d bytes", size)
	if size < 0 {
		what = "a mail" // the server understated its size
	}
	return notice(h, fmt.Sprintf("E-TOO-LARGE: %s is above the %d-byte limit and was not read.", what, limit))
}

// refusedWhole is the text handed over instead of a mail's text that the
// Handler refused for good: no envelope, so the relay records a notice
// that names the mail.
func refusedWhole(h netmail.Header, err error) []byte {
	return notice(h, "the mail was refused whole, nothing of it recorded: "+oneLine(err.Error()))
}

// notice is a line about a mail followed by the fields that name it.
func notice(h netmail.Header, what string) []byte {
	dec := &mime.WordDecoder{CharsetReader: charsetReader}
	field := func(k string) string {
		v, err := dec.DecodeHeader(h.Get(k))
		if err != nil {
			v = h.Get(k)
		}
		return oneLine(v)
	}
	return fmt.Appendf(nil, "mail: %s\n"+
		"Message-ID: %s\nFrom: %s\nSubject: %s\nDate: %s\n", what,
		field("Message-Id"), field("From"), field("Subject"), field("Date"))
}

// fetched is what a FETCH of one mail answered.
type fetched struct {
	flags []imap.Flag
	size  int64  // RFC822.SIZE, when asked for
	body  []byte // the body section asked for, at most the limit
	over  bool   // the section was longer than the limit
}

// fetchOne reads the answer to a FETCH of one mail, reading at most limit
// bytes of its body section: imapclient's Collect reads every literal
// whole, however large the server makes it. The rest of a longer literal
// is read and discarded, so the connection stays usable. It returns nil
// when the server sent nothing for the mail (expunged).
func fetchOne(cmd *imapclient.FetchCommand, limit int64) (*fetched, error) {
	var out *fetched
	var rerr error
	for rerr == nil {
		msg := cmd.Next()
		if msg == nil {
			break
		}
		f := &fetched{}
		for {
			item := msg.Next()
			if item == nil {
				break
			}
			switch it := item.(type) {
			case imapclient.FetchItemDataFlags:
				f.flags = it.Flags
			case imapclient.FetchItemDataRFC822Size:
				f.size = it.Size
			case imapclient.FetchItemDataBodySection:
				if it.Literal == nil {
					continue
				}
				b, err := io.ReadAll(io.LimitReader(it.Literal, limit+1))
				if err != nil {
					rerr = err
					continue
				}
				if int64(len(b)) > limit {
					b, f.over = b[:limit], true
				}
				f.body = b
			}
		}
		if out == nil {
			out = f
		}
	}
	if err := cmd.Close(); err != nil {
		return nil, err
	}
	if rerr != nil {
		return nil, rerr
	}
	return out, nil
}
