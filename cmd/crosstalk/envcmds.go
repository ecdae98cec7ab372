package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/crosstalk-go/crosstalk/envelope"
)

var cmdParse = &command{
	name:    "parse",
	args:    "[--strict] [--json] [FILE...]",
	summary: "find and parse every envelope in chat text",
	run:     runParse,
}

var cmdFmt = &command{
	name:    "fmt",
	args:    "[--fence] [--strict] [FILE...]",
	summary: "print every envelope found in canonical form",
	run:     runFmt,
}

var cmdNew = &command{
	name:    "new",
	args:    "--from A --to B --intent I [flags] [--body TEXT | --body-file F | < body]",
	summary: "compose a new envelope",
	run:     runNew,
}

var cmdReply = &command{
	name:    "reply",
	args:    "--intent I [--body TEXT | --body-file F] [FILE]",
	summary: "compose a reply to the last envelope read",
	run:     runReply,
}

var cmdValidate = &command{
	name:    "validate",
	args:    "[--strict] [FILE...]",
	summary: "check envelopes: one line per envelope, ok or the error",
	run:     runValidate,
}

// jsonError is the JSON Lines form of a malformed envelope (docs/design.md §3.4).
type jsonError struct {
	Error struct {
		Code    envelope.Code `json:"code"`
		Line    int           `json:"line"`
		Message string        `json:"message"`
	} `json:"error"`
}

// readEnvelopes calls fn for every envelope or syntax error in the input.
// Only I/O errors stop it.
func readEnvelopes(in input, strict bool, fn func(*envelope.Envelope, *envelope.SyntaxError) error) error {
	r, err := envelopeReader(in)
	if err != nil {
		return fmt.Errorf("reading %s: %w", in.name, err)
	}
	r.Strict = strict
	for {
		env, err := r.Next()
		if err == io.EOF {
			return nil
		}
		var se *envelope.SyntaxError
		if errors.As(err, &se) {
			if err := fn(nil, se); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", in.name, err)
		}
		if err := fn(env, nil); err != nil {
			return err
		}
	}
}

// wholeFileLimit is the largest regular file read whole and parsed in
// place; larger files and pipes are parsed as a stream, with a flat heap.
const wholeFileLimit = envelope.MaxEnvelopeSize

// envelopeReader returns a Reader for the input: over its bytes when it is
// a small regular file (one read, no line buffer: docs/performance.md,
// "The first envelope"), else over the stream.
func envelopeReader(in input) (*envelope.Reader, error) {
	f, ok := in.r.(*os.File)
	if !ok {
		return envelope.NewReader(in.r), nil
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > wholeFileLimit {
		return envelope.NewReader(in.r), nil
	}
	// The size is a hint: read to the end whatever it is now, but never
	// more than the limit ahead of the stream reader.
	buf := bytes.NewBuffer(make([]byte, 0, fi.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, wholeFileLimit+1)); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	if len(data) > wholeFileLimit {
		return envelope.NewReader(io.MultiReader(bytes.NewReader(data), f)), nil
	}
	return envelope.NewBytesReader(data), nil
}

func runParse(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Parse finds every envelope in the input (chat transcripts, fences, quotes and
CRLF are fine) and prints a summary of each. With --json it prints one JSON
object per envelope (JSON Lines), and {"error":{...}} in place of a malformed
one. Reads standard input when no file is named.

Exit status: 0 if every envelope parsed, 1 if any failed, 2 for usage errors.`)
	strict := fs.Bool("strict", false, "reject incomplete envelopes, invalid ids and unknown address forms")
	asJSON := fs.Bool("json", false, "print JSON Lines")
	files, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	failed := false
	enc := json.NewEncoder(e.stdout)
	enc.SetEscapeHTML(false)
	n := 0
	err = eachInput(e, files, func(in input) error {
		return readEnvelopes(in, *strict, func(env *envelope.Envelope, se *envelope.SyntaxError) error {
			n++
			if se != nil {
				failed = true
				if *asJSON {
					var je jsonError
					je.Error.Code, je.Error.Line, je.Error.Message = se.Code, se.Line, se.Msg
					return enc.Encode(je)
				}
				_, err := fmt.Fprintln(e.stdout, visible(fmt.Sprintf("%s:%d: %s: %s", in.name, se.Line, se.Code, se.Msg)))
				return err
			}
			if *asJSON {
				return enc.Encode(env)
			}
			return printSummary(e.stdout, in.name, env)
		})
	})
	if err != nil {
		return err
	}
	if n == 0 && !*asJSON {
		fmt.Fprintln(e.stderr, "crosstalk: "+noEnvelope(files))
	}
	if failed {
		return failedError{}
	}
	return nil
}

// noEnvelope says that the inputs named (none: standard input) held no
// envelope, naming them, or counting them when they are many.
func noEnvelope(files []string) string {
	if len(files) > 3 {
		return fmt.Sprintf("no envelope found in any of the %d inputs", len(files))
	}
	names := []string{"<stdin>"}
	if len(files) > 0 {
		names = slices.Clone(files)
	}
	for i, n := range names {
		if n == "-" {
			names[i] = "<stdin>"
		}
	}
	return visible("no envelope found in " + strings.Join(names, ", "))
}

// visible returns s for a terminal: every control, bidi or invisible
// character written as ⟨U+001B⟩ (envelope.ShowInvisible), so that text
// from an envelope — anyone's, through the relay — cannot move the
// cursor, clear the screen or reorder a line. Human output only; --json
// and envelope text keep their bytes.
func visible(s string) string { return envelope.ShowInvisible(s) }

func printSummary(w io.Writer, name string, env *envelope.Envelope) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d: %s → %s  %s", visible(name), env.Line, visible(env.From), visible(env.To), visible(env.Intent))
	if env.LegacyIntent != "" {
		fmt.Fprintf(&b, " (from %s)", visible(env.LegacyIntent))
	}
	if !env.Complete {
		b.WriteString("  [incomplete: no [[END]]]")
	}
	b.WriteByte('\n')
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "  %-8s %s\n", visible(k)+":", visible(v))
		}
	}
	row("user", env.User)
	row("session", env.Session)
	row("thread", env.Thread)
	row("parent", env.Parent)
	row("message", env.Message)
	row("context", env.Context)
	for _, f := range env.Fields {
		row(f.Key, f.Value)
	}
	for _, m := range env.Meta {
		keys := make([]string, len(m.Fields))
		for i, f := range m.Fields {
			keys[i] = f.Key
		}
		row("meta", m.Namespace+" ("+strings.Join(keys, ", ")+")")
	}
	lines := 0
	if env.Body != "" {
		lines = strings.Count(env.Body, "\n") + 1
	}
	first, _, _ := strings.Cut(env.Body, "\n")
	if len(first) > 60 {
		cut := 57
		for cut > 0 && !utf8.RuneStart(first[cut]) {
			cut-- // not inside a character: "\xc3..." is not in the body
		}
		first = first[:cut] + "..."
	}
	row("body", fmt.Sprintf("%d line(s), %d bytes: %q", lines, len(env.Body), first))
	sig := env.Sig
	if sig == "" {
		sig = "(no sig line)"
	}
	row("sig", sig)
	for _, w := range env.Warnings() {
		row("warning", w)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func runValidate(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Validate checks every envelope in the input and prints one line per envelope:
"ok" with its header, or the error with its line number. Warnings (unknown
intent, ids that are not ULIDs) follow an ok.

Exit status: 0 if every envelope is valid, 1 if any is not or none was found,
2 for usage errors.`)
	strict := fs.Bool("strict", false, "reject incomplete envelopes, invalid ids and unknown address forms")
	files, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	failed, n := false, 0
	err = eachInput(e, files, func(in input) error {
		return readEnvelopes(in, *strict, func(env *envelope.Envelope, se *envelope.SyntaxError) error {
			n++
			if se != nil {
				failed = true
				_, err := fmt.Fprintln(e.stdout, visible(fmt.Sprintf("%s:%d: %s: %s", in.name, se.Line, se.Code, se.Msg)))
				return err
			}
			msg := fmt.Sprintf("%s:%d: ok %s→%s %s", in.name, env.Line, env.From, env.To, env.Intent)
			if !env.Complete {
				msg += " (incomplete: no [[END]])"
			}
			for _, w := range env.Warnings() {
				msg += " (warning: " + w + ")"
			}
			_, err := fmt.Fprintln(e.stdout, visible(msg))
			return err
		})
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New(noEnvelope(files))
	}
	if failed {
		return failedError{}
	}
	return nil
}

func runFmt(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Fmt prints the canonical form of every envelope found in the input — the
envelopes only, the surrounding chat text dropped — separated by one blank
line. Malformed envelopes are reported on standard error and skipped.

Exit status: 0 if every envelope was printed, 1 if any was malformed.`)
	fence := fs.Bool("fence", false, "wrap each envelope in a ``` fence for chat UIs that collapse newlines")
	strict := fs.Bool("strict", false, "reject incomplete envelopes, invalid ids and unknown address forms")
	files, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	w := envelope.NewWriter(e.stdout)
	w.Fence = *fence
	failed, n := false, 0
	err = eachInput(e, files, func(in input) error {
		return readEnvelopes(in, *strict, func(env *envelope.Envelope, se *envelope.SyntaxError) error {
			n++
			if se != nil {
				failed = true
				fmt.Fprintln(e.stderr, visible(fmt.Sprintf("crosstalk: %s:%d: %s: %s", in.name, se.Line, se.Code, se.Msg)))
				return nil
			}
			return w.Write(env)
		})
	})
	if err != nil {
		return err
	}
	if n == 0 {
		fmt.Fprintln(e.stderr, "crosstalk: "+noEnvelope(files))
	}
	if failed {
		return failedError{}
	}
	return nil
}

// metaFlag collects --meta ns.Key=Value into ordered META blocks.
type metaFlag struct{ blocks []envelope.Meta }

func (m *metaFlag) String() string { return "" }

func (m *metaFlag) Set(s string) error {
	nsKey, val, ok := strings.Cut(s, "=")
	ns, key, ok2 := strings.Cut(nsKey, ".")
	if !ok || !ok2 || ns == "" || key == "" {
		return fmt.Errorf("want namespace.Key=Value, got %q", s)
	}
	val = strings.TrimSpace(val)
	for i := range m.blocks {
		if m.blocks[i].Namespace == ns {
			m.blocks[i].Fields = append(m.blocks[i].Fields, envelope.Field{Key: key, Value: val})
			return nil
		}
	}
	m.blocks = append(m.blocks, envelope.Meta{Namespace: ns, Fields: []envelope.Field{{Key: key, Value: val}}})
	return nil
}

// bodyFlags are the ways a composing command gets its body.
type bodyFlags struct {
	body     *string
	bodyFile *string
}

func addBodyFlags(fs interface {
	String(string, string, string) *string
}) *bodyFlags {
	return &bodyFlags{
		body:     fs.String("body", "", "body text"),
		bodyFile: fs.String("body-file", "", "read the body from this file"),
	}
}

// read returns the body from --body, --body-file or, if allowed, stdin,
// normalised the way a Reader would return it.
func (b *bodyFlags) read(e *env, stdinOK bool) (string, error) {
	var raw []byte
	switch {
	case *b.body != "" && *b.bodyFile != "":
		return "", usagef("--body and --body-file are exclusive")
	case *b.body != "":
		raw = []byte(*b.body)
	case *b.bodyFile != "":
		f, err := os.Open(*b.bodyFile)
		if err != nil {
			return "", err
		}
		defer f.Close()
		raw, err = readLimited(f, envelope.MaxEnvelopeSize, "body file "+*b.bodyFile)
		if err != nil {
			return "", err
		}
	case stdinOK:
		var err error
		raw, err = readLimited(e.stdin, envelope.MaxEnvelopeSize, "body on standard input")
		if err != nil {
			return "", err
		}
	default:
		return "", usagef("no body: give --body TEXT or --body-file FILE")
	}
	return envelope.CleanBody(string(raw)), nil
}

func readLimited(r io.Reader, limit int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", what, limit)
	}
	return b, nil
}

// checkIntent normalises a composed intent and warns about unknown ones.
// It returns the v1.1 intent and the legacy one it was mapped from, which
// the v1.0 form (--compat v1.0) writes as given.
func checkIntent(e *env, intent string, v10 bool) (norm, legacy string, err error) {
	if intent == "" {
		return "", "", usagef("--intent is required (one of %s)", strings.Join(envelope.Intents, " "))
	}
	norm, legacy, known := envelope.NormalizeIntent(intent)
	switch {
	case !known:
		fmt.Fprintf(e.stderr, "crosstalk: warning: unknown intent %q (known: %s)\n", intent, strings.Join(envelope.Intents, " "))
	case legacy != "" && !v10:
		fmt.Fprintf(e.stderr, "crosstalk: note: legacy intent %s written as %s\n", legacy, norm)
	}
	return norm, legacy, nil
}

func runNew(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
New composes a canonical v1.1 envelope with fresh ULIDs for thread and message,
a session ("2026-11-25T15Z 3fa9c1"), the user and "sig: none" (sign it with
crosstalk sign), so that v1.0 parsers read it too. With --compat v1.0 it writes
the v1.0 vocabulary (QUESTION, ANSWER). The body comes from --body,
--body-file, or standard input.`)
	from := fs.String("from", "", "sender `address` (required)")
	to := fs.String("to", "", "receiver `address` (required)")
	intent := fs.String("intent", "", "intent: "+strings.Join(envelope.Intents, " ")+" (required)")
	ctxName := fs.String("context", "", "context (topic)")
	thread := fs.String("thread", "", "thread id (default: a new ULID)")
	parent := fs.String("parent", "", "parent message id")
	session := fs.String("session", "", "session (default: the hour and a random id, as the spec shows)")
	cf := addComposeFlags(fs)
	bf := addBodyFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := cf.checkCompat(); err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("new: unexpected argument %q (the body goes in --body or on standard input)", pos[0])
	}
	if *from == "" || *to == "" {
		return usagef("new: --from and --to are required")
	}
	norm, legacy, err := checkIntent(e, *intent, cf.v10())
	if err != nil {
		return err
	}
	body, err := bf.read(e, true)
	if err != nil {
		return err
	}
	env := envelope.New(strings.TrimSpace(*from), strings.TrimSpace(*to), norm, body)
	env.Context, env.Parent, env.LegacyIntent = strings.TrimSpace(*ctxName), strings.TrimSpace(*parent), legacy
	if *session != "" {
		env.Session = strings.TrimSpace(*session)
	}
	if *thread != "" {
		env.Thread = strings.TrimSpace(*thread)
	}
	for _, a := range []string{env.From, env.To} {
		var ae *envelope.AddressError
		if _, err := envelope.ParseAddress(a); errors.As(err, &ae) {
			fmt.Fprintf(e.stderr, "crosstalk: warning: %s\n", ae.Detail())
		}
	}
	return cf.write(e, env)
}

func runReply(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Reply reads envelopes from FILE (or standard input) and composes a reply to the
last one: sender and receiver swapped, same thread, parent = its message, a
fresh message id, the same session (or a new one), the user (--user, else the
config's user, else the OS user), "sig: none". When the envelope comes from
FILE, the body may come from standard input.`)
	intent := fs.String("intent", "", "intent of the reply (required), e.g. RESPOND")
	cf := addComposeFlags(fs)
	bf := addBodyFlags(fs)
	files, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := cf.checkCompat(); err != nil {
		return err
	}
	if len(files) > 1 {
		return usagef("reply: one FILE at most")
	}
	norm, legacy, err := checkIntent(e, *intent, cf.v10())
	if err != nil {
		return err
	}
	var last *envelope.Envelope
	var lastErr *envelope.SyntaxError
	var name string
	err = eachInput(e, files, func(in input) error {
		name = in.name
		return readEnvelopes(in, false, func(env *envelope.Envelope, se *envelope.SyntaxError) error {
			last, lastErr = env, se
			return nil
		})
	})
	if err != nil {
		return err
	}
	if lastErr != nil {
		// FILE:LINE: CODE: message, as validate and fmt say it.
		return fmt.Errorf("%s (the last envelope, the one to reply to, is malformed)",
			visible(fmt.Sprintf("%s:%d: %s: %s", name, lastErr.Line, lastErr.Code, lastErr.Msg)))
	}
	if last == nil {
		return fmt.Errorf("%s: no envelope found to reply to", name)
	}
	body, err := bf.read(e, len(files) == 1 && files[0] != "-")
	if err != nil {
		return err
	}
	env := envelope.NewReply(last, norm, body)
	env.LegacyIntent = legacy
	return cf.write(e, env)
}
