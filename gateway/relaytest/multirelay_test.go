package relaytest

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
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// The multi-relay test's load (issue 7 item 3): multiClients goroutines
// spread over multiRelays relays post distinct envelopes into multiGroups
// groups; every multiDoubleEvery-th envelope of a client goes to two
// relays at once. One relay is killed and one NATS node shut down after
// multiAcksBeforeKill acknowledgements; the load goes on for
// multiAcksAfterKill more.
const (
	multiRelays         = 3
	multiClients        = 9
	multiGroups         = 3
	multiDoubleEvery    = 4
	multiAcksBeforeKill = 120
	multiAcksAfterKill  = 120
	multiClaimRounds    = 4 // strict rounds on the survivors after the load
	multiKilled         = 1 // the relay that is killed
	multiStream         = "CROSSTALK"
	claimsGroup         = "claims"
)

// multiGroup is the name of load group i.
func multiGroup(i int) string { return fmt.Sprintf("multi-%d", i) }

// TestMultiRelay runs three `crosstalk relay` processes on one R3
// JetStream ledger held by a 3-node NATS cluster embedded in the test.
// Clients spread over the relays post distinct envelopes (some to two
// relays at once), SSE followers on every relay follow every group, and
// pairs of agents race for claims on role events through different
// relays. Mid-load, one relay gets SIGKILL and the stream leader's NATS
// node is shut down. Then: every envelope that got a 200 is in the ledger
// exactly once, as the event its 200 named; the envelopes that got no
// answer, sent again to a surviving relay, are too; seq is dense in every
// group; every follower saw every event of its group in order, with no
// gap and no duplicate (a follower whose relay died resumes on another
// with Last-Event-ID, as an EventSource does); every claim race had
// exactly one winner (200) and one loser (409).
func TestMultiRelay(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("runs a 3-node NATS cluster and three relay processes")
	}
	bin := crosstalkBinary(t)
	nodes := startNATSCluster(t)
	dir := t.TempDir()

	var relays []*child
	var urls []string
	for i := range multiRelays {
		// Each relay lists all three servers, its "own" first.
		var nats []string
		for j := range nodes {
			nats = append(nats, nodes[(i+j)%len(nodes)].URL)
		}
		rdir := filepath.Join(dir, fmt.Sprintf("relay%d", i))
		if err := os.MkdirAll(rdir, 0o700); err != nil {
			t.Fatal(err)
		}
		config := filepath.Join(rdir, "relay.toml")
		if err := os.WriteFile(config, []byte(multiConfig(rdir, strings.Join(nats, ","))), 0o600); err != nil {
			t.Fatal(err)
		}
		c := startChild(t, bin, config, filepath.Join(rdir, "data"))
		relays = append(relays, c)
		urls = append(urls, c.url)
	}
	leader := streamLeader(t, nodes, multiStream)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := newMultiLoad(urls)

	// Followers: one per relay and load group.
	fctx, stopFollowers := context.WithCancel(ctx)
	defer stopFollowers()
	var followers []*follower
	var fwg sync.WaitGroup
	fclient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: multiGroups * 2}}
	defer fclient.CloseIdleConnections()
	for r := range multiRelays {
		for g := range multiGroups {
			f := &follower{relay: r, group: multiGroup(g)}
			for j := range multiRelays {
				f.urls = append(f.urls, urls[(r+j)%multiRelays])
			}
			followers = append(followers, f)
			fwg.Go(func() { f.run(fctx, fclient) })
		}
	}

	// Load and claim races.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range multiClients {
		wg.Go(func() { l.run(ctx, stop, w) })
	}
	var (
		claimMu   sync.Mutex
		claimRuns []claimRun
	)
	wg.Go(func() {
		for round := 0; round < 1000; round++ {
			select {
			case <-stop:
				return
			default:
			}
			a, b := round%multiRelays, (round+1)%multiRelays
			run := l.claimRace(ctx, fmt.Sprintf("load round %d", round), a, b)
			claimMu.Lock()
			claimRuns = append(claimRuns, run)
			claimMu.Unlock()
		}
	})
	stopLoad := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	defer stopLoad()

	waitAcks := func(n int64, what string) {
		t.Helper()
		target := l.acks.Load() + n
		// A bound against a hang, not a timing requirement.
		for try := 0; l.acks.Load() < target; try++ {
			if try == 1200 {
				stopLoad()
				t.Fatalf("%s: %d of %d acknowledgements after 120 s; logs:\n%s", what, l.acks.Load()-target+n, n, relayLogs(relays))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitAcks(multiAcksBeforeKill, "before the kill")
	relays[multiKilled].kill()
	nodes[leader].Stop()
	t.Logf("killed relay %d (SIGKILL) and shut down NATS node %s, the stream leader, after %d acknowledgements",
		multiKilled, nodes[leader].Server.Name(), l.acks.Load())
	if err := relays[multiKilled].wait(t); err == nil {
		t.Fatalf("relay %d exited cleanly after SIGKILL", multiKilled)
	}
	waitAcks(multiAcksAfterKill, "after the kill")
	stopLoad()

	var survivors []int
	for i := range multiRelays {
		if i != multiKilled {
			survivors = append(survivors, i)
		}
	}
	// Whatever got no 200 under load goes to a surviving relay again.
	if left := l.retryPending(ctx, survivors); len(left) > 0 {
		t.Fatalf("%d envelopes got no 200 from the surviving relays in 40 tries each (%s …); logs:\n%s", len(left), left[0], relayLogs(relays))
	}
	// Claim races once more, now that the dust has settled, through the
	// two survivors.
	for round := range multiClaimRounds {
		claimRuns = append(claimRuns, l.claimRace(ctx, fmt.Sprintf("final round %d", round), survivors[round%2], survivors[(round+1)%2]))
	}

	// The ledger, as each survivor shows it.
	var views []map[string][]ledger.Event
	for _, r := range survivors {
		views = append(views, readGroups(t, l.client, urls[r]))
	}
	for g, evs := range views[0] {
		if other := views[1][g]; !sameEvents(evs, other) {
			t.Errorf("group %s: relay %d shows %d events, relay %d shows %d (or other ones), want the same", g, survivors[0], len(evs), survivors[1], len(other))
		}
	}
	if len(views[0]) != len(views[1]) {
		t.Errorf("relay %d shows %d groups, relay %d shows %d, want the same", survivors[0], len(views[0]), survivors[1], len(views[1]))
	}
	view := views[0]
	l.check(t, view)
	checkClaims(t, view, claimRuns)

	// Every follower catches up with its group, then must have seen it
	// all, in order, once.
	for try := 0; ; try++ {
		behind := 0
		for _, f := range followers {
			if f.last() < int64(len(view[f.group])) {
				behind++
			}
		}
		if behind == 0 {
			break
		}
		if try == 600 { // a bound against a hang
			t.Errorf("%d of %d SSE followers still behind after 60 s", behind, len(followers))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopFollowers()
	fwg.Wait()
	reconnects, moved := 0, 0
	for _, f := range followers {
		f.check(t, view[f.group])
		if f.relay != multiKilled {
			reconnects += f.reconnects
		} else if f.moves > 0 {
			moved++
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("%d envelopes sent (%d to two relays at once), %d answers with 200; %d answered only after a failed try, of which %d were already committed; %d claim races; %d follower reconnects on surviving relays; %d of %d followers of the killed relay resumed on another",
		len(l.sent), l.doubled, l.answered, l.retried, l.committedBefore, len(claimRuns), reconnects, moved, multiGroups)
	if t.Failed() {
		t.Logf("relay logs:\n%s", relayLogs(relays))
	}
}

// multiConfig is the config of one relay of the multi-relay test.
func multiConfig(dir, natsURLs string) string {
	return fmt.Sprintf(`rate_limit = 1000000.0
rate_burst = 1000000
log_level = "info"
trust_file = %q
ledger = %q
ledger_replicas = 3

[[agents]]
id = "claude"
names = ["CLAUDE"]
roles = ["reviewer"]

[[agents]]
id = "chatgpt"
names = ["CHATGPT"]
roles = ["reviewer"]

[[agents]]
id = "gemini"
names = ["GEMINI"]
`, filepath.Join(dir, "known_keys"), natsURLs)
}

// relayLogs returns the log tails of the relays, for failure messages.
func relayLogs(relays []*child) string {
	var b strings.Builder
	for i, c := range relays {
		fmt.Fprintf(&b, "--- relay %d (%s)\n%s\n", i, c.url, c.logs)
	}
	return b.String()
}

// multiLoad posts envelopes to several relays and remembers every answer.
type multiLoad struct {
	client *http.Client
	urls   []string
	acks   atomic.Int64 // envelopes with at least one 200

	mu              sync.Mutex
	sent            map[string]string       // message id → text, every envelope sent
	answers         map[string][]api.Result // message id → every 200 answer
	pending         map[string]string       // message id → text, without a 200 yet
	answered        int                     // 200 answers in all
	doubled         int                     // envelopes posted to two relays at once
	retried         int                     // envelopes answered only after a failed try
	committedBefore int                     // of those, answered as a duplicate
}

func newMultiLoad(urls []string) *multiLoad {
	return &multiLoad{
		client: &http.Client{
			Timeout:   30 * time.Second,
			Transport: &http.Transport{MaxIdleConnsPerHost: multiClients * 2},
		},
		urls:    urls,
		sent:    map[string]string{},
		answers: map[string][]api.Result{},
		pending: map[string]string{},
	}
}

// postTo posts one envelope to relay r and returns its result on a 200.
func (l *multiLoad) postTo(ctx context.Context, r int, text string) (api.Result, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.urls[r]+"/crosstalk/receive", strings.NewReader(text))
	if err != nil {
		return api.Result{}, err
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	req.Header.Set("Accept", "application/json")
	res, err := l.client.Do(req)
	if err != nil {
		return api.Result{}, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return api.Result{}, err
	}
	if res.StatusCode != http.StatusOK {
		return api.Result{}, fmt.Errorf("relay %d: %d %s", r, res.StatusCode, body)
	}
	var out struct{ Results []api.Result }
	if err := json.Unmarshal(body, &out); err != nil || len(out.Results) != 1 {
		return api.Result{}, fmt.Errorf("relay %d: 200 without one result: %s", r, body)
	}
	return out.Results[0], nil
}

// record notes a 200 answer for message m.
func (l *multiLoad) record(m string, res api.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.answers[m]) == 0 {
		l.acks.Add(1)
	}
	l.answers[m] = append(l.answers[m], res)
	l.answered++
	delete(l.pending, m)
}

// deliver posts text until a 200, at most 40 times, starting with relay
// first and moving to the next relay after every failure, as a client
// with a list of relays would. It returns the relay that answered, or -1.
func (l *multiLoad) deliver(ctx context.Context, relays []int, first int, m, text string) (api.Result, int) {
	for try := range 40 {
		r := relays[(first+try)%len(relays)]
		res, err := l.postTo(ctx, r, text)
		if err == nil {
			l.record(m, res)
			return res, r
		}
		if ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(min(try+1, 10)) * 30 * time.Millisecond)
	}
	return api.Result{}, -1
}

// run is one client: distinct envelopes to its relay until stop, moving
// to another relay when its relay fails. Every multiDoubleEvery-th
// envelope also goes to the next relay at the same time.
func (l *multiLoad) run(ctx context.Context, stop <-chan struct{}, w int) {
	all := []int{0, 1, 2}
	home := w % multiRelays
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		e := envelope.New("CHATGPT", "CLAUDE", envelope.IntentRequest, fmt.Sprintf("multi-relay client %d, envelope %d", w, i))
		e.Context = multiGroup((w + i) % multiGroups)
		b, err := envelope.Marshal(e)
		if err != nil {
			panic(err)
		}
		text, m := string(b), e.Message
		l.mu.Lock()
		l.sent[m] = text
		l.pending[m] = text
		double := i%multiDoubleEvery == multiDoubleEvery-1
		if double {
			l.doubled++
		}
		l.mu.Unlock()

		targets := []int{home}
		if double {
			targets = append(targets, (home+1)%multiRelays)
		}
		var (
			twg sync.WaitGroup
			oks atomic.Int32
		)
		for _, r := range targets {
			twg.Go(func() {
				if res, err := l.postTo(ctx, r, text); err == nil {
					l.record(m, res)
					oks.Add(1)
				}
			})
		}
		twg.Wait()
		if oks.Load() > 0 {
			continue
		}
		// No 200: this client's relay is in trouble. Try the others.
		res, r := l.deliver(ctx, all, home+1, m, text)
		if r < 0 {
			continue // pending; sent again after the load
		}
		home = r
		l.mu.Lock()
		l.retried++
		if res.Duplicate {
			l.committedBefore++
		}
		l.mu.Unlock()
	}
}

// retryPending sends every envelope still without a 200 to the relays
// given, and returns the message ids that still got none.
func (l *multiLoad) retryPending(ctx context.Context, relays []int) []string {
	l.mu.Lock()
	var ms []string
	for m := range l.pending {
		ms = append(ms, m)
	}
	texts := make(map[string]string, len(ms))
	for _, m := range ms {
		texts[m] = l.pending[m]
	}
	l.mu.Unlock()
	sort.Strings(ms)
	var left []string
	for i, m := range ms {
		res, r := l.deliver(ctx, relays, i, m, texts[m])
		if r < 0 {
			left = append(left, m)
			continue
		}
		l.mu.Lock()
		l.retried++
		if res.Duplicate {
			l.committedBefore++
		}
		l.mu.Unlock()
	}
	return left
}

// check requires every envelope sent to be in the load groups exactly
// once, as the event every one of its 200 answers named, with at most one
// answer saying it was new.
func (l *multiLoad) check(t *testing.T, view map[string][]ledger.Event) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	byMessage := map[string][]ledger.Event{}
	for g := range multiGroups {
		for _, ev := range view[multiGroup(g)] {
			d, err := gateway.ParseData(ev)
			if err != nil || d.X == nil || d.X.Envelope == nil {
				t.Errorf("group %s seq %d: %s without an envelope (%v)", ev.GroupID, ev.Seq, ev.Kind, err)
				continue
			}
			byMessage[d.X.Envelope.Message] = append(byMessage[d.X.Envelope.Message], ev)
		}
	}
	for m, evs := range byMessage {
		if _, ok := l.sent[m]; !ok {
			t.Errorf("message %s is in the ledger but was never sent", m)
		}
		if len(evs) != 1 {
			t.Errorf("message %s recorded %d times (seqs %v), want once", m, len(evs), seqs(evs))
		}
	}
	missing := 0
	for m := range l.sent {
		evs := byMessage[m]
		if len(evs) == 0 {
			missing++
			continue
		}
		ev, fresh := evs[0], 0
		for _, res := range l.answers[m] {
			if res.EventID != ev.ID || res.GroupID != ev.GroupID || res.Seq != ev.Seq {
				t.Errorf("message %s is event %s %s/%d, but a 200 said %s %s/%d", m, ev.ID, ev.GroupID, ev.Seq, res.EventID, res.GroupID, res.Seq)
			}
			if !res.Duplicate {
				fresh++
			}
		}
		if fresh > 1 {
			t.Errorf("message %s: %d answers said new (duplicate=false), want at most one", m, fresh)
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d envelopes sent (all of them answered 200 in the end) are missing from the ledger", missing, len(l.sent))
	}
}

func seqs(evs []ledger.Event) []int64 {
	var out []int64
	for _, ev := range evs {
		out = append(out, ev.Seq)
	}
	return out
}

func sameEvents(a, b []ledger.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Seq != b[i].Seq {
			return false
		}
	}
	return true
}

// readGroups reads every group's events over a relay's API, page by page,
// and requires seq dense from 1 up to the group's last_seq.
func readGroups(t *testing.T, client *http.Client, url string) map[string][]ledger.Event {
	t.Helper()
	get := func(path string, v any) {
		t.Helper()
		res, err := client.Get(url + path)
		if err != nil {
			t.Fatalf("GET %s%s = %v", url, path, err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s%s = %d %s, want 200", url, path, res.StatusCode, body)
		}
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s%s: %v", url, path, err)
		}
	}
	var groups struct{ Groups []ledger.Group }
	get("/v1/groups", &groups)
	out := map[string][]ledger.Event{}
	for _, g := range groups.Groups {
		var since int64
		for page := 0; ; page++ {
			if page > 1000 {
				t.Fatalf("group %s: more than 1000 pages", g.ID)
			}
			var p struct{ Events []ledger.Event }
			get(fmt.Sprintf("/v1/groups/%s/events?since_seq=%d&limit=500", g.ID, since), &p)
			if len(p.Events) == 0 {
				break
			}
			for _, ev := range p.Events {
				if ev.Seq != since+1 {
					t.Fatalf("%s: group %s: seq %d after %d, want %d (seq must be dense)", url, g.ID, ev.Seq, since, since+1)
				}
				since = ev.Seq
				out[g.ID] = append(out[g.ID], ev)
			}
		}
		if since != g.LastSeq {
			t.Errorf("%s: group %s: last event seq %d, want last_seq %d", url, g.ID, since, g.LastSeq)
		}
	}
	return out
}

// follower is an SSE client of GET /v1/groups/{group}/stream. When its
// stream ends it reconnects with Last-Event-ID, as an EventSource does;
// when its relay refuses the connection it moves to the next relay.
type follower struct {
	relay int      // the relay it starts on
	group string   // the group it follows
	urls  []string // relays, its own first

	mu         sync.Mutex
	events     []ledger.Event
	problems   []string // gaps, duplicates, bad events
	errs       []string // SSE error events
	reconnects int
	moves      int
}

func (f *follower) last() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.events) == 0 {
		return 0
	}
	return f.events[len(f.events)-1].Seq
}

// run follows until ctx ends (at most 400 connections).
func (f *follower) run(ctx context.Context, client *http.Client) {
	cur := 0
	for conn := 0; conn < 400 && ctx.Err() == nil; conn++ {
		connected, err := f.stream(ctx, client, f.urls[cur])
		if ctx.Err() != nil {
			return
		}
		f.mu.Lock()
		f.reconnects++
		if !connected {
			cur = (cur + 1) % len(f.urls)
			f.moves++
		} else if err != nil && !errors.Is(err, io.EOF) {
			f.errs = append(f.errs, err.Error())
		}
		f.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stream reads one SSE connection to the end. connected reports whether
// the relay answered 200.
func (f *follower) stream(ctx context.Context, client *http.Client, url string) (connected bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/groups/"+f.group+"/stream", nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if last := f.last(); last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
	}
	res, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return false, fmt.Errorf("%d", res.StatusCode)
	}
	br := bufio.NewReader(res.Body)
	var id, name, data string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return true, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if name != "" || data != "" {
				f.dispatch(id, name, data)
			}
			id, name, data = "", "", ""
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			id = line[len("id: "):]
		case strings.HasPrefix(line, "event: "):
			name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			data += line[len("data: "):]
		}
	}
}

// dispatch takes one SSE event.
func (f *follower) dispatch(id, name, data string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name == "error" {
		f.errs = append(f.errs, "SSE error event: "+data)
		return
	}
	var ev ledger.Event
	if err := json.Unmarshal([]byte(data), &ev); err != nil || name != "event" {
		f.problems = append(f.problems, fmt.Sprintf("event %q id %q: %v %q", name, id, err, data))
		return
	}
	want := int64(1)
	if n := len(f.events); n > 0 {
		want = f.events[n-1].Seq + 1
	}
	if ev.Seq != want || id != strconv.FormatInt(ev.Seq, 10) || ev.GroupID != f.group {
		if len(f.problems) < 10 {
			f.problems = append(f.problems, fmt.Sprintf("got %s seq %d (SSE id %s), want seq %d", ev.GroupID, ev.Seq, id, want))
		}
		if ev.Seq < want {
			return // a duplicate: keep the order checkable
		}
	}
	f.events = append(f.events, ev)
}

// check requires the follower to have seen exactly want, in order.
func (f *follower) check(t *testing.T, want []ledger.Event) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	who := fmt.Sprintf("SSE follower of %s starting on relay %d", f.group, f.relay)
	for _, p := range f.problems {
		t.Errorf("%s: %s", who, p)
	}
	if !sameEvents(f.events, want) {
		t.Errorf("%s saw %d events (last seq %d), want the ledger's %d in order", who, len(f.events), lastSeq(f.events), len(want))
	}
	if f.relay != multiKilled && len(f.errs) > 0 {
		t.Logf("%s: its stream ended %d times: %s", who, len(f.errs), strings.Join(f.errs, "; "))
	}
}

func lastSeq(evs []ledger.Event) int64 {
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}

// claimRun is the outcome of one claim race.
type claimRun struct {
	name    string
	event   string // the role event
	status  map[string]int
	bodies  map[string]string
	problem string // set when the race could not run
}

// claimRace posts a REQUEST to @reviewer and has claude (through relay a)
// and chatgpt (through relay b) claim it at the same moment.
func (l *multiLoad) claimRace(ctx context.Context, name string, a, b int) claimRun {
	run := claimRun{name: name, status: map[string]int{}, bodies: map[string]string{}}
	e := envelope.New("GEMINI", "@reviewer", envelope.IntentRequest, "who takes "+name+"?")
	e.Context = claimsGroup
	text, err := envelope.Marshal(e)
	if err != nil {
		panic(err)
	}
	l.mu.Lock()
	l.pending[e.Message] = string(text)
	l.mu.Unlock()
	res, r := l.deliver(ctx, []int{0, 1, 2}, a, e.Message, string(text))
	if r < 0 {
		run.problem = "the role request got no 200"
		return run
	}
	run.event = res.EventID
	start := make(chan struct{})
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for agent, relay := range map[string]int{"claude": a, "chatgpt": b} {
		wg.Go(func() {
			<-start
			status, body := l.claim(ctx, relay, agent, res.GroupID, res.EventID)
			mu.Lock()
			run.status[agent], run.bodies[agent] = status, body
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return run
}

// claim claims event id for agent through relay r. A failure that leaves
// the outcome unknown (no answer, 5xx) is retried, on the next relay, as a
// client would; claiming again what one holds renews it.
func (l *multiLoad) claim(ctx context.Context, r int, agent, group, id string) (int, string) {
	var (
		status int
		body   string
	)
	for try := range 20 {
		relay := (r + try) % multiRelays
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/v1/groups/%s/events/%s/claim", l.urls[relay], group, id), nil)
		if err != nil {
			return 0, err.Error()
		}
		req.Header.Set("X-Crosstalk-Agent", agent)
		res, err := l.client.Do(req)
		if err == nil {
			b, rerr := io.ReadAll(res.Body)
			res.Body.Close()
			status, body = res.StatusCode, string(b)
			if rerr == nil && status < 500 {
				return status, body
			}
		} else {
			status, body = 0, err.Error()
		}
		time.Sleep(time.Duration(min(try+1, 10)) * 30 * time.Millisecond)
	}
	return status, body
}

// checkClaims requires every claim race to have one winner (200) and one
// loser (409 naming the winner), and the ledger's claims group to hold
// each role request once and a claim event by each winner.
func checkClaims(t *testing.T, view map[string][]ledger.Event, runs []claimRun) {
	t.Helper()
	claimedBy := map[string]map[string]bool{} // role event → actors with a claim event
	requests := map[string]int{}
	for _, ev := range view[claimsGroup] {
		d, err := gateway.ParseData(ev)
		if err != nil {
			t.Errorf("claims seq %d: %v", ev.Seq, err)
			continue
		}
		switch ev.Kind {
		case gateway.KindClaim:
			if claimedBy[d.EventID] == nil {
				claimedBy[d.EventID] = map[string]bool{}
			}
			claimedBy[d.EventID][ev.By] = true
		case gateway.KindMessage:
			requests[ev.ID]++
		}
	}
	for _, run := range runs {
		if run.problem != "" {
			t.Errorf("claim race %s: %s", run.name, run.problem)
			continue
		}
		if requests[run.event] != 1 {
			t.Errorf("claim race %s: role event %s is in the ledger %d times, want once", run.name, run.event, requests[run.event])
		}
		var winners, losers []string
		for agent, status := range run.status {
			switch status {
			case http.StatusOK:
				winners = append(winners, agent)
			case http.StatusConflict:
				losers = append(losers, agent)
			default:
				t.Errorf("claim race %s: claim by %s = %d %s, want 200 or 409", run.name, agent, status, run.bodies[agent])
			}
		}
		if len(winners) != 1 || len(losers) != 1 {
			t.Errorf("claim race %s on %s: winners %v, losers %v, want one of each", run.name, run.event, winners, losers)
			continue
		}
		if !strings.Contains(run.bodies[losers[0]], "claimed by "+winners[0]) {
			t.Errorf("claim race %s: the loser's 409 = %s, want it to name the winner %s", run.name, run.bodies[losers[0]], winners[0])
		}
		if by := claimedBy[run.event]; !by[winners[0]] || by[losers[0]] {
			t.Errorf("claim race %s: claim events by %v, want by the winner %s only", run.name, by, winners[0])
		}
	}
}
