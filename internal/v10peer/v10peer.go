// Package v10peer runs the original AI Crosstalk v1.0 parser (the
// reference implementation the v1.1 spec migrates from, "Migration from
// v1.0 to v1.1" in docs/spec/ai-crosstalk-protocol-v1.1.md) from tests, to
// check that what crosstalk writes reads in a v1.0 parser.
//
// The implementation is not part of this repository. Setup finds a copy in
// the directory named by $CROSSTALK_V10_PEER, else in shared/peer/ai-crosstalk
// beside the repository (or beside one of its parent directories), copies it
// into a temporary directory and installs its locked dependencies with
// `npm ci` (internal/nodetest). When node, npm or the copy is missing, the
// test is skipped — and fails when $CI is "true", where the copy and node
// are part of the machine. CheckGrammar checks text against the v1.0 envelope the spec
// shows, without node.
package v10peer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/internal/nodetest"
)

// EnvDir names the environment variable that points at a copy of the v1.0
// implementation (the directory holding envelope.js and package-lock.json).
const EnvDir = "CROSSTALK_V10_PEER"

// Peer is a ready temporary copy of the v1.0 implementation.
type Peer struct {
	dir, node string
}

// Parsed is what the v1.0 parser prints for an envelope it accepts.
type Parsed struct {
	From, To, Version string
	Session           string
	Response          string
}

// ErrRejected is wrapped by Parse's error when the v1.0 parser refuses
// the input.
var ErrRejected = errors.New("v10peer: the v1.0 parser rejected the envelope")

// Setup returns a Peer for t, or skips t (fails it under CI=true) when the
// implementation or node cannot be found.
func Setup(t testing.TB) *Peer {
	t.Helper()
	src, err := find()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("v1.0 peer parser unavailable under CI: %v", err)
		}
		t.Skipf("v1.0 peer parser unavailable: %v (set %s to a copy of the v1.0 implementation)", err, EnvDir)
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatalf("copying the v1.0 implementation from %s: %v", src, err)
	}
	_ = os.RemoveAll(filepath.Join(dir, "node_modules")) // installed afresh from its lock file
	return &Peer{dir: dir, node: nodetest.Node(t, dir, "chalk")}
}

// find locates the implementation: $CROSSTALK_V10_PEER, else
// shared/peer/ai-crosstalk beside the module root or one of its parents.
func find() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		if _, err := os.Stat(filepath.Join(d, "envelope.js")); err != nil {
			return "", fmt.Errorf("$%s: %w", EnvDir, err)
		}
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root := wd
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
		root = parent
	}
	for d, i := filepath.Dir(root), 0; i < 3; d, i = filepath.Dir(d), i+1 {
		p := filepath.Join(d, "shared", "peer", "ai-crosstalk")
		if _, err := os.Stat(filepath.Join(p, "envelope.js")); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no shared/peer/ai-crosstalk beside %s", root)
}

var fromLine = regexp.MustCompile(`^From: (.*) → (.*) \(v(\d+)\)$`)

// Parse runs `node envelope.js parse` on text and returns what it printed.
// An error wrapping ErrRejected carries the parser's message.
func (p *Peer) Parse(text []byte) (Parsed, error) {
	cmd := exec.Command(p.node, "envelope.js", "parse")
	cmd.Dir = p.dir
	cmd.Stdin = bytes.NewReader(text)
	cmd.Env = append(os.Environ(), "FORCE_COLOR=0", "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return Parsed{}, fmt.Errorf("%w: %s", ErrRejected, strings.TrimSpace(stderr.String()))
		}
		return Parsed{}, fmt.Errorf("v10peer: running node: %w", err)
	}
	return parseOutput(stdout.String())
}

// parseOutput reads what `node envelope.js parse` printed for an
// envelope it accepted.
func parseOutput(stdout string) (Parsed, error) {
	out := strings.TrimSuffix(stdout, "\n")
	head, rest, ok1 := strings.Cut(out, "\n")
	m := fromLine.FindStringSubmatch(head)
	sess, resp, ok2 := strings.Cut(rest, "\nResponse:\n")
	if !ok1 || !ok2 || m == nil || !strings.HasPrefix(sess, "Session: ") {
		return Parsed{}, fmt.Errorf("v10peer: unexpected output %q", out)
	}
	return Parsed{From: m[1], To: m[2], Version: m[3], Session: strings.TrimPrefix(sess, "Session: "), Response: resp}, nil
}

// Result is Parse's answer for one input of ParseAll.
type Result struct {
	Parsed Parsed
	Err    error // wraps ErrRejected when the v1.0 parser refused the input
}

// batchDriver runs envelope.js's own `parse` command on each input of a
// JSON array of base64 strings read from stdin, in this one node
// process, and writes a JSON array of {out, err, code}: what the command
// printed on stdout and stderr and the code it exited with. Each input
// imports envelope.js afresh (its URL made distinct by a query), so the
// unmodified module runs from its top, CLI handling and all, as
// `node envelope.js parse < input` does; only its process is stood in
// for: argv says parse, stdin is an emitter that sends the input (the
// decoded text, as stdin's setEncoding('utf8') hands it over) and ends,
// console.log/error are captured and process.exit stops the run with
// its code.
const batchDriver = `import { EventEmitter } from 'node:events';
import { format } from 'node:util';

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const inputs = JSON.parse(Buffer.concat(chunks).toString('utf8'));
const script = new URL('./envelope.js', import.meta.url);
const real = {
  argv: process.argv, log: console.log, error: console.error, exit: process.exit,
  stdin: Object.getOwnPropertyDescriptor(process, 'stdin'),
};
class Exit { constructor(code) { this.code = code; } }
const results = [];
for (const [i, b64] of inputs.entries()) {
  const stdin = new EventEmitter();
  stdin.setEncoding = () => stdin;
  const r = { out: '', err: '', code: 0 };
  console.log = (...a) => { r.out += format(...a) + '\n'; };
  console.error = (...a) => { r.err += format(...a) + '\n'; };
  process.exit = (code) => { throw new Exit(code ?? 0); };
  process.argv = [real.argv[0], script.pathname, 'parse'];
  Object.defineProperty(process, 'stdin', { configurable: true, get: () => stdin });
  try {
    await import(script.href + '?input=' + i);
    stdin.emit('data', Buffer.from(b64, 'base64').toString('utf8'));
    stdin.emit('end');
  } catch (e) {
    if (!(e instanceof Exit)) {
      r.code = -1;
      r.err += 'batch driver: ' + (e && e.stack || e) + '\n';
    } else {
      r.code = e.code;
    }
  } finally {
    Object.defineProperty(process, 'stdin', real.stdin);
    Object.assign(process, { argv: real.argv, exit: real.exit });
    Object.assign(console, { log: real.log, error: real.error });
  }
  results.push(r);
}
process.stdout.write(JSON.stringify(results));
`

// ParseAll is Parse for each of texts, in one node process instead of
// one per text (node takes a good part of a second to start on a loaded
// machine): the v1.0 implementation's own envelope.js runs its `parse`
// command on each text as a fresh module (batchDriver). The error is for
// a batch that could not run; the results hold each text's answer.
func (p *Peer) ParseAll(texts [][]byte) ([]Result, error) {
	const driver = "crosstalk-batch.mjs"
	if err := os.WriteFile(filepath.Join(p.dir, driver), []byte(batchDriver), 0o644); err != nil {
		return nil, fmt.Errorf("v10peer: %w", err)
	}
	in, err := json.Marshal(texts) // []byte as base64
	if err != nil {
		return nil, fmt.Errorf("v10peer: %w", err)
	}
	cmd := exec.Command(p.node, driver)
	cmd.Dir = p.dir
	cmd.Stdin = bytes.NewReader(in)
	cmd.Env = append(os.Environ(), "FORCE_COLOR=0", "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("v10peer: running node: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var runs []struct {
		Out, Err string
		Code     int
	}
	if err := json.Unmarshal(stdout.Bytes(), &runs); err != nil || len(runs) != len(texts) {
		return nil, fmt.Errorf("v10peer: batch output for %d inputs: %d results, %v", len(texts), len(runs), err)
	}
	res := make([]Result, len(runs))
	for i, r := range runs {
		switch {
		case r.Code < 0:
			return nil, fmt.Errorf("v10peer: input %d: %s", i, strings.TrimSpace(r.Err))
		case r.Code > 0:
			res[i].Err = fmt.Errorf("%w: %s", ErrRejected, strings.TrimSpace(r.Err))
		default:
			res[i].Parsed, res[i].Err = parseOutput(r.Out)
		}
	}
	return res, nil
}

// v10Line matches the lines of the v1.0 envelope the spec shows ("Core
// Grammar Changes", "v1.0 Envelope"): header, then `key: value` fields,
// the v1.0 keys among them, `body: |` (or the `response: |` v1.0 replies
// used) with its indented lines, `sig:` and [[END]].
var (
	v10Header  = regexp.MustCompile(`^\[\[[^\]→]+→[^\]→]+ v1\]\]$`)
	v10Field   = regexp.MustCompile(`^([a-z][a-z0-9_-]*): (\S.*)$`)
	v10Session = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}Z [0-9a-f]{6}$`)
	v10Intents = map[string]bool{"QUESTION": true, "ANSWER": true, "STATUS": true, "PATCH": true, "NOTE": true}
)

// CheckGrammar reports how text, one envelope, departs from the v1.0
// envelope of the spec: it must have a session: in the spec's form (after
// user:, which the spec shows but v1.0 parsers do not require),
// a v1.0 intent (or none, in the `response: |` form), no META block, the
// body block, a sig: line and [[END]], in that order. Fields v1.0 lacks
// (thread, parent, message) are allowed after the intent: v1.0 parsers
// ignore unknown headers.
func CheckGrammar(text []byte) error {
	lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
	if len(lines) < 4 || !v10Header.MatchString(lines[0]) {
		return fmt.Errorf("line 1: not a v1 header: %q", lines[0])
	}
	seen := map[string]int{}
	i := 1
	for ; i < len(lines) && lines[i] != "" && lines[i] != "body: |" && lines[i] != "response: |"; i++ {
		m := v10Field.FindStringSubmatch(lines[i])
		if m == nil {
			return fmt.Errorf("line %d: not a field: %q", i+1, lines[i])
		}
		if m[1] == "meta" {
			return fmt.Errorf("line %d: META block, which v1.0 lacks", i+1)
		}
		seen[m[1]] = i
		switch m[1] {
		case "session":
			if !v10Session.MatchString(m[2]) {
				return fmt.Errorf("line %d: session %q is not in the spec's form", i+1, m[2])
			}
		case "intent":
			if !v10Intents[m[2]] {
				return fmt.Errorf("line %d: intent %s is not a v1.0 intent", i+1, m[2])
			}
		}
	}
	if _, ok := seen["session"]; !ok {
		return errors.New("no session: line")
	}
	if seen["user"] > seen["session"] {
		return errors.New("the user: line must come before the session: line")
	}
	for _, k := range []string{"thread", "parent", "message"} {
		if j, ok := seen[k]; ok && (j < seen["context"] || j < seen["intent"]) {
			return fmt.Errorf("line %d: %s: between session: and intent: would be read as part of the session", j+1, k)
		}
	}
	if i < len(lines) && lines[i] == "" {
		i++ // the blank line v1.1 writers put before the body
	}
	if i >= len(lines) || lines[i] != "body: |" && lines[i] != "response: |" {
		return errors.New("no body: | block")
	}
	if _, ok := seen["intent"]; !ok && lines[i] == "body: |" {
		return errors.New("no intent: line before body: |")
	}
	for i++; i < len(lines) && (lines[i] == "" || strings.HasPrefix(lines[i], "  ")); i++ {
	}
	if i+2 != len(lines) || !strings.HasPrefix(lines[i], "sig: ") || lines[i+1] != "[[END]]" {
		return fmt.Errorf("line %d: want sig: and [[END]] after the body", i+1)
	}
	return nil
}
