package mail

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBoundedCount: one server answer is bounded — an SMTP reply with all
// its continuation lines, an IMAP response with its literals other than
// a mail's body sections (which go-imap would read whole into memory: a
// mailbox name, an ENVELOPE string) — while many answers in a row, and
// body section literals of any size (read up to MaxMessageSize by the
// Receiver, the rest discarded), are not.
func TestBoundedCount(t *testing.T) {
	big := strings.Repeat("a", MaxIMAPResponse)
	for _, c := range []struct {
		name string
		imap bool
		in   string
		ok   bool
	}{
		{"SMTP replies in a row", false, strings.Repeat("250 ok\r\n", MaxSMTPReply), true},
		{"SMTP one reply of continuation lines", false, strings.Repeat("250-ok\r\n", MaxSMTPReply/8+1), false},
		{"SMTP one endless line", false, "220 " + strings.Repeat("x", MaxSMTPReply), false},
		{"SMTP bare code lines end replies", false, strings.Repeat("250\r\n", MaxSMTPReply), true},
		{"IMAP responses in a row", true, strings.Repeat("* 1 EXISTS\r\n", MaxIMAPResponse/8), true},
		{"IMAP a literal larger than the bound", true, "* 1 FETCH (BODY[] {" + strconv.Itoa(len(big)+10) + "}\r\n" + big + "0123456789)\r\n", true},
		{"IMAP literal8", true, "* 1 FETCH (BINARY[] ~{" + strconv.Itoa(len(big)) + "}\r\n" + big + ")\r\n", true},
		{"IMAP a header section literal", true, "* 1 FETCH (UID 7 BODY[HEADER]<0> {" + strconv.Itoa(len(big)) + "}\r\n" + big + ")\r\n", true},
		{"IMAP an RFC822 literal", true, "* 1 FETCH (rfc822 {" + strconv.Itoa(len(big)) + "}\r\n" + big + ")\r\n", true},
		{"IMAP a mailbox name literal larger than the bound", true, "* LIST () \"/\" {" + strconv.Itoa(len(big)) + "}\r\n" + big + "\r\n", false},
		{"IMAP an ENVELOPE literal larger than the bound", true, "* 1 FETCH (ENVELOPE ({" + strconv.Itoa(len(big)) + "}\r\n" + big + " NIL))\r\n", false},
		{"IMAP an endless line", true, "* OK " + big, false},
		{"IMAP a status response's {n} is text, not a literal", true, "* OK [ALERT] {99999999}\r\n* OK " + big, false},
		{"IMAP a tagged response's {n} is text", true, "T1 OK done {99999999}\r\n* OK " + big, false},
		{"IMAP a continuation request's {n} is text", true, "+ {99999999}\r\n* OK " + big, false},
		{"IMAP text around small literals adds up", true, strings.Repeat("* 1 FETCH (X {1}\r\nx"+strings.Repeat(" ", 1000), MaxIMAPResponse/1000+1), false},
		{"IMAP {n} not at the end of the line", true, "* OK {5} " + big, false},
		// go-imap reads a quoted string across line ends, into memory.
		{"IMAP a quoted string across lines", true, "* LIST () \"/\" \"" + strings.Repeat(strings.Repeat("a", 1000)+"\r\n", MaxIMAPResponse/1000+1), false},
		{"IMAP a quoted string's BODY[] {n} is text, not a literal", true, "* 1 FETCH (ENVELOPE (\"x BODY[] {99999999}\r\n" + big, false},
		{"IMAP escaped quotes end no string", true, strings.Repeat("* LIST () \"\\\\\" \"a\\\"b\"\r\n", MaxIMAPResponse/16), true},
		{"IMAP a quote in a status response's text opens no string", true, strings.Repeat("* OK say \"hi\r\n", MaxIMAPResponse/12), true},
		// go-imap skips an unknown response code up to its "]", across
		// line ends: what follows is no response of its own.
		{"IMAP a response code across lines", true, "* OK [X \r\n* 1 FETCH (BODY[] {99999999}\r\n* OK " + big, false},
		{"IMAP a tagged response code across lines", true, "T1 NO [X \r\n* 1 FETCH (BODY[] {99999999}\r\n* OK " + big, false},
		{"IMAP closed response codes in a row", true, strings.Repeat("* OK [UIDNEXT 5] [x\r\n", MaxIMAPResponse/16), true},
		// "* 5 OK" is a status response too.
		{"IMAP a numbered status response's {n} is text", true, "* 5 OK [ALERT] {99999999}\r\n* OK " + big, false},
		// Only a FETCH response streams a body section: go-imap reads a
		// METADATA value (after an astring, which may end in "]") whole.
		{"IMAP a METADATA literal after ] is counted", true, "* METADATA INBOX (/shared/x] {" + strconv.Itoa(len(big)) + "}\r\n" + big + ")\r\n", false},
		{"IMAP a METADATA entry literal after ] is counted", true, "* METADATA x] {" + strconv.Itoa(len(big)) + "}\r\n" + big + "\r\n", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			bc := newBoundedConn(nil, c.imap, "")
			var err error
			// In chunks, as reads come.
			for in := c.in; in != "" && err == nil; {
				n := min(len(in), 4096)
				err = bc.count([]byte(in[:n]))
				in = in[n:]
			}
			if c.ok && err != nil {
				t.Errorf("count = %v, want no error", err)
			}
			if !c.ok && (!errors.Is(err, errAnswerTooLong) || !strings.Contains(err.Error(), strconv.Itoa(bc.max))) {
				t.Errorf("count = %v, want an error naming the %d-byte bound", err, bc.max)
			}
		})
	}
}

// tlsPair returns a server TLS configuration and a client one that trusts
// it, for 127.0.0.1.
func tlsPair(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(ts.Close)
	return ts.TLS, ts.Client().Transport.(*http.Transport).TLSClientConfig
}

// fakeServer serves every connection with serve on a loopback port.
func fakeServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	return ln.Addr().String()
}

// endless writes line again and again until the client hangs up.
func endless(w net.Conn, line string) {
	b := []byte(strings.Repeat(line, 4096/len(line)+1))
	for {
		if _, err := w.Write(b); err != nil {
			return
		}
	}
}

// TestSMTPReplyBounded: an SMTP server answering with endless
// continuation lines — before TLS, after STARTTLS, over implicit TLS —
// ends the send with an error naming the bound, not with memory growing
// until the timeout.
func TestSMTPReplyBounded(t *testing.T) {
	srvTLS, cliTLS := tlsPair(t)
	starttls := func(c net.Conn) {
		br := bufio.NewReader(c)
		c.Write([]byte("220 fake ESMTP\r\n"))
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			switch cmd := strings.ToUpper(strings.TrimSpace(line)); {
			case strings.HasPrefix(cmd, "EHLO"):
				c.Write([]byte("250-fake\r\n250 STARTTLS\r\n"))
			case cmd == "STARTTLS":
				c.Write([]byte("220 go ahead\r\n"))
				tc := tls.Server(c, srvTLS)
				if tc.Handshake() != nil {
					return
				}
				endless(tc, "250-more\r\n")
				return
			default:
				return
			}
		}
	}
	for _, c := range []struct {
		name  string
		sec   Security
		serve func(net.Conn)
	}{
		{"greeting", SecurityNone, func(c net.Conn) { endless(c, "220-hello\r\n") }},
		{"after STARTTLS", SecurityRequireStartTLS, starttls},
		{"implicit TLS", SecurityTLS, func(c net.Conn) { endless(tls.Server(c, srvTLS), "220-hello\r\n") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := fakeServer(t, c.serve)
			snd, err := NewSender(Server{Addr: addr, Security: c.sec}, &Options{From: "relay@example.test", TLSConfig: cliTLS, Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			text, _ := testEnvelope(t, "hello")
			err = snd.Send(t.Context(), "a@example.test", "", text)
			if err == nil || !strings.Contains(err.Error(), strconv.Itoa(MaxSMTPReply)) {
				t.Errorf("Send = %v, want an error naming the %d-byte bound", err, MaxSMTPReply)
			}
		})
	}
}

// TestIMAPResponseBounded: an IMAP server sending a line without end —
// as its greeting, after STARTTLS, over implicit TLS — ends the Receiver
// with an error naming the bound, not with memory growing until
// go-imap's 30 s response timeout.
func TestIMAPResponseBounded(t *testing.T) {
	srvTLS, cliTLS := tlsPair(t)
	for _, c := range []struct {
		name  string
		sec   Security
		serve func(net.Conn)
	}{
		{"greeting", SecurityNone, func(c net.Conn) { c.Write([]byte("* OK ")); endless(c, "aaaaaaaa") }},
		{"after STARTTLS", SecurityRequireStartTLS, func(c net.Conn) {
			c.Write([]byte("* OK [CAPABILITY IMAP4rev1 STARTTLS] fake\r\n"))
			line, err := bufio.NewReader(c).ReadString('\n')
			tag, _, _ := strings.Cut(line, " ")
			if err != nil || !strings.Contains(strings.ToUpper(line), "STARTTLS") {
				return
			}
			c.Write([]byte(tag + " OK go ahead\r\n"))
			tc := tls.Server(c, srvTLS)
			if tc.Handshake() != nil {
				return
			}
			tc.Write([]byte("* OK "))
			endless(tc, "aaaaaaaa")
		}},
		{"implicit TLS", SecurityTLS, func(c net.Conn) {
			tc := tls.Server(c, srvTLS)
			tc.Write([]byte("* OK "))
			endless(tc, "aaaaaaaa")
		}},
		// Before TLS the transport reads lines itself, not go-imap: a
		// body section literal is no stream there (and anyone on the
		// path may have sent it).
		{"a body literal before STARTTLS", SecurityRequireStartTLS, func(c net.Conn) {
			c.Write([]byte("* OK [CAPABILITY IMAP4rev1 STARTTLS] fake\r\n"))
			if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
				return
			}
			c.Write([]byte("* 1 FETCH (BODY[] {99999999999}\r\n"))
			b := []byte(strings.Repeat("a", 4096))
			for range 2 * MaxIMAPResponse / len(b) {
				if _, err := c.Write(b); err != nil {
					return
				}
			}
		}},
		// go-imap reads a quoted string across line ends, whole.
		{"a quoted string of many lines", SecurityNone, func(c net.Conn) {
			c.Write([]byte("* OK [CAPABILITY IMAP4rev1] fake\r\n* LIST () \"/\" \""))
			line := []byte(strings.Repeat("a", 1022) + "\r\n")
			for range 2 * MaxIMAPResponse / len(line) {
				if _, err := c.Write(line); err != nil {
					return
				}
			}
			c.Write([]byte("\"\r\n"))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := fakeServer(t, c.serve)
			rc, err := NewReceiver(Server{Addr: addr, Security: c.sec, Username: "u", Password: "p"}, nil,
				&Options{StateFile: filepath.Join(t.TempDir(), "state"), TLSConfig: cliTLS, Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			err = rc.Receive(ctx, newRecorder().handle)
			if err == nil || !strings.Contains(err.Error(), strconv.Itoa(MaxIMAPResponse)) {
				t.Errorf("Receive = %v, want an error naming the %d-byte bound", err, MaxIMAPResponse)
			}
		})
	}
}
