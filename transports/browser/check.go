package browser

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/signing"
)

// MaxText is the largest page text Check and ParseJSON read; a chat
// message longer than this is cut: the envelopes after the cut are not
// found, and Check adds an error entry (E-TOO-LARGE) naming the line of
// the cut.
const MaxText = 4 << 20

// MaxFirstUseKeys bounds the extension's trust store: Check pins keys on
// first use only while the store holds fewer entries than this. Every
// page the extension reads can show signed envelopes from as many senders
// as it likes, each announcing a key, and the store is read and rewritten
// by every check and kept in storage.local under the browser's quota; past
// the bound an announced key for a new key id is unknown-key.
const MaxFirstUseKeys = 1000

// parseError is the JSON Lines form of a malformed envelope, as `crosstalk
// parse --json` prints it (docs/design.md §3.4).
type parseError struct {
	Error struct {
		Code    envelope.Code `json:"code"`
		Line    int           `json:"line"`
		Message string        `json:"message"`
	} `json:"error"`
}

// ParseJSON returns what `crosstalk parse --json` prints for text: one
// JSON object per envelope found, {"error":{…}} for a malformed one, each
// on its own line. strict is --strict.
func ParseJSON(text string, strict bool) ([]byte, error) {
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	err := read(text, strict, func(env *envelope.Envelope, se *envelope.SyntaxError) error {
		if se != nil {
			var pe parseError
			pe.Error.Code, pe.Error.Line, pe.Error.Message = se.Code, se.Line, se.Msg
			return enc.Encode(pe)
		}
		return enc.Encode(env)
	})
	return out.Bytes(), err
}

// read calls fn for every envelope or syntax error in text.
func read(text string, strict bool, fn func(*envelope.Envelope, *envelope.SyntaxError) error) error {
	if len(text) > MaxText {
		text = text[:MaxText]
	}
	r := envelope.NewReader(strings.NewReader(text))
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
			return err
		}
		if err := fn(env, nil); err != nil {
			return err
		}
	}
}

// Statuses of Found, as the page's controls show them in
// data-crosstalk-status. The signing statuses keep their names, except
// bad-signature, which is invalid; error is an envelope that did not parse.
const (
	StatusInvalid = "invalid"
	StatusError   = "error"
)

// Found is one complete envelope (or one malformed envelope) in a page's
// text, with its verification.
type Found struct {
	// Index counts the envelopes and errors of the text from 0.
	Index int `json:"index"`
	// Message is the envelope's message id, "" when it has none.
	Message string `json:"message,omitempty"`
	// Line is the header's line in the text (1-based).
	Line   int    `json:"line"`
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
	Intent string `json:"intent,omitempty"`
	// Status is verified, first-use, unsigned, unknown-key, invalid,
	// key-changed, revoked or error.
	Status string `json:"status"`
	// Reason says why Status is not verified, first-use or unsigned; for
	// error it names the line counted from the envelope's header line.
	Reason      string `json:"reason,omitempty"`
	Pkid        string `json:"pkid,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
	// Text is the envelope as received (fences and quote prefixes
	// removed, its lines otherwise untouched, so a signature still
	// verifies): what Send posts to the relay.
	Text string `json:"text,omitempty"`
}

// CheckResult is what Check returns.
type CheckResult struct {
	Envelopes []Found `json:"envelopes"`
	// Known is the trust store after the checks, in the known_keys file
	// format (docs/signing.md §5): keys pinned on first use are in it.
	Known string `json:"known"`
}

// Check finds the complete envelopes of text (those with [[END]]: a
// message still streaming has none yet) and the malformed ones, and
// verifies each signed envelope against the trust store known (the
// known_keys file format; empty is an empty store), pinning announced keys
// on first use while the store holds fewer than MaxFirstUseKeys entries.
// It fails only when known cannot be read.
func Check(ctx context.Context, text string, known string) (CheckResult, error) {
	store, err := signing.NewMemoryTrustStore([]byte(known))
	if err != nil {
		return CheckResult{}, fmt.Errorf("browser: the extension's trust store: %w", err)
	}
	v := &signing.Verifier{Store: store}
	entries, err := store.Entries()
	if err != nil {
		return CheckResult{}, fmt.Errorf("browser: the extension's trust store: %w", err)
	}
	held := len(entries)
	res := CheckResult{Envelopes: []Found{}}
	lines := strings.Split(text, "\n")
	n := 0
	err = read(text, false, func(env *envelope.Envelope, se *envelope.SyntaxError) error {
		defer func() { n++ }()
		if se != nil {
			header := headerBefore(lines, se.Line)
			f := Found{Index: n, Line: header, Status: StatusError}
			f.Reason = fmt.Sprintf("%s at line %d of the envelope: %s", se.Code, se.Line-header+1, se.Msg)
			if header == 0 {
				f.Line = se.Line
				f.Reason = fmt.Sprintf("%s: %s", se.Code, se.Msg)
			}
			res.Envelopes = append(res.Envelopes, f)
			return nil
		}
		if !env.Complete {
			return nil
		}
		f := Found{Index: n, Message: env.Message, Line: env.Line, From: env.From, To: env.To, Intent: env.Intent, Text: string(env.Source())}
		v.NoTOFU = held >= MaxFirstUseKeys
		r := v.Verify(ctx, env)
		if r.Status == signing.StatusFirstUse {
			held++
		}
		if r.Status == signing.StatusVerified {
			// A key first seen from one sender proves nothing about
			// another (docs/security.md, "Who speaks"): the relay refuses
			// it, and the page must not show it verified.
			if e, ok, err := store.Lookup(r.Pkid); err == nil && ok && cmp.Or(e.Sender, e.Seen) != "" && cmp.Or(e.Sender, e.Seen) != env.From {
				r.Status = signing.StatusUnknownKey
				r.Err = fmt.Errorf("%w: key id %s was first seen from %s, not %s: it proves nothing about %s", signing.ErrUnknownKey, r.Pkid, cmp.Or(e.Sender, e.Seen), env.From, env.From)
			}
		}
		if v.NoTOFU && r.Status == signing.StatusUnknownKey && r.Key != nil {
			r.Err = fmt.Errorf("%w: the extension's trust store is full (%d keys, the most it keeps): the key %s announces is not pinned", signing.ErrUnknownKey, held, r.Pkid)
		}
		f.Status, f.Pkid = string(r.Status), r.Pkid
		if r.Status == signing.StatusBadSignature {
			f.Status = StatusInvalid
		}
		if r.Key != nil {
			f.Fingerprint = r.Key.Fingerprint()
		}
		if r.Err != nil && r.Status != signing.StatusUnsigned {
			f.Reason = r.Err.Error()
		}
		res.Envelopes = append(res.Envelopes, f)
		return nil
	})
	if err != nil {
		return res, err
	}
	if len(text) > MaxText {
		// read stopped at the cut: say so, or the envelopes after it
		// would vanish without a word.
		line := strings.Count(text[:MaxText], "\n") + 1
		res.Envelopes = append(res.Envelopes, Found{Index: n, Line: line, Status: StatusError,
			Reason: fmt.Sprintf("%s: the message is longer than %d MiB; what follows line %d was not checked", envelope.CodeTooLarge, MaxText>>20, line)})
	}
	b, err := store.Bytes()
	if err != nil {
		return res, err
	}
	res.Known = string(b)
	return res, nil
}

// headerBefore returns the 1-based number of the last line at or before
// line that holds an envelope header ("[[A→B v1]]", or with the arrows
// "->" and "=>" the parser also accepts), 0 if none.
func headerBefore(lines []string, line int) int {
	for i := min(line, len(lines)) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		l = strings.TrimSpace(strings.TrimLeft(l, ">"))
		if strings.HasPrefix(l, "[[") && !strings.HasPrefix(l, "[[END]]") && (strings.Contains(l, "→") || strings.Contains(l, "->") || strings.Contains(l, "=>")) {
			return i + 1
		}
	}
	return 0
}

// Fence returns text in a ``` fence (longer when text holds a run of
// backticks), the form chat composers keep intact.
func Fence(text string) string {
	n, run := 3, 0
	for _, c := range text {
		if c == '`' {
			run++
			n = max(n, run+1)
		} else {
			run = 0
		}
	}
	text = strings.TrimRight(text, "\n")
	f := strings.Repeat("`", n)
	return f + "\n" + text + "\n" + f + "\n"
}

// Key is one key of the extension's trust store, as the options page
// lists it.
type Key struct {
	Pkid        string `json:"pkid"`
	Fingerprint string `json:"fingerprint"`
	// Sender is the envelope sender the key was first seen from ("" when
	// the store does not say).
	Sender    string `json:"sender"`
	FirstSeen string `json:"first_seen"`
	Revoked   bool   `json:"revoked"`
}

// Keys returns the keys of the trust store known (the known_keys file
// format), in the store's order.
func Keys(known string) ([]Key, error) {
	store, err := signing.NewMemoryTrustStore([]byte(known))
	if err != nil {
		return nil, fmt.Errorf("browser: the extension's trust store: %w", err)
	}
	entries, err := store.Entries()
	if err != nil {
		return nil, fmt.Errorf("browser: the extension's trust store: %w", err)
	}
	keys := make([]Key, 0, len(entries))
	for _, e := range entries {
		k := Key{Pkid: e.Key.Pkid, Fingerprint: e.Key.Fingerprint(), Sender: cmp.Or(e.Sender, e.Seen), Revoked: e.Revoked}
		if !e.FirstSeen.IsZero() {
			k.FirstSeen = e.FirstSeen.UTC().Format("2006-01-02T15:04:05Z")
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// Forget removes from the trust store known the keys first seen from
// sender (a first-use pin the user knows to be wrong, or a key the sender
// replaced), so that the sender's next announced key is a first use again
// instead of key-changed. A revoked key stays: forgetting it would let the
// compromised key be pinned again. It returns the store and how many keys
// it forgot.
func Forget(known, sender string) (string, int, error) {
	store, err := signing.NewMemoryTrustStore([]byte(known))
	if err != nil {
		return "", 0, fmt.Errorf("browser: the extension's trust store: %w", err)
	}
	entries, err := store.Entries()
	if err != nil {
		return "", 0, fmt.Errorf("browser: the extension's trust store: %w", err)
	}
	n := 0
	for _, e := range entries {
		if e.Revoked || cmp.Or(e.Sender, e.Seen) != sender {
			continue
		}
		if err := store.Remove(e.Key.Pkid); err != nil {
			return "", 0, fmt.Errorf("browser: forgetting %s: %w", e.Key.Pkid, err)
		}
		n++
	}
	b, err := store.Bytes()
	if err != nil {
		return "", 0, fmt.Errorf("browser: the extension's trust store: %w", err)
	}
	return string(b), n, nil
}
