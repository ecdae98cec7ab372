package mail

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/transports"
	"github.com/crosstalk-go/crosstalk/transports/mail/mailtest"
)

// TestReplyToHostileHeaders: a mail whose From name, Subject, Message-ID
// and References carry CR LF — raw in folded lines, and inside RFC 2047
// encoded words that decode to CR LF — is answered through the real
// stack, and the reply holds only the fields the Sender writes, each
// once: nothing of the mail's header reaches the reply's header but its
// From (the display name encoded) and clean msg-ids.
func TestReplyToHostileHeaders(t *testing.T) {
	s := realStack(t)
	user := s.NewUser()
	addr := mailtest.Address(user)
	text, _ := testEnvelope(t, "answer me")
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: =?utf-8?q?Evil=0D=0ABcc=3A_victim=40elsewhere.test?= <%s>\r\n", addr)
	fmt.Fprintf(&b, "To: %s\r\n", addr)
	b.WriteString("Subject: =?utf-8?q?" + strings.ReplaceAll(SubjectPrefix, " ", "_") + "_x=0D=0ABcc=3A_victim=40elsewhere.test?=\r\n")
	b.WriteString("Message-ID: <x\r\n Bcc: victim@elsewhere.test@example.test>\r\n")
	b.WriteString("References: <ok@example.test>\r\n =?utf-8?q?=0D=0AX-Evil=3A_1?= <a\r\n X-Evil: 2@example.test>\r\n")
	fmt.Fprintf(&b, "Date: %s\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n", time.Now().Format(time.RFC1123Z))
	b.Write(bytes.ReplaceAll(text, []byte("\n"), []byte("\r\n")))
	deliver(t, s, user, b.Bytes())

	rec := ackingRecorder(t)
	run(t, receiver(t, s, user, filepath.Join(t.TempDir(), "state"), submission(t, s, user, nil), nil), rec.handle)
	rec.wait(t, 2, 10*time.Second) // the mail, then our reply to it
	got, _ := rec.snapshot()
	if !got[0].CanReply {
		t.Fatalf("the mail was not offered with CanReply")
	}
	msgs, err := s.Messages(user, "")
	if err != nil || len(msgs) != 2 {
		t.Fatalf("%d mails in the mailbox (%v), want the mail and the reply", len(msgs), err)
	}
	reply := msgs[1].Raw
	checkHeaders(t, reply, true)
	if bytes.Contains(bytes.ToLower(reply), []byte("\r\nbcc:")) || bytes.Contains(bytes.ToLower(reply), []byte("\r\nx-evil:")) {
		t.Errorf("an injected field reached the reply:\n%s", reply)
	}
}

// TestNoReplyThroughQuotedLocalPart: a mail from
// `"victim> ORCPT=rfc822;x"@domain` (From and envelope sender alike, so
// the Return-Path check passes) is recorded but not answered: written
// into "RCPT TO:<…>" unquoted, the address named the victim, and the
// reply went to the victim's mailbox.
func TestNoReplyThroughQuotedLocalPart(t *testing.T) {
	s := realStack(t)
	user, victim := s.NewUser(), s.NewUser()
	addr := mailtest.Address(user)
	from := `"` + mailtest.Address(victim) + `> ORCPT=rfc822;x"@` + mailtest.Domain
	text, _ := testEnvelope(t, "answer me")
	if err := s.Deliver(t.Context(), from, addr, plainMail(from, addr, SubjectPrefix+" x", text)); err != nil {
		t.Fatal(err)
	}
	rec := ackingRecorder(t)
	run(t, receiver(t, s, user, filepath.Join(t.TempDir(), "state"), submission(t, s, user, nil), nil), rec.handle)
	got := rec.wait(t, 1, 10*time.Second)
	if got[0].CanReply {
		t.Errorf("the mail from %s was offered with CanReply", from)
	}
	waitFlags(t, s, user, "", 1)
	time.Sleep(time.Second) // a reply would have been delivered by now
	if msgs, err := s.Messages(victim, ""); err != nil || len(msgs) != 0 {
		t.Errorf("the victim's mailbox holds %d mails (%v), want none", len(msgs), err)
	}
}

// ackingRecorder is a recorder that answers every mail with an envelope
// with an ACK of its first envelope.
func ackingRecorder(t *testing.T) *recorder {
	t.Helper()
	rec := newRecorder()
	rec.reply = func(in transports.Inbound) []byte {
		envs := readAll(t, in.Data)
		if len(envs) == 0 {
			return nil
		}
		out, err := envelope.Marshal(envelope.NewReply(envs[0], envelope.IntentAck, "recorded"))
		if err != nil {
			t.Error(err)
		}
		return out
	}
	return rec
}
