package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/jetstream"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
)

// resumeStores are the ledger backends the resume tests run on.
var resumeStores = []struct {
	name string
	open func(t *testing.T) ledger.Store
}{
	{"memory", func(*testing.T) ledger.Store { return memory.New(nil) }},
	{"sqlite", func(t *testing.T) ledger.Store {
		st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}},
	{"jetstream", func(t *testing.T) ledger.Store {
		srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
		if err != nil {
			t.Fatal(err)
		}
		go srv.Start()
		if !srv.ReadyForConnections(10 * time.Second) {
			t.Fatal("nats-server not ready")
		}
		t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
		st, err := jetstream.Open(t.Context(), srv.ClientURL(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}},
}

// appendMix appends n events over many groups: messages addressed to
// each agent ("to-*", some in threads), broadcasts ("bc-*"), groups only
// one agent writes in, with its reads ("solo-<agent>": none of its
// events is a delivery for it), groups of bookkeeping only ("keep-*").
func appendMix(t *testing.T, r *gateway.Relay, rng *rand.Rand, n int) {
	t.Helper()
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	var recs []ledger.Record
	for range n {
		var d gateway.EventData
		rec := ledger.Record{Kind: gateway.KindMessage}
		switch k := rng.IntN(10); {
		case k < 4:
			rec.GroupID, rec.By = fmt.Sprintf("to-%d", rng.IntN(8)), pick(projAgents)
			to := pick(projAgents)
			if rng.IntN(2) == 0 {
				e := envelope.New(strings.ToUpper(rec.By), strings.ToUpper(to), pick([]string{envelope.IntentRequest, envelope.IntentRespond, envelope.IntentHandoff}), "to "+to)
				if rng.IntN(2) == 0 {
					e.Thread = fmt.Sprintf("T%d", rng.IntN(3))
				}
				d.X = &gateway.XCrosstalk{Envelope: e, Transport: "test", Sender: rec.By, Verification: gateway.StatusUnsigned}
			}
			d.Text, d.To = "to "+to, []string{to}
		case k < 6:
			rec.GroupID, rec.By = fmt.Sprintf("bc-%d", rng.IntN(4)), pick(projAgents)
			e := envelope.New(strings.ToUpper(rec.By), "ALL", envelope.IntentBroadcast, "news")
			d.Text, d.X = "news", &gateway.XCrosstalk{Envelope: e, Transport: "test", Sender: rec.By, Verification: gateway.StatusUnsigned}
		case k < 8:
			a := pick(projAgents)
			rec.GroupID, rec.By, d.Text = "solo-"+a, a, "note to self"
			if rng.IntN(3) == 0 {
				rec.Kind, d = gateway.KindRead, gateway.EventData{ActorID: a, EventID: "x"}
			}
		default:
			a := pick(projAgents)
			rec.GroupID, rec.By, rec.Kind = fmt.Sprintf("keep-%d", rng.IntN(3)), a, gateway.KindRead
			d = gateway.EventData{ActorID: a, EventID: "x"}
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		rec.Data = b
		recs = append(recs, rec)
		if len(recs) == 20 || rng.IntN(8) == 0 {
			if _, err := r.Store().Append(t.Context(), recs); err != nil {
				t.Fatal(err)
			}
			recs = nil
		}
	}
	if len(recs) > 0 {
		if _, err := r.Store().Append(t.Context(), recs); err != nil {
			t.Fatal(err)
		}
	}
}

// appendMarker appends a message every agent is delivered (a plain one
// from an actor none is, to nobody) in group, and returns its id: the
// end of a walk.
func appendMarker(t *testing.T, r *gateway.Relay, group string) string {
	t.Helper()
	res, err := r.Store().Append(t.Context(), []ledger.Record{{Kind: gateway.KindMessage, GroupID: group, By: "zed", Data: json.RawMessage(`{"text":"end"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	return res[0].Event.ID
}

// channelView is what a channel over every group (package channel's
// followAll and onFeed) passes on of FollowAgent(after) up to the event
// marker: the deliveries above their group's cursor, one line each.
func channelView(t *testing.T, r *gateway.Relay, agent string, after int64, cursors map[string]int64, marker string) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out []string
	for d, err := range r.FollowAgent(ctx, agent, after) {
		if err != nil {
			t.Fatalf("FollowAgent(%s, %d) = %v", agent, after, err)
		}
		if d.Seq > cursors[d.Group] {
			out = append(out, fmt.Sprintf("%d %s %s/%d %s %s %s %s %d %q", d.Position, d.EventID, d.Group, d.Seq,
				d.Directedness, d.Policy, d.Injection, d.Reason, len(d.Fragments), d.Content))
		}
		if d.EventID == marker {
			return out
		}
	}
	t.Fatalf("FollowAgent(%s, %d) ended before the marker", agent, after)
	return nil
}

// deliver moves agent's delivery cursor in group to the event at seq.
func deliver(t *testing.T, r *gateway.Relay, agent, group string, seq int64) {
	t.Helper()
	evs, err := r.Store().Range(t.Context(), group, seq-1, nil, 1)
	if err != nil || len(evs) == 0 {
		t.Fatalf("Range(%s, %d) = %v, %v", group, seq-1, evs, err)
	}
	if _, err := r.Act(t.Context(), gateway.ActionRequest{Action: gateway.ActionDelivered, Group: group, EventID: evs[0].ID, Actor: agent}); err != nil {
		t.Fatal(err)
	}
}

// TestAgentResumeMatchesFromZero checks, on each ledger backend, that a
// channel over every group that follows from AgentResume's position
// passes on exactly what one following from position 0 does (both
// dropping what is at or below the cursors AgentResume returned): on a
// ledger of many groups (addressed, broadcast, threads and obligations,
// groups the agent only writes in, bookkeeping only), for agents with no
// cursor, with random cursors, with everything confirmed but a tail, and
// named by another spelling (CLAUDE for claude).
func TestAgentResumeMatchesFromZero(t *testing.T) {
	for _, sc := range resumeStores {
		t.Run(sc.name, func(t *testing.T) {
			st := sc.open(t)
			defer st.Close()
			r := gateway.New(st, &gateway.Options{Book: projBook(t)})
			rng := rand.New(rand.NewPCG(11, 5))
			for range 6 {
				appendRandom(t, r, rng, 40)
				appendMix(t, r, rng, 60)
			}
			agents := append(slices.Clone(projAgents), "CLAUDE")
			// check reads every agent's resume point, then appends to a
			// group created since and the marker, and compares.
			check := func(stage string, wantMoved bool) {
				t.Helper()
				type resumed struct {
					cursors map[string]int64
					after   int64
				}
				at := map[string]resumed{}
				for _, agent := range agents {
					cursors, after, err := r.AgentResume(t.Context(), agent)
					if err != nil {
						t.Fatalf("%s: AgentResume(%s) = %v", stage, agent, err)
					}
					for g, seq := range cursors {
						c, err := r.DeliveryCursor(t.Context(), g, agent)
						if err != nil || c.Seq != seq {
							t.Fatalf("%s: AgentResume(%s) cursor %s = %d, DeliveryCursor %d, %v", stage, agent, g, seq, c.Seq, err)
						}
					}
					if wantMoved && after == 0 {
						t.Errorf("%s: AgentResume(%s) = position 0: nothing skipped", stage, agent)
					}
					at[agent] = resumed{cursors, after}
				}
				appendMix(t, r, rng, 5)
				appendMarker(t, r, "late-"+stage)
				marker := appendMarker(t, r, "end-"+stage)
				for _, agent := range agents {
					cursors, after := at[agent].cursors, at[agent].after
					want := channelView(t, r, agent, 0, cursors, marker)
					got := channelView(t, r, agent, after, cursors, marker)
					if !slices.Equal(got, want) {
						t.Fatalf("%s: %s from position %d passes on\n%s\nfrom 0:\n%s", stage, agent, after,
							strings.Join(got, "\n"), strings.Join(want, "\n"))
					}
					if len(want) < 2 {
						t.Fatalf("%s: %s: %d deliveries: the test tests nothing", stage, agent, len(want))
					}
					t.Logf("%s: %s from position %d: %d deliveries", stage, agent, after, len(want))
				}
			}
			groups := func() []ledger.Group {
				gs, err := r.Groups(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				return gs
			}

			// No cursor: the position is before the first delivery.
			check("none", false)

			// Random cursors, none in about a third of the groups.
			for _, a := range projAgents {
				for _, g := range groups() {
					if rng.IntN(3) > 0 {
						deliver(t, r, a, g.ID, 1+rng.Int64N(g.LastSeq))
					}
				}
			}
			check("random", false)

			// Everything confirmed, then a tail.
			for _, a := range projAgents {
				for _, g := range groups() {
					deliver(t, r, a, g.ID, g.LastSeq)
				}
			}
			appendRandom(t, r, rng, 20)
			appendMix(t, r, rng, 30)
			check("tail", true)
		})
	}
}

// countingStore counts the events its reads return.
type countingStore struct {
	ledger.Store
	read atomic.Int64
}

func (s *countingStore) Log(ctx context.Context, after int64, limit int) ([]ledger.Logged, error) {
	ls, err := s.Store.Log(ctx, after, limit)
	s.read.Add(int64(len(ls)))
	return ls, err
}

func (s *countingStore) LogBefore(ctx context.Context, before int64, limit int) ([]ledger.Logged, error) {
	ls, err := s.Store.LogBefore(ctx, before, limit)
	s.read.Add(int64(len(ls)))
	return ls, err
}

func (s *countingStore) Range(ctx context.Context, group string, since int64, kinds []string, limit int) ([]ledger.Event, error) {
	evs, err := s.Store.Range(ctx, group, since, kinds, limit)
	s.read.Add(int64(len(evs)))
	return evs, err
}

func (s *countingStore) FollowLog(ctx context.Context, after int64) iter.Seq2[ledger.Logged, error] {
	return func(yield func(ledger.Logged, error) bool) {
		for l, err := range s.Store.FollowLog(ctx, after) {
			if err == nil {
				s.read.Add(1)
			}
			if !yield(l, err) {
				return
			}
		}
	}
}

func (s *countingStore) Follow(ctx context.Context, group string, since int64) iter.Seq2[ledger.Event, error] {
	return func(yield func(ledger.Event, error) bool) {
		for ev, err := range s.Store.Follow(ctx, group, since) {
			if err == nil {
				s.read.Add(1)
			}
			if !yield(ev, err) {
				return
			}
		}
	}
}

// TestAgentResumeReadsTheTail counts the ledger events a reconnect of a
// channel over every group reads (AgentResume, then FollowAgent from its
// position up to the last new delivery): on a ledger of 6 000 events the
// agent has confirmed, with 12 new events, a reconnect to the same relay
// reads what is new and the page it ends in, not the ledger; a relay
// started anew reads besides, at most, the events since the saved resume
// point (resumeSaveEvery) and the groups of the new events.
func TestAgentResumeReadsTheTail(t *testing.T) {
	ctx := t.Context()
	st := &countingStore{Store: memory.New(nil)}
	r := gateway.New(st, &gateway.Options{Book: projBook(t)})
	const history, groups = 6000, 30
	for b := 0; b < history; b += 100 {
		var recs []ledger.Record
		for i := range 100 {
			g := fmt.Sprintf("g%02d", (b+i)%groups)
			by := []string{"chatgpt", "bob", "claude"}[i%3]
			recs = append(recs, ledger.Record{Kind: gateway.KindMessage, GroupID: g, By: by, Data: json.RawMessage(`{"text":"hi","to":["claude"]}`)})
		}
		if _, err := st.Append(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	marker := appendMarker(t, r, "g00")

	// The first connect: nothing confirmed, the whole ledger is read, and
	// the channel confirms every delivery as it goes (its settle).
	cursors, after, err := r.AgentResume(ctx, "claude")
	if err != nil || after != 0 || len(cursors) != 0 {
		t.Fatalf("first AgentResume = %v, %d, %v; want no cursor, position 0", cursors, after, err)
	}
	sctx, cancel := context.WithCancel(ctx)
	n := 0
	for d, err := range r.FollowAgent(sctx, "claude", after) {
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionDelivered, Group: d.Group, EventID: d.EventID, Actor: "claude"}); err != nil {
			t.Fatal(err)
		}
		n++
		if d.EventID == marker {
			break
		}
	}
	cancel()
	if want := history/100*67 + 1; n != want { // claude wrote 33 of each 100
		t.Fatalf("first connect: %d deliveries, want %d", n, want)
	}

	// A tail: 12 events, 8 of them deliveries, in 3 groups.
	const tail = 12
	var recs []ledger.Record
	for i := range tail {
		by := []string{"chatgpt", "bob", "claude"}[i%3]
		recs = append(recs, ledger.Record{Kind: gateway.KindMessage, GroupID: fmt.Sprintf("g%02d", i%3), By: by, Data: json.RawMessage(`{"text":"new","to":["claude"]}`)})
	}
	res, err := st.Append(ctx, recs)
	if err != nil {
		t.Fatal(err)
	}
	last := res[tail-2].Event.ID // the last one is claude's own

	reconnect := func(r *gateway.Relay) (reads int64, got int) {
		t.Helper()
		st.read.Store(0)
		cursors, after, err := r.AgentResume(ctx, "CLAUDE")
		if err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for d, err := range r.FollowAgent(sctx, "claude", after) {
			if err != nil {
				t.Fatal(err)
			}
			if d.Seq > cursors[d.Group] {
				got++
			}
			if d.EventID == last {
				return st.read.Load(), got
			}
		}
		t.Fatal("the stream ended before the tail's last delivery")
		return 0, 0
	}
	reads, got := reconnect(r)
	t.Logf("a reconnect to the same relay read %d events for %d deliveries", reads, got)
	if got != 8 {
		t.Errorf("reconnect: %d deliveries, want the tail's 8", got)
	}
	// The tail twice (the walk of the resume point and the stream) and
	// the marker before it.
	if reads > 2*(tail+1) {
		t.Errorf("a reconnect read %d events of a ledger of %d, want at most %d", reads, history+tail, 2*(tail+1))
	}

	// A relay started anew on the same ledger: no resume point nor
	// tracker state in memory.
	fresh := gateway.New(st, &gateway.Options{Book: projBook(t)})
	reads, got = reconnect(fresh)
	t.Logf("a reconnect to a relay started anew read %d events for %d deliveries", reads, got)
	bound := int64(gateway.ResumeSaveEvery + 2*(tail+1) + 3*history/groups + tail)
	if got != 8 || reads > bound {
		t.Errorf("a relay started anew: %d deliveries, %d events read; want 8, at most %d", got, reads, bound)
	}

	// A saved point whose event the ledger does not hold there (a ledger
	// restored or imported anew) is not trusted: the walk starts at 0
	// and finds the same position.
	_, warm, err := r.AgentResume(ctx, "claude")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetMark(ctx, gateway.ResumeMarkName("claude"), ledger.Mark{Pos: warm + 1000, EventID: "01ELSEWHERE"}); err != nil {
		t.Fatal(err)
	}
	if _, after, err := gateway.New(st, &gateway.Options{Book: projBook(t)}).AgentResume(ctx, "claude"); err != nil || after != warm {
		t.Errorf("AgentResume with a foreign mark = %d, %v; want %d", after, err, warm)
	}

	// Today's walk from position 0, for comparison.
	st.read.Store(0)
	sctx, cancel = context.WithCancel(ctx)
	defer cancel()
	for d, err := range r.FollowAgent(sctx, "claude", 0) {
		if err != nil {
			t.Fatal(err)
		}
		if d.EventID == last {
			break
		}
	}
	if old := st.read.Load(); old < history {
		t.Errorf("the walk from position 0 read %d events, fewer than the ledger's %d", old, history)
	} else {
		t.Logf("the walk from position 0 read %d events", old)
	}
}

// TestStreamResumesFromCheckpoint: a stream over every group that starts
// in the middle of a group an earlier stream walked past (a channel
// reconnecting from its first unconfirmed delivery) starts that group's
// thread state from the earlier walk's last checkpoint before it, not
// from the group's start, and decides every event as a walk from
// position 0 does (thread participation included); further back than its
// checkpoints reach, it walks the group from its start, as before.
func TestStreamResumesFromCheckpoint(t *testing.T) {
	ctx := t.Context()
	st := &countingStore{Store: memory.New(nil)}
	r := gateway.New(st, &gateway.Options{Book: projBook(t)})
	const events = 600
	var pos []int64
	for n := 1; n <= events; n++ {
		by, to, group := "bob", "chatgpt", "big"
		if n%5 == 0 {
			by = "claude" // joins the thread
		}
		if n%9 == 0 {
			group = "other"
		}
		e := envelope.New(strings.ToUpper(by), strings.ToUpper(to), envelope.IntentRequest, fmt.Sprintf("event %d", n))
		e.Thread = fmt.Sprintf("T%d", n%13)
		b, err := json.Marshal(gateway.EventData{Text: e.Body, To: []string{to}, X: &gateway.XCrosstalk{Envelope: e, Transport: "test", Sender: by, Verification: gateway.StatusUnsigned}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := st.Append(ctx, []ledger.Record{{Kind: gateway.KindMessage, GroupID: group, By: by, Data: b}})
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, res[0].Pos)
	}
	marker := appendMarker(t, r, "end")
	all := channelView(t, r, "claude", 0, nil, marker) // walks past everything, saves the state
	participant := 0
	for _, line := range all {
		if strings.Contains(line, "thread_participant") {
			participant++
		}
	}
	if participant == 0 {
		t.Fatal("no delivery to a thread participant: the test tests nothing")
	}
	for _, from := range []int64{pos[events-1-40], pos[events-1-150], pos[events-1-300]} {
		st.read.Store(0)
		got := channelView(t, r, "claude", from, nil, marker)
		reads := st.read.Load()
		var want []string
		for _, line := range all {
			var p int64
			fmt.Sscan(line, &p)
			if p > from {
				want = append(want, line)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("from position %d:\n%s\nfrom 0:\n%s", from, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		// The log after from (events+1-from) and, per group, at most
		// checkpointEvery events before it, when from is within the
		// checkpoints kept (4 of them, 64 events apart); further back,
		// the group's walk from its start.
		if limit := int64(events+1) - from + 2*64; from >= pos[events-1-150] && reads > limit {
			t.Errorf("from position %d: %d events read, want at most %d", from, reads, limit)
		}
		t.Logf("from position %d: %d deliveries, %d events read", from, len(got), reads)
	}
}

// racingStore runs hook (once) inside the first GetCursor of actor in
// group after it is armed, having read the cursor: a confirmation that
// lands between a connect's read of the cursors and the rest of it.
type racingStore struct {
	ledger.Store
	group, actor string
	hook         atomic.Pointer[func()]
}

func (s *racingStore) GetCursor(ctx context.Context, group, actor string) (ledger.Cursor, error) {
	c, err := s.Store.GetCursor(ctx, group, actor)
	if group == s.group && actor == s.actor {
		if h := s.hook.Swap(nil); h != nil {
			(*h)()
		}
	}
	return c, err
}

// TestAgentResumeRacingConfirmation: a delivery confirmation by another
// channel of the same agent that lands while a channel connects, after
// AgentResume read the cursor it returns, does not move the position past
// deliveries above that cursor: following from the position still passes
// on what following from 0 does, dropping what is at or below the cursors
// returned. (The confirmation moved the resume point in memory, and the
// connect walked on from it with the cursor read before: the channel
// skipped the deliveries between, which its backlog count still waited
// for.)
func TestAgentResumeRacingConfirmation(t *testing.T) {
	ctx := t.Context()
	st := &racingStore{Store: memory.New(nil), group: "g", actor: "delivered to claude"}
	r := gateway.New(st, &gateway.Options{Book: projBook(t)})
	for range 5 {
		if _, err := st.Append(ctx, []ledger.Record{{Kind: gateway.KindMessage, GroupID: "g", By: "bob", Data: json.RawMessage(`{"text":"hi","to":["claude"]}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	deliver(t, r, "claude", "g", 1)
	// A first connect: the resume point is in memory.
	if _, after, err := r.AgentResume(ctx, "claude"); err != nil || after != 1 {
		t.Fatalf("AgentResume = %d, %v; want position 1", after, err)
	}
	// The next connect races the other channel's confirmation of g/4.
	hook := func() { deliver(t, r, "claude", "g", 4) }
	st.hook.Store(&hook)
	cursors, after, err := r.AgentResume(ctx, "claude")
	if err != nil {
		t.Fatal(err)
	}
	if st.hook.Load() != nil {
		t.Fatal("the confirmation did not race the connect: the test tests nothing")
	}
	marker := appendMarker(t, r, "end")
	want := channelView(t, r, "claude", 0, cursors, marker)
	got := channelView(t, r, "claude", after, cursors, marker)
	if !slices.Equal(got, want) {
		t.Fatalf("cursors %v, from position %d passes on\n%s\nfrom 0:\n%s", cursors, after, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
