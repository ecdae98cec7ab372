package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/jetstream"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/gateway/server"
	"github.com/crosstalk-go/crosstalk/internal/natstest"
	"github.com/crosstalk-go/crosstalk/signing"
)

// HistoryOptions configure History.
type HistoryOptions struct {
	// Sizes are the ledger sizes to build and read, in events, smallest
	// first; the ratios are against the first.
	Sizes []int
	// Ledgers are the backends to measure, "sqlite" and "jetstream" (a
	// one-node JetStream in the process); ["sqlite"] when empty.
	Ledgers []string
	// Runs is how many times each read is timed per size (p50 of them).
	Runs int
	// Progress receives a line per step; nil discards them.
	Progress io.Writer
}

// HistoryResult is the outcome of History (`crosstalk-bench history`).
type HistoryResult struct {
	Machine Machine       `json:"machine"`
	Sizes   []HistorySize `json:"sizes"`
}

// HistorySize is one ledger size's measurement on one backend.
type HistorySize struct {
	// Ledger is the backend: "sqlite" or "jetstream".
	Ledger string `json:"ledger"`
	Events int    `json:"events"`
	// ImportPerSec is `crosstalk ledger import`'s rate (ledger.Import of
	// JSON Lines), generation of the lines included.
	ImportPerSec float64 `json:"import_events_per_second"`
	// RebuildMs is how long the relay's first start took to build its
	// projections from the whole ledger (gateway.Relay.SyncProjection
	// with no projection file).
	RebuildMs float64 `json:"projection_rebuild_ms"`
	// CatchUpMs is how long a restart took to catch the projections up
	// from their checkpoint (the file the first start left) after
	// CatchUpEvents more appends: what every later start costs.
	CatchUpMs     float64       `json:"projection_catch_up_ms"`
	CatchUpEvents int           `json:"projection_catch_up_events"`
	Reads         []HistoryRead `json:"reads"`
	// RSSMB is the process's resident memory after every read, after
	// a GC, with the relays of every size of the backend (and for
	// JetStream their nats-servers) running in this process: an upper
	// bound of one relay's.
	RSSMB float64 `json:"rss_mb"`
}

// HistoryRead is one read's timing at one size.
type HistoryRead struct {
	Name  string  `json:"name"`
	P50ms float64 `json:"p50_ms"`
	Bytes int     `json:"bytes"`
	// Ratio is P50ms over the same read's at the first size of the same
	// ledger backend.
	Ratio float64 `json:"ratio,omitempty"`
}

// historyAgents are the actors of the generated ledger; none is in the
// relay's address book, as for a copy-paste assistant or a person.
var historyAgents = []string{"alice", "bob", "carol", "dave", "erin", "frank"}

// catchUpEvents is how many events History appends between the relay's
// first start and its restart from the projections' checkpoint.
const catchUpEvents = 1000

// History builds a ledger of each size and backend with a realistic mix
// (the group "big" holds half the events, seven others the rest;
// requests that must be answered, broadcasts, replies, acks and
// dispositions between six agents), imports it as `crosstalk ledger
// import` does, starts the relay on it (building its projections),
// appends catchUpEvents more, restarts it (catching the projections up
// from their checkpoint) and times the reads of issue 13 over HTTP: the
// web pages, the paged API reads and the agents list. See
// docs/performance.md ("History").
func History(ctx context.Context, o HistoryOptions) (*HistoryResult, error) {
	if len(o.Sizes) == 0 {
		return nil, errors.New("bench history: no sizes")
	}
	if len(o.Ledgers) == 0 {
		o.Ledgers = []string{"sqlite"}
	}
	if o.Runs < 1 {
		o.Runs = 15
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	tmp, err := os.MkdirTemp("", "crosstalk-bench-history-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	res := &HistoryResult{Machine: machine(tmp)}
	key, err := signing.GenerateKey(signing.Ed25519, benchKeyID)
	if err != nil {
		return nil, err
	}
	for _, kind := range o.Ledgers {
		if kind != "sqlite" && kind != "jetstream" {
			return nil, fmt.Errorf("bench history: unknown ledger %q, want sqlite or jetstream", kind)
		}
		// Every size's relay runs at once and the reads alternate
		// between them, run by run: on a shared machine, load that comes
		// and goes weighs on every size alike, and the ratios hold.
		var rigs []*historyRig
		closeAll := func() {
			for _, rg := range rigs {
				rg.close()
			}
		}
		for _, n := range o.Sizes {
			rg, err := prepareHistory(ctx, filepath.Join(tmp, kind+"-"+strconv.Itoa(n)), kind, n, key.Public(), progress)
			if err != nil {
				closeAll()
				return nil, err
			}
			rigs = append(rigs, rg)
		}
		fmt.Fprintf(progress, "bench history: %s: reading\n", kind)
		err := timeReads(ctx, rigs, o.Runs)
		runtime.GC()
		rss := rssMB()
		closeAll()
		if err != nil {
			return nil, err
		}
		for i, rg := range rigs {
			rg.size.RSSMB = rss
			if i > 0 {
				for j := range rg.size.Reads {
					if base := rigs[0].size.Reads[j].P50ms; base > 0 {
						rg.size.Reads[j].Ratio = rg.size.Reads[j].P50ms / base
					}
				}
			}
			res.Sizes = append(res.Sizes, rg.size)
		}
	}
	return res, nil
}

// historyRig is one size's ledger on one backend with its relay running.
type historyRig struct {
	size  HistorySize
	rr    *server.Server
	close func()
}

// prepareHistory builds a ledger of n events of the backend kind in dir,
// starts the relay on it (building the projections), appends
// catchUpEvents, and restarts it (catching them up from the checkpoint).
// close stops it and removes dir.
func prepareHistory(ctx context.Context, dir, kind string, n int, pub *signing.PublicKey, progress io.Writer) (_ *historyRig, err error) {
	rg := &historyRig{size: HistorySize{Ledger: kind, Events: n, CatchUpEvents: catchUpEvents}}
	var cleanup []func()
	rg.close = func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	defer func() {
		if err != nil {
			rg.close()
		}
	}()
	cleanup = append(cleanup, func() { os.RemoveAll(dir) })
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	natsURL := ""
	open := func() (ledger.Store, error) { return sqlite.Open(ctx, filepath.Join(dir, "ledger.db"), nil) }
	if kind == "jetstream" {
		nodes, err := natstest.Start(filepath.Join(dir, "nats"), 1, false)
		if err != nil {
			return nil, err
		}
		cleanup = append(cleanup, func() { natstest.StopAll(nodes) })
		natsURL = nodes[0].URL
		open = func() (ledger.Store, error) { return jetstream.Open(ctx, natsURL, nil) }
	}
	size := &rg.size
	fmt.Fprintf(progress, "bench history: %s: importing %d events\n", kind, n)
	if size.ImportPerSec, err = importHistory(ctx, open, n); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "bench history: %s: %.0f events/s imported; building the projections\n", kind, size.ImportPerSec)
	relayDir := filepath.Join(dir, "relay")
	rr, ms, err := startSynced(ctx, relayDir, pub, natsURL)
	if err != nil {
		return nil, err
	}
	size.RebuildMs = ms
	if err := shutdown(rr); err != nil {
		return nil, err
	}
	if err := appendTail(ctx, open, catchUpEvents); err != nil {
		return nil, err
	}
	if rg.rr, size.CatchUpMs, err = startSynced(ctx, relayDir, pub, natsURL); err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { shutdown(rg.rr) })
	fmt.Fprintf(progress, "bench history: %s: projections built in %.0f ms, caught up in %.0f ms\n", kind, size.RebuildMs, size.CatchUpMs)
	return rg, nil
}

// startSynced starts the relay on the ledger (SQLite in dataDir, or
// JetStream at natsURL) and returns it once its projections are caught
// up, with how long that took in ms.
func startSynced(ctx context.Context, dataDir string, pub *signing.PublicKey, natsURL string) (*server.Server, float64, error) {
	start := time.Now()
	spec, replicas := natsURL, 1
	if natsURL == "" {
		// A SQLite file is a ledger spec too; its projections go beside it.
		spec, replicas = filepath.Join(filepath.Dir(dataDir), "ledger.db"), 0
	}
	rr, err := startRelay(ctx, dataDir, pub, spec, replicas)
	if err != nil {
		return nil, 0, err
	}
	if err := rr.Relay().SyncProjection(ctx); err != nil {
		shutdown(rr)
		return nil, 0, err
	}
	return rr, float64(time.Since(start).Microseconds()) / 1000, nil
}

// appendTail appends n requests to bob in the group big.
func appendTail(ctx context.Context, open func() (ledger.Store, error), n int) error {
	st, err := open()
	if err != nil {
		return err
	}
	recs := make([]ledger.Record, n)
	for i := range recs {
		env := envelope.New("ALICE", "BOB", envelope.IntentRequest, fmt.Sprintf("tail event %d", i))
		env.Context = "big"
		d := gateway.EventData{Text: env.Body, Priority: "normal", To: []string{"bob"},
			X: &gateway.XCrosstalk{Envelope: env, Transport: "http", Sender: "alice", Verification: gateway.StatusUnsigned}}
		b, err := json.Marshal(d)
		if err != nil {
			return err
		}
		recs[i] = ledger.Record{Kind: gateway.KindMessage, GroupID: "big", By: "alice", Data: b, DedupeKey: "msg:" + env.Message}
	}
	for len(recs) > 0 && err == nil {
		k := min(len(recs), 100) // within every backend's batch bound
		_, err = st.Append(ctx, recs[:k])
		recs = recs[k:]
	}
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	return err
}

// importHistory writes n generated events as JSON Lines through a pipe
// into ledger.Import on a new ledger from open, and returns the events
// per second.
func importHistory(ctx context.Context, open func() (ledger.Store, error), n int) (float64, error) {
	st, err := open()
	if err != nil {
		return 0, err
	}
	pr, pw := io.Pipe()
	go func() {
		bw := bufio.NewWriterSize(pw, 1<<20)
		err := generateHistory(bw, n)
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
	}()
	start := time.Now()
	got, err := ledger.Import(ctx, st, pr)
	d := time.Since(start)
	pr.Close()
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("bench history: import: %w", err)
	}
	if got != n {
		return 0, fmt.Errorf("bench history: imported %d events, want %d", got, n)
	}
	return float64(n) / d.Seconds(), nil
}

// generateHistory writes n events as `crosstalk ledger export` would.
func generateHistory(w io.Writer, n int) error {
	groups := []string{"big", "g1", "g2", "g3", "g4", "g5", "g6", "g7"}
	seqs := map[string]int64{}
	type msg struct{ eventID, messageID, thread, from, to string }
	last := map[string][]msg{} // per group, a ring of recent messages
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	enc := json.NewEncoder(w)
	for i := range n {
		g := "big"
		if i%2 == 1 {
			g = groups[1+(i/2)%7]
		}
		seqs[g]++
		from := historyAgents[i%len(historyAgents)]
		to := historyAgents[(i/len(historyAgents)+1+i)%len(historyAgents)]
		if to == from {
			to = historyAgents[(i+1)%len(historyAgents)]
		}
		ev := ledger.Event{V: ledger.Version, ID: envelope.NewID(), TS: t0.Add(time.Duration(i) * time.Millisecond).Format(ledger.TimeLayout),
			Seq: seqs[g], GroupID: g, By: from}
		recent := last[g]
		var d gateway.EventData
		switch k := i % 20; {
		case k < 14 || len(recent) == 0: // a message: request, broadcast or reply
			intent, toName := envelope.IntentRequest, strings.ToUpper(to)
			switch {
			case k >= 10 && k < 12:
				intent, toName = envelope.IntentBroadcast, "*"
			case k >= 12 && len(recent) > 0:
				intent = envelope.IntentRespond
			}
			env := envelope.New(strings.ToUpper(from), toName, intent, fmt.Sprintf("history event %d: please look at the rollout of service %d before the window closes", i, i%97))
			env.Context = g
			if intent == envelope.IntentRespond {
				p := recent[i%len(recent)]
				env.Thread, env.Parent, env.To = p.thread, p.messageID, strings.ToUpper(p.from)
				to = p.from
			}
			ev.Kind = gateway.KindMessage
			d = gateway.EventData{Text: env.Body, Priority: "normal", X: &gateway.XCrosstalk{Envelope: env, Transport: "http", Sender: from, Verification: gateway.StatusUnsigned}}
			if toName != "*" {
				d.To = []string{to}
			}
			ev.DedupeKey = "msg:" + env.Message
			recent = append(recent, msg{ev.ID, env.Message, env.Thread, from, to})
			if len(recent) > 64 {
				recent = recent[1:]
			}
			last[g] = recent
		case k < 18: // the recipient acks a recent message
			p := recent[i%len(recent)]
			ev.Kind, ev.By = gateway.KindAck, p.to
			d = gateway.EventData{ActorID: p.to, EventID: p.eventID}
		default: // the recipient resolves one
			p := recent[i%len(recent)]
			ev.Kind, ev.By = gateway.KindDisposition, p.to
			d = gateway.EventData{ActorID: p.to, EventID: p.eventID, Disposition: "resolved"}
		}
		b, err := json.Marshal(d)
		if err != nil {
			return err
		}
		ev.Data = b
		if err := enc.Encode(struct {
			ledger.Event
			DedupeKey string `json:"x_dedupe_key,omitempty"`
		}{ev, ev.DedupeKey}); err != nil {
			return err
		}
	}
	return nil
}

// timeReads times each read on every rig's relay, alternating between
// the rigs run by run, and sets their Reads.
func timeReads(ctx context.Context, rigs []*historyRig, runs int) error {
	hc := &http.Client{Timeout: 5 * time.Minute}
	get := func(base, path string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return nil, err
		}
		res, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err == nil && res.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET %s: %s: %.200s", path, res.Status, b)
		}
		return b, err
	}
	type read struct{ name, path string }
	reads := make([][]read, len(rigs))
	for k, rg := range rigs {
		// A thread and a middle page to read: from the group's last event.
		var page struct {
			Events []ledger.Event `json:"events"`
		}
		b, err := get(rg.rr.URL(), "/v1/groups/big/events?before_seq=0&limit=1&kinds=chat.message")
		if err == nil {
			err = json.Unmarshal(b, &page)
		}
		if err != nil || len(page.Events) == 0 {
			return fmt.Errorf("bench history: the last event of big: %v", err)
		}
		thread := ""
		if d, err := gateway.ParseData(page.Events[0]); err == nil && d.X != nil && d.X.Envelope != nil {
			thread = d.X.Envelope.Thread
		}
		mid := page.Events[0].Seq / 2
		reads[k] = []read{
			{"web /", "/"},
			{"web /ui/groups/big", "/ui/groups/big"},
			{"web /ui/groups/big?before=mid", "/ui/groups/big?before=" + strconv.FormatInt(mid, 10)},
			{"web thread (last of big)", "/ui/groups/big/threads/" + thread},
			{"web /ui/agents", "/ui/agents"},
			{"web /ui/agents/bob", "/ui/agents/bob"},
			{"api events before_seq limit 100", "/v1/groups/big/events?before_seq=0&limit=100"},
			{"api events since_seq=mid limit 100", "/v1/groups/big/events?limit=100&since_seq=" + strconv.FormatInt(mid, 10)},
			{"api deliveries bob before_pos limit 100", "/v1/agents/bob/deliveries?before_pos=0&limit=100"},
			{"api agents", "/v1/agents"},
		}
	}
	for j := range reads[0] {
		lats := make([][]time.Duration, len(rigs))
		sizes := make([]int, len(rigs))
		for i := 0; i <= runs; i++ { // the first is a warm-up
			for k, rg := range rigs {
				start := time.Now()
				b, err := get(rg.rr.URL(), reads[k][j].path)
				if err != nil {
					return err
				}
				if i > 0 {
					lats[k] = append(lats[k], time.Since(start))
				}
				sizes[k] = max(sizes[k], len(b))
			}
		}
		for k, rg := range rigs {
			sort.Slice(lats[k], func(a, b int) bool { return lats[k][a] < lats[k][b] })
			rg.size.Reads = append(rg.size.Reads, HistoryRead{Name: reads[k][j].name, P50ms: percentile(lats[k], 0.5), Bytes: sizes[k]})
		}
	}
	return nil
}

// rssMB is the process's resident set size in MB (Linux), 0 elsewhere.
func rssMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}

// Print writes the result as a table: a column group per backend and
// size.
func (r *HistoryResult) Print(w io.Writer) {
	fmt.Fprintf(w, "machine: %s, %d CPUs (GOMAXPROCS %d), %s %s\n\n", r.Machine.CPU, r.Machine.NumCPU, r.Machine.GOMAXPROCS, r.Machine.Go, r.Machine.OS)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "read")
	for _, s := range r.Sizes {
		fmt.Fprintf(tw, "\t%s %d events: p50 ms\tbytes\tratio", s.Ledger, s.Events)
	}
	fmt.Fprintln(tw)
	if len(r.Sizes) > 0 {
		for j, rd := range r.Sizes[0].Reads {
			fmt.Fprint(tw, rd.Name)
			for _, s := range r.Sizes {
				x := s.Reads[j]
				ratio := "-"
				if x.Ratio > 0 {
					ratio = fmt.Sprintf("%.2f", x.Ratio)
				}
				fmt.Fprintf(tw, "\t%.2f\t%d\t%s", x.P50ms, x.Bytes, ratio)
			}
			fmt.Fprintln(tw)
		}
	}
	row := func(name string, v func(HistorySize) float64) {
		fmt.Fprint(tw, name)
		for _, s := range r.Sizes {
			fmt.Fprintf(tw, "\t%.0f\t\t", v(s))
		}
		fmt.Fprintln(tw)
	}
	row("ledger import, events/s", func(s HistorySize) float64 { return s.ImportPerSec })
	row("projections: first build, ms", func(s HistorySize) float64 { return s.RebuildMs })
	row(fmt.Sprintf("projections: catch-up of %d events from the checkpoint, ms", catchUpEvents), func(s HistorySize) float64 { return s.CatchUpMs })
	row("process RSS after the reads, MB", func(s HistorySize) float64 { return s.RSSMB })
	tw.Flush()
}
