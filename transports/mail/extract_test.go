package mail

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	netmail "net/mail"
	"path"
	"runtime"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/fixtures"
)

// mailVector is fixtures/mail/NAME.json.
type mailVector struct {
	Comment string `json:"comment"`
	Texts   []struct {
		Envelopes []struct {
			Message  string  `json:"message"`
			Complete bool    `json:"complete"`
			Body     *string `json:"body"`
		} `json:"envelopes"`
		Contains string `json:"contains"`
	} `json:"texts"`
	CanReply bool   `json:"can_reply"`
	ReplyTo  string `json:"reply_to"`
	Note     string `json:"note"`
}

// mailVectors returns the names of the mail vectors; it fails when none
// is found.
func mailVectors(t *testing.T) []string {
	t.Helper()
	paths, err := fs.Glob(fixtures.MailFS, "mail/*.eml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no mail vectors found (%v)", err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, strings.TrimSuffix(path.Base(p), ".eml"))
	}
	return names
}

func loadVector(t *testing.T, name string) ([]byte, mailVector) {
	t.Helper()
	raw, err := fs.ReadFile(fixtures.MailFS, "mail/"+name+".eml")
	if err != nil {
		t.Fatal(err)
	}
	data, err := fs.ReadFile(fixtures.MailFS, "mail/"+name+".json")
	if err != nil {
		t.Fatal(err)
	}
	var v mailVector
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s.json: %v", name, err)
	}
	return raw, v
}

// checkTexts compares the texts handed over for a vector with its
// expectation.
func checkTexts(t *testing.T, v mailVector, texts [][]byte) {
	t.Helper()
	if len(texts) != len(v.Texts) {
		t.Fatalf("%d texts handed over, want %d:\n%q", len(texts), len(v.Texts), texts)
	}
	for i, want := range v.Texts {
		envs := readAll(t, texts[i])
		if len(envs) != len(want.Envelopes) {
			t.Fatalf("text %d: %d envelopes, want %d:\n%s", i, len(envs), len(want.Envelopes), texts[i])
		}
		for j, we := range want.Envelopes {
			e := envs[j]
			if e.Message != we.Message || e.Complete != we.Complete {
				t.Errorf("text %d envelope %d = message %s complete %v, want %s %v", i, j, e.Message, e.Complete, we.Message, we.Complete)
			}
			if we.Body != nil && e.Body != *we.Body {
				t.Errorf("text %d envelope %d body = %q, want %q", i, j, e.Body, *we.Body)
			}
		}
		if want.Contains != "" && !bytes.Contains(texts[i], []byte(want.Contains)) {
			t.Errorf("text %d = %q, want it to contain %q", i, texts[i], want.Contains)
		}
	}
}

// readAll returns every envelope in text, complete or not.
func readAll(t *testing.T, text []byte) []*envelope.Envelope {
	t.Helper()
	var envs []*envelope.Envelope
	r := envelope.NewReader(bytes.NewReader(text))
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return envs
		}
		if err != nil {
			t.Fatalf("reading %q: %v", text, err)
		}
		envs = append(envs, e)
	}
}

func TestExtractVectors(t *testing.T) {
	for _, name := range mailVectors(t) {
		t.Run(name, func(t *testing.T) {
			raw, v := loadVector(t, name)
			x := extract(raw)
			var texts [][]byte
			for _, p := range x.Texts {
				texts = append(texts, p.Text)
			}
			checkTexts(t, v, texts)
			notes := strings.Join(x.Notes, "\n")
			if v.Note != "" && !strings.Contains(notes, v.Note) {
				t.Errorf("notes = %q, want one containing %q", notes, v.Note)
			}
			if v.Note == "" && notes != "" {
				t.Errorf("notes = %q, want none", notes)
			}
			m, err := netmail.ReadMessage(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			to, ok := mayReply(m.Header, x.Found)
			if ok != v.CanReply {
				t.Errorf("mayReply() ok = %v, want %v", ok, v.CanReply)
			}
			want := v.ReplyTo
			if want == "" && v.CanReply {
				want = "kalle@example.test"
			}
			if ok && to.Address != want {
				t.Errorf("mayReply() = %s, want %s", to.Address, want)
			}
		})
	}
}

// TestUnflowLinear: a format=flowed; delsp=yes paragraph of many soft
// lines ("a \r\n" repeated) was unflowed by copying the paragraph so far
// at every line, so a mail of a few MiB kept the receiver busy for hours.
// The bytes allocated must stay a small multiple of the input.
func TestUnflowLinear(t *testing.T) {
	const lines = 20000
	in := []byte(strings.Repeat("a \r\n", lines) + "end\r\n")
	for _, delsp := range []bool{false, true} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		out := unflow(in, delsp)
		runtime.ReadMemStats(&after)
		want := strings.Repeat("a ", lines) + "end\n"
		if delsp {
			want = strings.Repeat("a", lines) + "end\n"
		}
		if string(out) != want {
			t.Fatalf("delsp=%v: unflow gave %d bytes, want %d", delsp, len(out), len(want))
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 32*uint64(len(in)) {
			t.Errorf("delsp=%v: unflow of %d bytes allocated %d bytes: not linear", delsp, len(in), got)
		}
	}
}

// TestManyPartsBounded: a multipart of some hundred thousand empty parts
// (a boundary line each) was read whole, every part into its own buffer,
// before the walk ignored all but the first maxParts: 2 MiB of mail took
// some 250 MiB. Parts past the limit are not read; the bytes allocated
// stay a small multiple of the input.
func TestManyPartsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("From: a@example.test\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n")
	for b.Len() < 2<<20 {
		b.WriteString("--B\r\n\r\n\r\n")
	}
	b.WriteString("--B--\r\n")
	raw := []byte(b.String())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := extract(raw)
	runtime.ReadMemStats(&after)
	if notes := strings.Join(x.Notes, "\n"); strings.Count(notes, "more than 256 MIME parts") != 1 {
		t.Errorf("notes = %q, want one saying the parts past 256 are ignored", notes)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 32*uint64(len(raw)) {
		t.Errorf("extract of %d bytes allocated %d bytes: not bounded by the input", len(raw), got)
	}
}

// TestReplyNotToThirdParties: the Handler's reply (an ERROR envelope, a
// receipt) goes back to the mail's sender only. Reply-To is whatever the
// mail says, checked by nobody, so answering it would let anyone make the
// relay mail a third party (backscatter). The From address is answered,
// and only when the envelope sender the delivering server recorded
// (Return-Path) has From's domain or one of its subdomains (a provider's
// bounce domain).
func TestReplyNotToThirdParties(t *testing.T) {
	for _, c := range []struct {
		name, hdr string
		to        string // "" for no reply
	}{
		{"Reply-To is not answered", "From: kalle@example.test\r\nReply-To: victim@elsewhere.test\r\n", "kalle@example.test"},
		{"Return-Path the same domain", "Return-Path: <Kalle@Example.test>\r\nFrom: kalle@example.test\r\n", "kalle@example.test"},
		{"Return-Path on a subdomain of From's", "Return-Path: <b+123@bounce.example.test>\r\nFrom: kalle@example.test\r\n", "kalle@example.test"},
		{"Return-Path on From's parent domain (a public suffix, maybe)", "Return-Path: <b@test>\r\nFrom: victim@example.test\r\n", ""},
		{"Return-Path elsewhere", "Return-Path: <spammer@elsewhere.test>\r\nFrom: victim@example.test\r\n", ""},
		{"Return-Path on a lookalike domain", "Return-Path: <x@notexample.test>\r\nFrom: victim@example.test\r\n", ""},
		{"Return-Path unreadable", "Return-Path: nonsense\r\nFrom: victim@example.test\r\n", ""},
		{"no From, only Reply-To", "Reply-To: victim@elsewhere.test\r\n", ""},
		{"Return-Path empty (a bounce)", "Return-Path: <>\r\nFrom: kalle@example.test\r\n", ""},
		{"Return-Path empty with a comment", "Return-Path: <> (bounce)\r\nFrom: kalle@example.test\r\n", ""},
		{"Return-Path on a domain ending in From's", "Return-Path: <x@example.test.evil.test>\r\nFrom: victim@example.test\r\n", ""},
		{"Return-Path on a domain ending in -From's", "Return-Path: <x@evil-example.test>\r\nFrom: victim@example.test\r\n", ""},
		{"Return-Path in capitals", "Return-Path: <k@EXAMPLE.Test>\r\nFrom: kalle@example.test\r\n", "kalle@example.test"},
		{"Return-Path in punycode, From in Unicode", "Return-Path: <k@xn--bcher-kva.test>\r\nFrom: kalle@bücher.test\r\n", ""},
		// The delivering server puts its Return-Path on top; one the
		// sender wrote comes below it.
		{"the server's Return-Path counts, not the sender's below it", "Return-Path: <spammer@elsewhere.test>\r\nReturn-Path: <victim@example.test>\r\nFrom: victim@example.test\r\n", ""},
		{"the first From address of several", "Return-Path: <a@evil.test>\r\nFrom: a@evil.test, victim@example.test\r\n", "a@evil.test"},
		// net/mail unquotes a quoted local part: written into "RCPT
		// TO:<…>" it would close the path early and name the victim.
		{"a quoted local part that would close the RCPT path", "Return-Path: <\"victim@other.test> ORCPT=rfc822;x\"@evil.test>\r\nFrom: \"victim@other.test> ORCPT=rfc822;x\"@evil.test\r\n", ""},
		{"a quoted local part with a blank", "Return-Path: <\"a b\"@example.test>\r\nFrom: \"a b\"@example.test\r\n", ""},
		{"a UTF-8 local part", "Return-Path: <jürgen@example.test>\r\nFrom: jürgen@example.test\r\n", "jürgen@example.test"},
		{"an address literal", "Return-Path: <k@[192.0.2.1]>\r\nFrom: k@[192.0.2.1]\r\n", "k@[192.0.2.1]"},
		{"a display name naming another address", "Return-Path: <a@evil.test>\r\nFrom: \"victim@example.test\" <a@evil.test>\r\n", "a@evil.test"},
	} {
		m, err := netmail.ReadMessage(strings.NewReader(c.hdr + "Subject: [AI Crosstalk] x\r\n\r\nbody\r\n"))
		if err != nil {
			t.Fatal(err)
		}
		to, ok := replyAddress(m.Header)
		switch {
		case c.to == "" && ok:
			t.Errorf("%s: reply to %s, want none", c.name, to.Address)
		case c.to != "" && !ok:
			t.Errorf("%s: no reply, want one to %s", c.name, c.to)
		case c.to != "" && to.Address != c.to:
			t.Errorf("%s: reply to %s, want %s", c.name, to.Address, c.to)
		}
	}
}
