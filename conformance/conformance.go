// Package conformance checks an envelope parser — any implementation, in
// any language — against the language-neutral cases of
// fixtures/conformance/manifest.json: each case is an input text and the
// JSON Lines the parser must print for it (one JSON object per envelope
// found, or an error object with the expected code and line, in the JSON
// form of docs/format.md §11, described by
// fixtures/conformance/envelope.schema.json).
//
// Run feeds every case to a command on standard input and compares what it
// prints; Compare does the comparison for one case. The package neither
// parses envelopes nor decides exit codes: `crosstalk conformance` does
// that, and docs/conformance.md tells implementers how to use it.
package conformance

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/crosstalk-go/crosstalk/fixtures"
)

// Manifest is the conformance manifest: the cases and what they need.
type Manifest struct {
	// Version is the manifest format's version, 1.
	Version int `json:"version"`
	// Spec names the protocol text the cases follow.
	Spec string `json:"spec"`
	// Schema is the JSON Schema of one output line, relative to the
	// manifest.
	Schema string `json:"schema"`
	// Cases in name order.
	Cases []Case `json:"cases"`
}

// Case is one input and the output expected for it.
type Case struct {
	// Name is unique: the vector's name, with ".strict" for the strict
	// variant.
	Name string `json:"name"`
	// Description says what the case tests.
	Description string `json:"description,omitempty"`
	// Strict cases must be parsed in strict mode (docs/format.md): incomplete
	// envelopes, invalid ids and unclassifiable addresses are errors.
	Strict bool `json:"strict,omitempty"`
	// Input is the text fed on standard input when it is valid UTF-8;
	// otherwise InputBase64 holds the bytes.
	Input       string `json:"input,omitempty"`
	InputBase64 string `json:"input_base64,omitempty"`
	// Expect holds one JSON object per envelope found, in input order: an
	// envelope, or {"error":{"code":…,"line":…}}. Empty when the input
	// holds no envelope.
	Expect []json.RawMessage `json:"expect"`
}

// Bytes returns the case's input.
func (c *Case) Bytes() ([]byte, error) {
	if c.InputBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(c.InputBase64)
		if err != nil {
			return nil, fmt.Errorf("conformance: case %s: input_base64: %w", c.Name, err)
		}
		return b, nil
	}
	return []byte(c.Input), nil
}

// Parse decodes a manifest and checks that it is usable.
func Parse(data []byte) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("conformance: manifest: %w", err)
	}
	if m.Version != 1 {
		return nil, fmt.Errorf("conformance: manifest version %d, want 1", m.Version)
	}
	if len(m.Cases) == 0 {
		return nil, errors.New("conformance: manifest has no cases")
	}
	seen := map[string]bool{}
	for _, c := range m.Cases {
		if c.Name == "" || seen[c.Name] {
			return nil, fmt.Errorf("conformance: manifest: empty or duplicate case name %q", c.Name)
		}
		seen[c.Name] = true
	}
	return &m, nil
}

// Compare reports how got, the JSON Lines a parser printed for c, differs
// from c.Expect, or nil when it matches. Envelopes must be equal as JSON
// values (key order does not matter; absent keys must be absent); errors
// match on code and line, the message is free. Blank lines are ignored.
func Compare(c *Case, got []byte) error {
	var lines [][]byte
	for _, l := range bytes.Split(got, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			lines = append(lines, l)
		}
	}
	for i := 0; i < max(len(lines), len(c.Expect)); i++ {
		switch {
		case i >= len(lines):
			return fmt.Errorf("object %d: missing (want %d object(s), got %d): want %s", i+1, len(c.Expect), len(lines), summary(c.Expect[i]))
		case i >= len(c.Expect):
			return fmt.Errorf("object %d: unexpected (want %d object(s), got %d): %s", i+1, len(c.Expect), len(lines), clip(lines[i]))
		}
		var want, have map[string]any
		if err := json.Unmarshal(c.Expect[i], &want); err != nil {
			return fmt.Errorf("object %d: the manifest's expectation is not a JSON object: %w", i+1, err)
		}
		if err := json.Unmarshal(lines[i], &have); err != nil {
			return fmt.Errorf("object %d: not a JSON object: %s", i+1, clip(lines[i]))
		}
		if err := compareObject(want, have); err != nil {
			return fmt.Errorf("object %d: %w", i+1, err)
		}
	}
	return nil
}

func compareObject(want, have map[string]any) error {
	if we, ok := want["error"].(map[string]any); ok {
		he, ok := have["error"].(map[string]any)
		if !ok {
			return fmt.Errorf("want error %v at line %v, got an envelope from line %v", we["code"], we["line"], have["line"])
		}
		if we["code"] != he["code"] || we["line"] != he["line"] {
			return fmt.Errorf("want error %v at line %v, got %v at line %v", we["code"], we["line"], he["code"], he["line"])
		}
		return nil
	}
	if he, ok := have["error"].(map[string]any); ok {
		return fmt.Errorf("want an envelope from line %v, got error %v at line %v: %v", want["line"], he["code"], he["line"], he["message"])
	}
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range have {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		w, wok := want[k]
		h, hok := have[k]
		switch {
		case !hok:
			return fmt.Errorf("key %q missing, want %s", k, jsonText(w))
		case !wok:
			return fmt.Errorf("key %q should be absent, got %s", k, jsonText(h))
		case !reflect.DeepEqual(w, h):
			return fmt.Errorf("key %q: want %s, got %s", k, jsonText(w), jsonText(h))
		}
	}
	return nil
}

func summary(raw json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return clip(raw)
	}
	if e, ok := m["error"].(map[string]any); ok {
		return fmt.Sprintf("error %v at line %v", e["code"], e["line"])
	}
	return fmt.Sprintf("envelope %v→%v from line %v", m["from"], m["to"], m["line"])
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return clip(b)
}

func clip(b []byte) string {
	const n = 120
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// Options configure Run.
type Options struct {
	// Command is the parser to run: program and arguments. It reads one
	// input on standard input and prints JSON Lines on standard output.
	Command []string
	// StrictArgs are appended to Command for strict cases. Without them
	// strict cases are skipped.
	StrictArgs []string
	// Env, when not nil, is the command's environment.
	Env []string
	// Timeout bounds one case (10 s when zero).
	Timeout time.Duration
	// Workers is how many cases run at once (2 when zero).
	Workers int
	// MaxOutput bounds what one case may print (16 MiB when zero).
	MaxOutput int64
}

// Result is the outcome of one case.
type Result struct {
	Case *Case
	// Skipped: a strict case without Options.StrictArgs.
	Skipped bool
	// Err is nil when the case passed; otherwise what differed or why
	// the command failed.
	Err error
}

// ErrCommand is wrapped by Run's error when the command cannot be started
// at all (not found, not executable): no case could run.
var ErrCommand = errors.New("conformance: cannot run the command")

// Run runs every case of m through the command and returns one Result per
// case, in manifest order. A command that exits non-zero is not a failure
// by itself (parsers exit 1 when an input holds a malformed envelope);
// what it printed decides.
func Run(ctx context.Context, m *Manifest, opts Options) ([]Result, error) {
	if len(opts.Command) == 0 {
		return nil, fmt.Errorf("%w: no command given", ErrCommand)
	}
	if _, err := exec.LookPath(opts.Command[0]); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCommand, err)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = 16 << 20
	}
	results := make([]Result, len(m.Cases))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				results[i] = runCase(ctx, &m.Cases[i], &opts)
			}
		}()
	}
	for i := range m.Cases {
		select {
		case jobs <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	return results, nil
}

func runCase(ctx context.Context, c *Case, opts *Options) Result {
	args := append([]string(nil), opts.Command[1:]...)
	if c.Strict {
		if len(opts.StrictArgs) == 0 {
			return Result{Case: c, Skipped: true}
		}
		args = append(args, opts.StrictArgs...)
	}
	in, err := c.Bytes()
	if err != nil {
		return Result{Case: c, Err: err}
	}
	cctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, opts.Command[0], args...)
	// A child of the command (a wrapper's: sh, npm) may outlive it and
	// keep standard output open; Run then waits for it no longer than
	// this after the timeout killed the command or the command exited.
	cmd.WaitDelay = time.Second
	cmd.Env = opts.Env
	cmd.Stdin = bytes.NewReader(in)
	stdout := limitedBuffer{max: opts.MaxOutput, stop: true}
	stderr := limitedBuffer{max: 4096}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	switch {
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		return Result{Case: c, Err: fmt.Errorf("no answer within %v", opts.Timeout)}
	case stdout.over:
		return Result{Case: c, Err: fmt.Errorf("printed more than %d bytes", opts.MaxOutput)}
	}
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.Exited()) {
		return Result{Case: c, Err: fmt.Errorf("command failed: %v: %s", err, firstLine(stderr.String()))}
	}
	if err := Compare(c, stdout.Bytes()); err != nil {
		if s := firstLine(stderr.String()); s != "" {
			err = fmt.Errorf("%w (stderr: %s)", err, s)
		}
		return Result{Case: c, Err: err}
	}
	return Result{Case: c}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return clip([]byte(s))
}

// limitedBuffer keeps up to max bytes and notes that more came. The
// buffer is a field, not embedded: io.Copy (exec.Cmd's) would use an
// embedded bytes.Buffer's ReadFrom and read past max.
type limitedBuffer struct {
	buf  bytes.Buffer
	max  int64
	over bool
	// stop fails the write that goes past max, which ends the copy: the
	// command's next write fails (EPIPE), so a runaway printer stops.
	stop bool
}

// errOutputLimit ends the copy of a command's output past its limit.
var errOutputLimit = errors.New("output limit reached")

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - int64(b.buf.Len()); int64(len(p)) > room {
		b.over = true
		b.buf.Write(p[:max(room, 0)])
		if b.stop {
			return 0, errOutputLimit
		}
		return len(p), nil
	}
	return b.buf.Write(p)
}

// Bytes returns what was kept.
func (b *limitedBuffer) Bytes() []byte { return b.buf.Bytes() }

// String returns what was kept.
func (b *limitedBuffer) String() string { return b.buf.String() }

var _ io.Writer = (*limitedBuffer)(nil)

// Default returns the manifest shipped in fixtures/conformance (embedded).
func Default() (*Manifest, error) {
	data, err := fixtures.Conformance.ReadFile("conformance/manifest.json")
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	return Parse(data)
}
