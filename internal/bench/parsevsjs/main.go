// Command parsevsjs compares the envelope parser with the original AI
// Crosstalk implementation's (soiha/ai-crosstalk, envelope.js, MIT): its
// parseEnvelope function alone, timed inside node, against envelope.Unmarshal
// and a fresh Reader's first Next, timed inside this process, on the same
// inputs — v1.0 and v1.1 envelopes with a small (~1.3 KB) and a 20 KB body —
// in turns, in one run, each measurement lasting the same time on both
// sides. It prints each side's median wall time per envelope — the
// headline, what a caller waits on — and, beside it, CPU time of the
// process, and how many times faster ours is, ours with all cores and with
// GOMAXPROCS=1 (see procsSettings); and what ours allocates per envelope
// (issue 19: the goal is ≥ 2.0 on every input, judged on wall time —
// estimated by CPU time with GOMAXPROCS=1 when the machine is too loaded
// for either side to have a core; docs/performance.md, "Against the
// original parser").
//
//	go run ./internal/bench/parsevsjs [-peer DIR] [-node PATH] [-rounds 5] [-time 200ms]
//
// The original is found with -peer, else $CROSSTALK_PEER, else
// ../shared/peer/ai-crosstalk beside the repository. It runs from a
// temporary copy; none of its code is in this repository. Without node or
// without the original, the command says so and measures ours only.
//
// This is a benchmark command, not a test: it asserts nothing about time.
package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/internal/cputime"
)

//go:embed driver.mjs
var driver []byte

func main() {
	var c config
	flag.StringVar(&c.peer, "peer", "", "directory of the original implementation (envelope.js); default $CROSSTALK_PEER or ../shared/peer/ai-crosstalk beside the repository")
	flag.StringVar(&c.node, "node", "node", "the node binary")
	flag.IntVar(&c.rounds, "rounds", 5, "measurements of each side per input; the median is reported")
	flag.DurationVar(&c.budget, "time", 200*time.Millisecond, "duration of one measurement")
	flag.Parse()
	if flag.NArg() > 0 || c.rounds < 1 || c.budget <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "parsevsjs:", err)
		os.Exit(1)
	}
}

type config struct {
	peer   string
	node   string
	rounds int
	budget time.Duration
}

// input is one envelope both parsers read, and the body both must find.
type input struct {
	name string
	text []byte
	body string
}

// proseLine is a line of a typical assistant message.
const proseLine = "The deploy pipeline is green again; the flaky test was a race in the cache warm-up."

// inputs returns the four input classes: the original's own v1.0 form (as
// its createEnvelope writes it) and our canonical v1.1 form (ids, a META
// block, a v1.1 intent), each with a body filling it to ~1.3 KB and ~20 KB.
func inputs() ([]input, error) {
	var out []input
	for _, size := range []struct {
		name  string
		bytes int
	}{{"small", 1300}, {"20KB", 20 << 10}} {
		v10 := func(body string) []byte {
			return []byte("[[CLAUDE→CHATGPT v1]]\nuser: kalle\nsession: 2025-10-09T16Z abc123\ncontext: deploy-status\nintent: QUESTION\nbody: |\n  " +
				strings.ReplaceAll(body, "\n", "\n  ") + "\nsig: none\n[[END]]\n")
		}
		v11 := func(body string) ([]byte, error) {
			e := envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, body)
			e.User, e.Session, e.Context = "kalle", "2025-10-09T16Z abc123", "deploy-status"
			e.Thread, e.Parent, e.Message = "01J9J3D9C2V8M4P1R6S8T9V0V1", "01J9J3DBC4N7P2Q3R5S7T9V1V2", "01J9J3DCZ5P8Q2R4S6T8V0W1X3"
			e.Meta = []envelope.Meta{{Namespace: "routing", Fields: []envelope.Field{
				{Key: "X-Route", Value: "claude://session/abc → chatgpt://thread/xyz"}, {Key: "X-Reply-To", Value: "claude://session/abc"}, {Key: "X-Priority", Value: "high"}}}}
			e.Sig = "none"
			return envelope.Marshal(e)
		}
		for _, form := range []string{"v1.0", "v1.1"} {
			var lines []string
			var text []byte
			for {
				lines = append(lines, proseLine)
				body := strings.Join(lines, "\n")
				if form == "v1.0" {
					text = v10(body)
				} else {
					var err error
					if text, err = v11(body); err != nil {
						return nil, err
					}
				}
				if len(text) >= size.bytes {
					out = append(out, input{name: form + "-" + size.name, text: text, body: body})
					break
				}
			}
		}
	}
	return out, nil
}

// goParsers are the ways of ours measured, by name.
var goParsers = []struct {
	name string
	fn   func([]byte) (*envelope.Envelope, error)
}{
	{"Unmarshal", envelope.Unmarshal},
	{"NewReader.Next", func(b []byte) (*envelope.Envelope, error) { return envelope.NewReader(bytes.NewReader(b)).Next() }},
	{"NewBytesReader.Next", func(b []byte) (*envelope.Envelope, error) { return envelope.NewBytesReader(b).Next() }},
}

// sample is one measurement: wall and CPU time per envelope, in ns; for
// ours also garbage collections, bytes and objects allocated per envelope.
type sample struct{ wall, cpu, gc, bytes, allocs float64 }

// goMetrics are the runtime's counters timeGo reads around its loop.
var goMetrics = []metrics.Sample{
	{Name: "/gc/cycles/total:gc-cycles"},
	{Name: "/gc/heap/allocs:bytes"},
	{Name: "/gc/heap/allocs:objects"},
}

// readMetrics returns goMetrics' values now: garbage collections, bytes
// and objects allocated.
func readMetrics() (gc, bytes, objects float64) {
	metrics.Read(goMetrics)
	return float64(goMetrics[0].Value.Uint64()), float64(goMetrics[1].Value.Uint64()), float64(goMetrics[2].Value.Uint64())
}

// timeGo measures fn on in for budget: it calls fn in chunks of chunk
// calls until budget has passed, so that every measurement spans the same
// time whatever the load (and the same share of garbage collections),
// however fast the warm-up ran. With chunk 0 it first finds a chunk that
// takes about a hundredth of budget, which it returns.
func timeGo(in input, fn func([]byte) (*envelope.Envelope, error), chunk int, budget time.Duration) (sample, int, error) {
	e, err := fn(in.text)
	if err != nil {
		return sample{}, 0, err
	}
	if e.Body != in.body {
		return sample{}, 0, fmt.Errorf("%s: body %q, want %q", in.name, e.Body, in.body)
	}
	run := func(n int) {
		for range n {
			if _, err := fn(in.text); err != nil {
				panic(err) // parsed a moment ago
			}
		}
	}
	if chunk == 0 {
		chunk = 1
		for t0 := time.Now(); ; chunk *= 2 {
			run(chunk)
			if time.Since(t0) >= budget/100 {
				break
			}
			t0 = time.Now()
		}
	}
	n := 0
	gc0, b0, o0 := readMetrics()
	c0, t0 := cputime.Process(), time.Now()
	for time.Since(t0) < budget {
		run(chunk)
		n += chunk
	}
	wall, cpu := time.Since(t0), cputime.Process()-c0
	gc1, b1, o1 := readMetrics()
	per := func(x float64) float64 { return x / float64(n) }
	return sample{
		wall: per(float64(wall.Nanoseconds())), cpu: per(float64(cpu.Nanoseconds())),
		gc: per(gc1 - gc0), bytes: per(b1 - b0), allocs: per(o1 - o0),
	}, chunk, nil
}

// js runs the original parser under node: one process for the whole run,
// asked for one measurement at a time.
type js struct {
	dir   string // the temporary copy, with the inputs and the driver
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *json.Decoder
	errb  bytes.Buffer
	close func()
}

// startJS copies the original implementation to a temporary directory,
// writes the inputs there and starts the driver. When node or the original
// is missing it returns why, and no error.
func startJS(c config, ins []input) (j *js, why string, err error) {
	node, err := exec.LookPath(c.node)
	if err != nil {
		return nil, fmt.Sprintf("node not found (%v)", err), nil
	}
	peer := c.peer
	if peer == "" {
		peer = os.Getenv("CROSSTALK_PEER")
	}
	if peer == "" {
		root, err := repoRoot()
		if err != nil {
			return nil, "", err
		}
		peer = filepath.Join(root, "..", "shared", "peer", "ai-crosstalk")
	}
	if _, err := os.Stat(filepath.Join(peer, "envelope.js")); err != nil {
		return nil, fmt.Sprintf("the original implementation is not at %s (set -peer or CROSSTALK_PEER): %v", peer, err), nil
	}
	dir, err := os.MkdirTemp("", "parsevsjs-")
	if err != nil {
		return nil, "", err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if err := copyFiles(peer, filepath.Join(dir, "original")); err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "driver.mjs"), driver, 0o644); err != nil {
		return nil, "", err
	}
	args := []string{filepath.Join(dir, "driver.mjs"), filepath.Join(dir, "original", "envelope.js")}
	for _, in := range ins {
		text, body := filepath.Join(dir, in.name+".txt"), filepath.Join(dir, in.name+".body")
		if err := errors.Join(os.WriteFile(text, in.text, 0o644), os.WriteFile(body, []byte(in.body), 0o644)); err != nil {
			return nil, "", err
		}
		args = append(args, in.name+"="+text+"="+body)
	}
	j = &js{dir: dir, cmd: exec.Command(node, args...)}
	j.cmd.Dir = dir
	j.cmd.Stderr = &j.errb
	if j.in, err = j.cmd.StdinPipe(); err != nil {
		return nil, "", err
	}
	stdout, err := j.cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := j.cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("starting node: %w", err)
	}
	j.out = json.NewDecoder(stdout)
	j.close = func() {
		j.in.Close()
		j.cmd.Wait()
		os.RemoveAll(dir)
	}
	var hello struct {
		Ready bool   `json:"ready"`
		Error string `json:"error"`
	}
	if err := j.out.Decode(&hello); err != nil || !hello.Ready {
		j.close()
		return nil, "", fmt.Errorf("the original parser did not load: %s %v %s", hello.Error, err, j.errb.Bytes())
	}
	return j, "", nil
}

// copyFiles copies the regular files at the top of src (not node_modules or
// other directories: parseEnvelope needs none) into dst.
func copyFiles(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// jsResult is the driver's answer to one request.
type jsResult struct {
	Name  string  `json:"name"`
	NS    float64 `json:"ns"`
	CPU   float64 `json:"cpu"`
	OK    bool    `json:"ok"`
	Error string  `json:"error"`
}

// measure asks the driver for one measurement of an input.
func (j *js) measure(name string, budget time.Duration) (jsResult, error) {
	var r jsResult
	if _, err := fmt.Fprintf(j.in, "%s %d\n", name, budget.Milliseconds()); err != nil {
		return r, fmt.Errorf("node: %w: %s", err, j.errb.Bytes())
	}
	if err := j.out.Decode(&r); err != nil {
		return r, fmt.Errorf("reading node's answer: %w: %s", err, j.errb.Bytes())
	}
	if r.NS == 0 {
		return r, fmt.Errorf("the original parser failed on %s: %s", name, r.Error)
	}
	return r, nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the repository (no go.mod above the working directory); set -peer")
		}
		dir = parent
	}
}

// medianOf returns the median of one figure of the samples.
func medianOf(ss []sample, get func(sample) float64) float64 {
	if len(ss) == 0 {
		return 0
	}
	xs := make([]float64, len(ss))
	for i, s := range ss {
		xs[i] = get(s)
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

func run(c config, w io.Writer) error {
	ins, err := inputs()
	if err != nil {
		return err
	}
	j, why, err := startJS(c, ins)
	if err != nil {
		return err
	}
	if j != nil {
		defer j.close()
	} else {
		fmt.Fprintf(w, "skipping the original parser: %s; measuring ours only\n\n", why)
	}

	// Ours and the original take turns on every input, round after round,
	// so that load from other processes weighs on both sides alike. Ours
	// runs with all the machine's cores and with one (see procsSettings).
	procs := procsSettings()
	defer runtime.GOMAXPROCS(procs[0])
	goS := map[string][]sample{} // input/parser/GOMAXPROCS → per round
	goN := map[string]int{}      // input/parser/GOMAXPROCS → chunk
	jsS := map[string][]sample{}
	jsNote := map[string]string{}
	for round := 0; round < c.rounds; round++ {
		for _, in := range ins {
			for _, n := range procs {
				runtime.GOMAXPROCS(n)
				for _, p := range goParsers {
					k := goKey(in, p.name, n)
					s, chunk, err := timeGo(in, p.fn, goN[k], c.budget)
					if err != nil {
						return fmt.Errorf("%s on %s: %w", p.name, in.name, err)
					}
					goS[k], goN[k] = append(goS[k], s), chunk
				}
			}
			runtime.GOMAXPROCS(procs[0])
			if j == nil {
				continue
			}
			r, err := j.measure(in.name, c.budget)
			if err != nil {
				return err
			}
			if !r.OK {
				jsNote[in.name] = r.Error
			}
			jsS[in.name] = append(jsS[in.name], sample{wall: r.NS, cpu: r.CPU})
		}
	}

	fmt.Fprintf(w, "median of %d rounds of %v per measurement, ns per envelope; ×: original / ours (goal ≥ 2.0)\n", c.rounds, c.budget)
	type kind struct {
		name  string
		procs int
		get   func(sample) float64
		wall  bool
	}
	var kinds []kind
	for _, n := range procs {
		kinds = append(kinds, kind{"HEADLINE: wall time per envelope (what a caller waits on; the goal is judged on it)", n, func(s sample) float64 { return s.wall }, true})
	}
	for _, n := range procs {
		name := "CPU time of the process per envelope (garbage collection included, and with GOMAXPROCS>1 Go's collector workers on an idle core)"
		if n == 1 {
			// docs/performance.md: at most ours' wall time on a quiet
			// machine, and node's is at least its CPU time.
			name = "CPU time of the process per envelope, the conservative estimate of quiet-machine wall time (judge on this when the shares of a core above are low)"
		}
		kinds = append(kinds, kind{name, n, func(s sample) float64 { return s.cpu }, false})
	}
	cpuOverWall := func(ss []sample) float64 {
		return medianOf(ss, func(s sample) float64 { return s.cpu }) / medianOf(ss, func(s sample) float64 { return s.wall })
	}
	for _, kind := range kinds {
		fmt.Fprintf(w, "\n%s, ours with GOMAXPROCS=%d%s:\n", kind.name, kind.procs, procsNote(kind.procs, procs))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		head := "input\tbytes\toriginal (node)\t"
		for _, p := range goParsers {
			head += p.name + "\t×\t"
		}
		fmt.Fprintln(tw, head)
		for _, in := range ins {
			jsm := medianOf(jsS[in.name], kind.get)
			row := fmt.Sprintf("%s\t%d\t", in.name, len(in.text))
			if j != nil {
				row += fmt.Sprintf("%.0f\t", jsm)
			} else {
				row += "-\t"
			}
			for _, p := range goParsers {
				g := medianOf(goS[goKey(in, p.name, kind.procs)], kind.get)
				row += fmt.Sprintf("%.0f\t", g)
				if j != nil {
					row += fmt.Sprintf("%.2f\t", jsm/g)
				} else {
					row += "-\t"
				}
			}
			fmt.Fprintln(tw, row)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if !kind.wall {
			continue
		}
		// Wall time measures the parser only when each side had a core to
		// itself: print how much of one each got while timed.
		lo, hi := 0.0, 0.0
		for i, in := range ins {
			for k, p := range goParsers {
				x := cpuOverWall(goS[goKey(in, p.name, kind.procs)])
				if i+k == 0 || x < lo {
					lo = x
				}
				hi = max(hi, x)
			}
		}
		fmt.Fprintf(w, "CPU / wall while timed (100%% = a core of its own; less: waiting for one, and wall time measures the scheduler): ours %.0f–%.0f%%", 100*lo, 100*hi)
		if j != nil {
			jlo, jhi := 0.0, 0.0
			for i, in := range ins {
				x := cpuOverWall(jsS[in.name])
				if i == 0 || x < jlo {
					jlo = x
				}
				jhi = max(jhi, x)
			}
			fmt.Fprintf(w, ", original %.0f–%.0f%%", 100*jlo, 100*jhi)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nours per envelope, GOMAXPROCS=%d: bytes / allocations; envelopes per garbage collection:\n", procs[0])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "input\t"
	for _, p := range goParsers {
		head += p.name + "\tper GC\t"
	}
	fmt.Fprintln(tw, head)
	for _, in := range ins {
		row := in.name + "\t"
		for _, p := range goParsers {
			ss := goS[goKey(in, p.name, procs[0])]
			row += fmt.Sprintf("%.0f B / %.1f\t%s\t", medianOf(ss, func(s sample) float64 { return s.bytes }),
				medianOf(ss, func(s sample) float64 { return s.allocs }), perGC(medianOf(ss, func(s sample) float64 { return s.gc })))
		}
		fmt.Fprintln(tw, row)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, in := range ins {
		if n := jsNote[in.name]; n != "" {
			fmt.Fprintf(w, "note: %s: the original parser: %s\n", in.name, n)
		}
	}
	return nil
}

// perGC formats envelopes per garbage collection from collections per
// envelope: "-" when there was none.
func perGC(gcPerEnvelope float64) string {
	if gcPerEnvelope == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", 1/gcPerEnvelope)
}

// procsSettings returns the GOMAXPROCS values ours is measured with: the
// process's own (all cores, unless GOMAXPROCS says otherwise), then 1.
// With spare cores, Go's runtime spends them on idle-priority garbage
// collection workers and on threads spinning for work each time the
// collector wakes a goroutine: process CPU time that a single-goroutine
// loop on an otherwise idle core charges to the parser, but that does not
// occur when the cores are busy (a relay under load) and that does not
// speed the parse. With one, every collection is still paid — by the
// parsing thread itself. node's CPU time is the same with and without
// --single-threaded (docs/performance.md), so it has no such share.
func procsSettings() []int {
	if all := runtime.GOMAXPROCS(0); all > 1 {
		return []int{all, 1}
	}
	return []int{1}
}

// procsNote explains a GOMAXPROCS setting in a table's title.
func procsNote(n int, procs []int) string {
	if len(procs) > 1 && n == 1 {
		return " (all its garbage collection on the parsing core, none on an idle one)"
	}
	return ""
}

// goKey names one series of our measurements.
func goKey(in input, parser string, procs int) string {
	return fmt.Sprintf("%s/%s/%d", in.name, parser, procs)
}
