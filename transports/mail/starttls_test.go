package mail

import (
	"bufio"
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestStartTLSNoDowngrade: a server (or someone on the path) that does
// not offer STARTTLS where it is required, refuses it after offering
// it, or pipelines answers behind its STARTTLS answer (to be read as if
// they came over TLS) gets an error: no command after that point, no
// password, no mail goes out in the clear.
func TestStartTLSNoDowngrade(t *testing.T) {
	_, cliTLS := tlsPair(t)
	// smtp answers EHLO with ehlo and STARTTLS with starttls; leaked
	// is set by any command that should never come.
	smtp := func(ehlo, starttls string, leaked *atomic.Bool) func(net.Conn) {
		return func(c net.Conn) {
			br := bufio.NewReader(c)
			c.Write([]byte("220 fake ESMTP\r\n"))
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				switch cmd := strings.ToUpper(strings.TrimSpace(line)); {
				case strings.HasPrefix(cmd, "EHLO"):
					c.Write([]byte(ehlo))
				case cmd == "STARTTLS":
					c.Write([]byte(starttls))
				case cmd == "QUIT":
					c.Write([]byte("221 bye\r\n"))
					return
				default:
					leaked.Store(true)
					c.Write([]byte("250 ok\r\n"))
				}
			}
		}
	}
	for _, c := range []struct {
		name           string
		sec            Security
		ehlo, starttls string
		want           string
	}{
		{"not offered, required", SecurityRequireStartTLS, "250-fake\r\n250 AUTH PLAIN\r\n", "", "STARTTLS"},
		{"offered, then refused", SecurityStartTLS, "250-fake\r\n250 STARTTLS\r\n", "454 TLS not available\r\n", "454"},
		{"offered, then refused, required", SecurityRequireStartTLS, "250-fake\r\n250 STARTTLS\r\n", "454 TLS not available\r\n", "454"},
		{"answers pipelined before TLS", SecurityStartTLS, "250-fake\r\n250 STARTTLS\r\n", "220 go ahead\r\n250-fake\r\n250 AUTH PLAIN\r\n", "before TLS"},
	} {
		t.Run("SMTP "+c.name, func(t *testing.T) {
			var leaked atomic.Bool
			addr := fakeServer(t, smtp(c.ehlo, c.starttls, &leaked))
			snd, err := NewSender(Server{Addr: addr, Security: c.sec}, &Options{From: "relay@example.test", TLSConfig: cliTLS, Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			text, _ := testEnvelope(t, "hello")
			err = snd.Send(t.Context(), "a@example.test", "", text)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Send = %v, want an error with %q", err, c.want)
			}
			if leaked.Load() {
				t.Error("a command other than EHLO, STARTTLS, QUIT reached the server in the clear")
			}
		})
	}

	// imap greets with greeting and answers STARTTLS with answer; leaked
	// is set by any other command.
	imap := func(greeting, answer string, leaked *atomic.Bool) func(net.Conn) {
		return func(c net.Conn) {
			br := bufio.NewReader(c)
			c.Write([]byte(greeting))
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				tag, cmd, _ := strings.Cut(strings.TrimSpace(line), " ")
				switch strings.ToUpper(cmd) {
				case "STARTTLS":
					c.Write([]byte(strings.ReplaceAll(answer, "TAG", tag)))
				case "CAPABILITY":
					c.Write([]byte("* CAPABILITY IMAP4rev1 STARTTLS\r\n" + tag + " OK done\r\n"))
				case "LOGOUT":
					return
				default:
					leaked.Store(true)
					c.Write([]byte(tag + " OK done\r\n"))
				}
			}
		}
	}
	const caps = "* OK [CAPABILITY IMAP4rev1 STARTTLS] fake\r\n"
	for _, c := range []struct {
		name             string
		sec              Security
		greeting, answer string
		want             string
	}{
		{"refused, required", SecurityRequireStartTLS, caps, "TAG NO not now\r\n", "refused"},
		{"offered, then refused", SecurityStartTLS, caps, "TAG NO not now\r\n", "refused"},
		{"PREAUTH instead of STARTTLS, required", SecurityRequireStartTLS, "* PREAUTH [CAPABILITY IMAP4rev1] fake\r\n", "", "PREAUTH"},
		{"answers pipelined before TLS", SecurityRequireStartTLS, caps, "TAG OK go ahead\r\n* OK [CAPABILITY IMAP4rev1 AUTH=PLAIN] injected\r\n", "before TLS"},
	} {
		t.Run("IMAP "+c.name, func(t *testing.T) {
			var leaked atomic.Bool
			addr := fakeServer(t, imap(c.greeting, c.answer, &leaked))
			rc, err := NewReceiver(Server{Addr: addr, Security: c.sec, Username: "u", Password: "p"}, nil,
				&Options{StateFile: filepath.Join(t.TempDir(), "state"), TLSConfig: cliTLS, Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			err = rc.Receive(ctx, newRecorder().handle)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Receive = %v, want an error with %q", err, c.want)
			}
			if leaked.Load() {
				t.Error("a command other than STARTTLS, CAPABILITY, LOGOUT reached the server in the clear")
			}
		})
	}
}
