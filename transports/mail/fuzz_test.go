package mail

import (
	"bytes"
	"io/fs"
	netmail "net/mail"
	"net/textproto"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/fixtures"
)

// FuzzExtract: any mail, however broken, gives at least one text and
// never panics.
func FuzzExtract(f *testing.F) {
	paths, err := fs.Glob(fixtures.MailFS, "mail/*.eml")
	if err != nil || len(paths) == 0 {
		f.Fatalf("no mail vectors found (%v)", err)
	}
	for _, p := range paths {
		raw, err := fs.ReadFile(fixtures.MailFS, p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		x := extract(raw)
		if len(x.Texts) == 0 {
			t.Fatalf("extract(%q) handed over nothing", raw)
		}
	})
}

// FuzzHeaders: whatever the context, intent and ids, the mail's header
// holds exactly the Sender's fields, each once, with no bare CR or LF.
func FuzzHeaders(f *testing.F) {
	f.Add("naming", "REQUEST", "01J9Z8Y7X6W5V4T3S2R1Q0PA01", "01J9Z8Y7X6W5V4T3S2R1Q0PA00")
	f.Add("x\r\nBcc: e@x", "A\nB", "a>\r\nX: y", "<p>")
	f.Add("=?utf-8?q?=0D=0A?=", "\u2028", "ü", strings.Repeat("é", 300))
	from := &netmail.Address{Address: "relay@example.test"}
	to := &netmail.Address{Name: "Bob", Address: "bob@example.test"}
	f.Fuzz(func(t *testing.T, context, intent, id, parent string) {
		ref := msgID(parent, "example.test")
		raw := compose(from, "example.test", &outgoing{to: to, text: []byte("x\n"), id: id, context: context, intent: intent, inReplyTo: ref, references: []string{ref}})
		head, _, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
		if !ok {
			t.Fatal("no header end")
		}
		seen := map[string]bool{}
		for _, line := range strings.Split(string(head), "\r\n") {
			if strings.ContainsAny(line, "\r\n") {
				t.Fatalf("bare CR or LF in %q", line)
			}
			if line == "" || line[0] == ' ' {
				continue
			}
			name, _, ok := strings.Cut(line, ":")
			name = textproto.CanonicalMIMEHeaderKey(name)
			if !ok || seen[name] {
				t.Fatalf("header line %q: not a field, or a field twice", line)
			}
			seen[name] = true
		}
		if len(seen) != 10 {
			t.Fatalf("%d header fields, want 10:\n%s", len(seen), head)
		}
	})
}
