package mailtest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// TestStack delivers over each of the three ways in and reads the mail back.
func TestStack(t *testing.T) {
	t0 := time.Now()
	s := StartT(t)
	t.Logf("started in %v", time.Since(t0))
	ctx := context.Background()
	user := s.NewUser()
	msg := func(subj string) []byte {
		return []byte("From: x@example.test\r\nTo: " + Address(user) + "\r\nSubject: " + subj + "\r\n\r\nhello\r\n")
	}
	if err := s.Deliver(ctx, "x@example.test", Address(user), msg("lmtp")); err != nil {
		t.Fatal(err)
	}
	// Postfix, no AUTH.
	c, err := smtp.Dial(s.SMTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SendMail("x@example.test", []string{Address(user)}, bytes.NewReader(msg("postfix"))); err != nil {
		t.Fatal(err)
	}
	c.Quit()
	// Dovecot submission: STARTTLS with the stack's cert, AUTH PLAIN.
	c, err = smtp.DialStartTLS(s.SubmissionAddr, s.TLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Auth(sasl.NewPlainClient("", user, Password)); err != nil {
		t.Fatal(err)
	}
	if err := c.SendMail(Address(user), []string{Address(user)}, bytes.NewReader(msg("submission"))); err != nil {
		t.Fatal(err)
	}
	c.Quit()
	deadline := time.Now().Add(10 * time.Second)
	for {
		msgs, err := s.Messages(user, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %d messages, want 3\n%s", len(msgs), s.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t0 = time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped in %v", time.Since(t0))
}
