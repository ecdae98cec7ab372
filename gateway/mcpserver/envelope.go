package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/signing"
)

type parseIn struct {
	Text   string `json:"text" jsonschema:"text holding envelopes: a transcript, a file, a paste"`
	Strict bool   `json:"strict,omitempty" jsonschema:"strict mode: an envelope without [[END]] is an error"`
}

// ParseError is a malformed envelope (docs/design.md §3.4).
type ParseError struct {
	Code    string `json:"code"`
	Line    int    `json:"line"`
	Message string `json:"message"`
}

// Parsed is one envelope found, or the error in its place.
type Parsed struct {
	Envelope *envelope.Envelope `json:"envelope,omitempty"`
	Error    *ParseError        `json:"error,omitempty"`
}

type parseOut struct {
	Envelopes []Parsed `json:"envelopes"`
	Failed    int      `json:"failed"`
}

func readAll(text string, strict bool) ([]Parsed, int) {
	r := envelope.NewReader(strings.NewReader(text))
	r.Strict = strict
	var out []Parsed
	failed := 0
	for {
		env, err := r.Next()
		if err == io.EOF {
			return out, failed
		}
		var se *envelope.SyntaxError
		switch {
		case errors.As(err, &se):
			out = append(out, Parsed{Error: &ParseError{Code: string(se.Code), Line: se.Line, Message: se.Msg}})
			failed++
		case err != nil:
			out = append(out, Parsed{Error: &ParseError{Code: string(envelope.CodeFormat), Message: err.Error()}})
			return out, failed + 1
		default:
			out = append(out, Parsed{Envelope: env})
		}
	}
}

func (s *server) parse(_ context.Context, in parseIn) (*mcp.CallToolResult, parseOut, error) {
	envs, failed := readAll(in.Text, in.Strict)
	out := parseOut{Envelopes: envs, Failed: failed}
	if out.Envelopes == nil {
		out.Envelopes = []Parsed{}
	}
	if len(envs) == 0 {
		return nil, out, errors.New("no envelope found in the text")
	}
	return nil, out, nil
}

type composeIn struct {
	From    string          `json:"from,omitempty" jsonschema:"sender (default: you)"`
	To      string          `json:"to" jsonschema:"receiver"`
	Intent  composeIntent   `json:"intent" jsonschema:"the intent"`
	Body    string          `json:"body" jsonschema:"the body text"`
	Thread  string          `json:"thread,omitempty" jsonschema:"thread id (default: new)"`
	Parent  string          `json:"parent,omitempty" jsonschema:"parent message id"`
	Message string          `json:"message,omitempty" jsonschema:"message id (default: new)"`
	Context string          `json:"context,omitempty" jsonschema:"topic"`
	User    string          `json:"user,omitempty" jsonschema:"user field"`
	Session string          `json:"session,omitempty" jsonschema:"session field"`
	Meta    []envelope.Meta `json:"meta,omitempty" jsonschema:"META blocks, in order"`
	Sign    bool            `json:"sign,omitempty" jsonschema:"sign with your configured key"`
}

type composeOut struct {
	Text     string             `json:"text"`
	Envelope *envelope.Envelope `json:"envelope"`
	Signed   bool               `json:"signed"`
}

func (s *server) compose(_ context.Context, in composeIn) (*mcp.CallToolResult, composeOut, error) {
	var out composeOut
	from := in.From
	if from == "" {
		from = s.opts.Agent
	}
	intent, _, _ := envelope.NormalizeIntent(string(in.Intent))
	env := envelope.New(from, strings.TrimSpace(in.To), intent, envelope.CleanBody(in.Body))
	env.Context, env.Parent, env.User, env.Session, env.Meta = in.Context, in.Parent, in.User, in.Session, in.Meta
	if in.Thread != "" {
		env.Thread = in.Thread
	}
	if in.Message != "" {
		env.Message = in.Message
	}
	text, err := envelope.Marshal(env)
	if err != nil {
		return nil, out, err
	}
	if in.Sign {
		if s.opts.Signer == nil {
			return nil, out, errors.New("no signing key is configured (start crosstalk mcp with --key FILE)")
		}
		if text, err = s.opts.Signer(text); err != nil {
			return nil, out, fmt.Errorf("signing: %w", err)
		}
		out.Signed = true
	}
	if len(text) > envelope.MaxEnvelopeSize {
		return nil, out, fmt.Errorf("%s: envelope of %d bytes exceeds %d", envelope.CodeTooLarge, len(text), envelope.MaxEnvelopeSize)
	}
	parsed, err := envelope.NewReader(bytes.NewReader(text)).Next()
	if err != nil {
		return nil, out, fmt.Errorf("composed envelope does not read back: %w", err)
	}
	out.Text, out.Envelope = string(text), parsed
	return textResult(out.Text), out, nil
}

type verifyIn struct {
	Text      string `json:"text" jsonschema:"text holding signed envelopes"`
	PublicKey string `json:"publicKey,omitempty" jsonschema:"the only key to try: alg:base64url, e.g. ed25519:…"`
	Pkid      string `json:"pkid,omitempty" jsonschema:"key id of publicKey (default: the one named by the signature)"`
}

// Verified is the verification of one envelope.
type Verified struct {
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	Message string `json:"message,omitempty"`
	Status  string `json:"status"`
	Pkid    string `json:"pkid,omitempty"`
	Alg     string `json:"alg,omitempty"`
	Error   string `json:"error,omitempty"`
}

type verifyOut struct {
	Results []Verified `json:"results"`
	// OK reports that every envelope is verified.
	OK bool `json:"ok"`
}

func (s *server) verify(ctx context.Context, in verifyIn) (*mcp.CallToolResult, verifyOut, error) {
	out := verifyOut{Results: []Verified{}, OK: true}
	if in.PublicKey != "" {
		if _, err := signing.ParsePublicKeyValue("key", in.PublicKey); err != nil {
			return nil, out, fmt.Errorf("publicKey: %w", err)
		}
	}
	envs, _ := readAll(in.Text, false)
	if len(envs) == 0 {
		return nil, out, errors.New("no envelope found in the text")
	}
	for _, p := range envs {
		if p.Error != nil {
			out.Results = append(out.Results, Verified{Status: "malformed", Error: p.Error.Message})
			out.OK = false
			continue
		}
		v := &signing.Verifier{Store: s.opts.Trust, NoTOFU: true}
		if in.PublicKey != "" {
			pkid := in.Pkid
			if sig, err := signing.ParseSig(p.Envelope.Sig); pkid == "" && err == nil {
				pkid = sig.Pkid
			}
			if pkid == "" {
				pkid = p.Envelope.From
			}
			k, err := signing.ParsePublicKeyValue(pkid, in.PublicKey)
			if err != nil {
				return nil, out, fmt.Errorf("publicKey: %w", err)
			}
			v.Keys = []*signing.PublicKey{k}
		}
		res := v.Verify(ctx, p.Envelope)
		r := Verified{From: p.Envelope.From, To: p.Envelope.To, Message: p.Envelope.Message, Status: string(res.Status), Pkid: res.Pkid, Alg: string(res.Alg)}
		if res.Err != nil && res.Status != signing.StatusUnsigned {
			r.Error = res.Err.Error()
		}
		out.OK = out.OK && res.Status == signing.StatusVerified
		out.Results = append(out.Results, r)
	}
	return nil, out, nil
}
