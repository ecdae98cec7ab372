package gateway_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// injectionAgents: claude buffers (quiet 1 min, window 10 min: in a test
// consecutive sends are well within them) and takes digests hourly;
// chatgpt and gemini get each event alone.
var injectionAgents = []gateway.Agent{
	{ID: "claude", Names: []string{"CLAUDE"}, Roles: []string{"reviewer"},
		Buffer: &attention.Buffer{Quiet: time.Minute, MaxWindow: 10 * time.Minute}, DigestEvery: time.Hour},
	{ID: "chatgpt", Names: []string{"CHATGPT"}, Roles: []string{"reviewer"}},
	{ID: "gemini", Names: []string{"GEMINI"}},
}

func inThread(thread string) func(*envelope.Envelope) {
	return func(e *envelope.Envelope) { e.Thread = thread }
}

// injectionScenario sends, in group "default": three fragments from
// chatgpt to claude in one thread, a broadcast from gemini between them
// (digested for claude: it does not break the run), a fragment after the
// quiet window, and an urgent follow-up (never buffered: it flushes).
// It returns the events in order.
func injectionScenario(t *testing.T, r *testrelay.Relay) []ledger.Event {
	t.Helper()
	th := inThread("01J9ZQ3K8Y5V4W3X2Z1A0B9C8D")
	var evs []ledger.Event
	evs = append(evs, r.Ingest(t, testrelay.Envelope("CHATGPT", "CLAUDE", "REQUEST", "", "part one", th)))
	evs = append(evs, r.Ingest(t, testrelay.Envelope("CHATGPT", "CLAUDE", "RESPOND", "", "part two", th)))
	evs = append(evs, r.Ingest(t, testrelay.Envelope("GEMINI", "ALL", "BROADCAST", "deploy", "deploy is green")))
	evs = append(evs, r.Ingest(t, testrelay.Envelope("CHATGPT", "CLAUDE", "RESPOND", "", "part three", th)))
	r.Clock.Advance(2 * time.Minute) // past the quiet window
	evs = append(evs, r.Ingest(t, testrelay.Envelope("CHATGPT", "CLAUDE", "RESPOND", "", "part four", th)))
	evs = append(evs, r.Ingest(t, testrelay.Envelope("CHATGPT", "CLAUDE", "REQUEST", "", "urgent: stop the deploy", th, withMeta("routing", "X-Priority", "urgent"))))
	return evs
}

// shape is a delivery as the tests compare it: its event, its fragments'
// events and its policy.
func shape(d gateway.Delivery) string {
	s := d.EventID + " " + string(d.Injection) + " " + string(d.Policy)
	if len(d.Fragments) > 0 {
		var ids []string
		for _, f := range d.Fragments {
			ids = append(ids, f.EventID)
		}
		s += " [" + strings.Join(ids, ",") + "]"
	}
	return s
}

func wantInjected(evs []ledger.Event) []string {
	return []string{
		evs[3].ID + " buffered must_respond [" + evs[0].ID + "," + evs[1].ID + "," + evs[3].ID + "]",
		evs[4].ID + " buffered may_respond",
		evs[5].ID + " immediate must_respond",
	}
}

// TestBufferedListMerges: Deliveries (the MCP list and `inbox`) shows a
// buffering agent one delivery for consecutive fragments, with the
// policy of the one that asks most and every content; the broadcast is
// left to the digest; an agent without the settings sees each event.
func TestBufferedListMerges(t *testing.T) {
	r := testrelay.Start(t, &testrelay.Options{Agents: injectionAgents})
	evs := injectionScenario(t, r)
	ds, err := r.Relay.Deliveries(t.Context(), "claude", "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range ds {
		if d.Kind != gateway.KindDigest { // the server's loop may write one at an hour's end
			got = append(got, shape(d))
		}
	}
	if want := wantInjected(evs); !slices.Equal(got, want) {
		t.Fatalf("claude's deliveries =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if c := ds[0].Content; c != "part one\n\npart two\n\npart three" {
		t.Errorf("merged content = %q, want the three parts in order", c)
	}
	// One delivery per event when asked (lookups by id).
	raw, err := r.Relay.Deliveries(gateway.PerEvent(t.Context()), "claude", "", 0, 0)
	if err != nil || len(raw) != len(evs) {
		t.Errorf("per-event deliveries = %d, %v, want %d", len(raw), err, len(evs))
	}
	other, err := r.Relay.Deliveries(t.Context(), "gemini", "", 0, 0)
	if err != nil || len(other) != len(evs)-1 { // all but its own broadcast
		t.Errorf("gemini's deliveries = %d, %v, want %d, each alone", len(other), err, len(evs)-1)
	}
}

// follow collects n deliveries of the agent's stream from after.
func follow(t *testing.T, r *testrelay.Relay, agent string, after int64, n int) []gateway.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var out []gateway.Delivery
	for d, err := range r.Relay.FollowAgent(ctx, agent, after) {
		if err != nil {
			t.Fatalf("FollowAgent after %d: %v (got %d of %d)", after, err, len(out), n)
		}
		out = append(out, d)
		if len(out) == n {
			return out
		}
	}
	t.Fatalf("FollowAgent after %d ended with %d of %d deliveries", after, len(out), n)
	return nil
}

// TestBufferedStreamHoldsAndResumes: a live stream holds fragments
// until the clock passes the quiet window (then yields one merged
// delivery with its last fragment's position), an urgent follow-up
// flushes what is held, and a stream that ends while holding a run
// loses nothing: the next one, resumed from the last position received,
// yields it.
func TestBufferedStreamHoldsAndResumes(t *testing.T) {
	r := testrelay.Start(t, &testrelay.Options{Agents: injectionAgents})
	th := inThread("01J9ZQ3K8Y5V4W3X2Z1A0B9C8E")
	a := r.Ingest(t, testrelay.Envelope("CHATGPT", "CLAUDE", "REQUEST", "", "one", th))
	b := r.Ingest(t, testrelay.Envelope("CHATGPT", "CLAUDE", "RESPOND", "", "two", th))

	// A stream that ends while the run is held yields nothing...
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan gateway.Delivery, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for d, err := range r.Relay.FollowAgent(ctx, "claude", 0) {
			if err == nil {
				got <- d
			}
		}
	}()
	// The quiet window is a minute of the relay's clock, which does not
	// move: nothing can come. The urgent follow-up below proves the
	// stream was live.
	urgent := r.Ingest(t, testrelay.Envelope("CHATGPT", "CLAUDE", "REQUEST", "", "now", th, withMeta("routing", "X-Priority", "high")))
	first, second := <-got, <-got
	if shape(first) != b.ID+" buffered must_respond ["+a.ID+","+b.ID+"]" || first.Position == 0 {
		t.Fatalf("first = %s at %d, want the merged run flushed by the urgent follow-up", shape(first), first.Position)
	}
	if second.EventID != urgent.ID || second.Injection != attention.Immediate {
		t.Fatalf("second = %s, want the urgent follow-up", shape(second))
	}
	c := r.Ingest(t, testrelay.Envelope("CHATGPT", "CLAUDE", "RESPOND", "", "three", th))
	d := r.Ingest(t, testrelay.Envelope("CHATGPT", "CLAUDE", "RESPOND", "", "four", th))
	// ...while held, c and d are not yielded; end the stream.
	cancel()
	<-done
	select {
	case x := <-got:
		t.Fatalf("a held run was yielded when the stream ended: %s", shape(x))
	default:
	}
	// The next stream resumes from the last position received and, once
	// the clock passes the window, yields the held run whole.
	r.Clock.Advance(2 * time.Minute)
	ds := follow(t, r, "claude", second.Position, 1)
	if shape(ds[0]) != d.ID+" buffered may_respond ["+c.ID+","+d.ID+"]" {
		t.Fatalf("resumed stream = %s, want the held run [%s,%s]", shape(ds[0]), c.ID, d.ID)
	}
}

// TestBufferedReplayMatchesList: a stream replaying stored events
// merges as the list does.
func TestBufferedReplayMatchesList(t *testing.T) {
	r := testrelay.Start(t, &testrelay.Options{Agents: injectionAgents})
	evs := injectionScenario(t, r)
	r.Clock.Advance(2 * time.Minute)
	var got []string
	for _, d := range follow(t, r, "claude", 0, 3) {
		got = append(got, shape(d))
	}
	// (A digest the server's loop writes at an hour's end comes after
	// these, in its own group.)
	if want := wantInjected(evs); !slices.Equal(got, want) {
		t.Fatalf("stream =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestDigestEvents: a digest agent's broadcasts are summarised in one
// ledger event per group and window, delivered to it alone and on
// every view; must_respond events and obligations are never digested;
// writing the same window again (a restart, a second relay) records
// nothing new; the next window starts where the last ended.
func TestDigestEvents(t *testing.T) {
	r := standalone(t)
	ctx := t.Context()
	b1 := r.Ingest(t, testrelay.Envelope("GEMINI", "ALL", "BROADCAST", "deploy", "build 1 green"))
	b2 := r.Ingest(t, testrelay.Envelope("CHATGPT", "ALL", "BROADCAST", "deploy", "build 2 green"))
	b3 := r.Ingest(t, testrelay.Envelope("GEMINI", "ALL", "BROADCAST", "billing", "invoices sent"))
	ask := r.Ingest(t, testrelay.Envelope("GEMINI", "CLAUDE", "REQUEST", "deploy", "may I ship?"))
	ob := r.Ingest(t, testrelay.Envelope("GEMINI", "CLAUDE", "REQUEST", "deploy", "review this", func(e *envelope.Envelope) {
		e.Meta = append(e.Meta, envelope.Meta{Namespace: "obligation", Fields: []envelope.Field{{Key: "Blocks", Value: "halted"}}})
	}))

	// Before any digest, claude's list shows no broadcast.
	ds, err := r.Relay.Deliveries(ctx, "claude", "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Intent == "BROADCAST" {
			t.Errorf("claude's list has broadcast %s: it is left to the digest", d.EventID)
		}
	}
	until := r.Clock.Now().Add(time.Hour).Truncate(time.Hour)
	r.Clock.Advance(until.Sub(r.Clock.Now()))
	got, err := r.Relay.WriteDigests(ctx, "claude", until)
	if err != nil {
		t.Fatal(err)
	}
	byGroup := map[string]ledger.Event{}
	for _, ev := range got {
		byGroup[ev.GroupID] = ev
	}
	if len(got) != 2 || byGroup["deploy"].ID == "" || byGroup["billing"].ID == "" {
		t.Fatalf("digests = %+v, want one for deploy and one for billing", got)
	}
	dd, err := gateway.ParseData(byGroup["deploy"])
	if err != nil || dd.Digest == nil {
		t.Fatalf("deploy digest data = %+v, %v", dd, err)
	}
	g := dd.Digest
	if g.Count != 2 || len(g.Entries) != 1 || !slices.Equal(g.Entries[0].EventIDs, []string{b1.ID, b2.ID}) ||
		!slices.Equal(g.Entries[0].Authors, []string{"gemini", "chatgpt"}) || g.Entries[0].Topic != "broadcast about deploy" ||
		g.Since != 0 || g.Through != b2.Seq || !g.Until.Equal(until) || dd.TargetActorID != "claude" {
		t.Errorf("deploy digest = %+v, want broadcasts %s, %s from gemini, chatgpt through seq %d", g, b1.ID, b2.ID, b2.Seq)
	}
	for _, id := range []string{ask.ID, ob.ID} {
		if strings.Contains(string(byGroup["deploy"].Data), id) {
			t.Errorf("the digest lists %s: a must_respond event or an obligation is never digested", id)
		}
	}

	// The digest is claude's: in its list and stream, with the
	// summary; nobody else's.
	ds, err = r.Relay.Deliveries(ctx, "claude", "deploy", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range ds {
		ids = append(ids, d.EventID)
	}
	if want := []string{ask.ID, ob.ID, byGroup["deploy"].ID}; !slices.Equal(ids, want) {
		t.Fatalf("claude's deploy deliveries = %v, want the request, the obligation, the digest %v", ids, want)
	}
	dig := ds[2]
	if dig.Injection != attention.Digest || dig.Policy != attention.MustNotRespond || dig.Digest == nil ||
		!strings.Contains(dig.Content, b1.ID) || !strings.Contains(dig.Content, "2 × broadcast about deploy") {
		t.Errorf("digest delivery = %+v, want injection digest, must_not_respond, the summary and its event ids", dig)
	}
	for _, agent := range []string{"chatgpt", "gemini"} {
		other, err := r.Relay.Deliveries(ctx, agent, "", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range other {
			if d.Kind == gateway.KindDigest {
				t.Errorf("%s sees claude's digest %s", agent, d.EventID)
			}
		}
	}
	streamed := follow(t, r, "claude", 0, 4)
	if k := streamed[len(streamed)-1]; k.Kind != gateway.KindDigest {
		t.Errorf("claude's stream ends with %s %s, want a digest", k.Kind, k.EventID)
	}

	// The same window again, as after a restart (a fresh relay over the
	// same ledger) or on a second relay: nothing new.
	fresh := gateway.New(r.Store, &gateway.Options{Book: r.Relay.Book(), Now: r.Clock.Now})
	again, err := fresh.WriteDigests(ctx, "claude", until)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range again {
		if ev.ID != byGroup[ev.GroupID].ID {
			t.Errorf("rewriting the window recorded %s, want the existing %s", ev.ID, byGroup[ev.GroupID].ID)
		}
	}
	if n := countKind(t, r.Store, "deploy", gateway.KindDigest); n != 1 {
		t.Errorf("deploy has %d digests after rewriting the window, want 1", n)
	}

	// The next window starts after the last digest.
	b4 := r.Ingest(t, testrelay.Envelope("GEMINI", "ALL", "BROADCAST", "deploy", "build 3 green"))
	next, err := fresh.WriteDigests(ctx, "claude", until.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(next) != 1 || next[0].GroupID != "deploy" {
		t.Fatalf("next window's digests = %+v, want one for deploy", next)
	}
	nd, _ := gateway.ParseData(next[0])
	if nd.Digest.Since != b2.Seq || !slices.Equal(nd.Digest.Entries[0].EventIDs, []string{b4.ID}) {
		t.Errorf("next digest = %+v, want since %d, only %s", nd.Digest, b2.Seq, b4.ID)
	}
	_ = b3
}

// standalone is a relay without the server's digest loop, so that the
// test alone writes digests.
func standalone(t *testing.T) *testrelay.Relay {
	t.Helper()
	book, err := gateway.NewAddressBook(injectionAgents)
	if err != nil {
		t.Fatal(err)
	}
	clock := &testrelay.Clock{}
	st := memory.New(clock.Now)
	return &testrelay.Relay{Relay: gateway.New(st, &gateway.Options{Book: book, Now: clock.Now}), Store: st, Clock: clock}
}

func countKind(t *testing.T, st ledger.Store, group, kind string) int {
	t.Helper()
	evs, err := st.Range(t.Context(), group, 0, []string{kind}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

// TestDigestLoop: RunDigests writes a digest once the relay's clock
// passes the end of the agent's window.
func TestDigestLoop(t *testing.T) {
	r := testrelay.Start(t, &testrelay.Options{Agents: injectionAgents})
	b := r.Ingest(t, testrelay.Envelope("GEMINI", "ALL", "BROADCAST", "loop", "hello"))
	r.Clock.Advance(time.Hour) // the server's loop (server.Open) runs
	deadline := time.Now().Add(10 * time.Second)
	for countKind(t, r.Store, "loop", gateway.KindDigest) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no digest of %s after the window ended", b.ID)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestInjectionWindowsChecked: the address book refuses windows that
// cannot work.
func TestInjectionWindowsChecked(t *testing.T) {
	for _, a := range []gateway.Agent{
		{ID: "a", Buffer: &attention.Buffer{Quiet: -time.Second}},
		{ID: "a", Buffer: &attention.Buffer{Quiet: time.Minute, MaxWindow: time.Second}},
		{ID: "a", Buffer: &attention.Buffer{MaxWindow: time.Hour}},
		{ID: "a", DigestEvery: time.Second},
	} {
		if _, err := gateway.NewAddressBook([]gateway.Agent{a}); err == nil {
			t.Errorf("NewAddressBook(%+v) accepted", a)
		}
	}
}

// TestBufferedPagesBackward pages a buffering agent's history newest
// first, one delivery a page: a merged run is on one page, and the next
// older page begins before its first fragment, so it repeats none of
// them.
func TestBufferedPagesBackward(t *testing.T) {
	r := testrelay.Start(t, &testrelay.Options{Agents: injectionAgents})
	th := inThread("01J9ZQ3K8Y5V4W3X2Z1A0B9C8D")
	var evs []ledger.Event
	evs = append(evs, r.Ingest(t, testrelay.Envelope("CHATGPT", "CLAUDE", "REQUEST", "", "urgent: look", th, withMeta("routing", "X-Priority", "urgent"))))
	for _, text := range []string{"part one", "part two", "part three"} {
		evs = append(evs, r.Ingest(t, testrelay.Envelope("CHATGPT", "CLAUDE", "RESPOND", "", text, th)))
	}
	var got []string
	cur := gateway.LogCursor{}
	for range 5 {
		p, err := r.Relay.DeliveriesFrom(t.Context(), "claude", cur, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range p.Deliveries {
			if d.Kind != gateway.KindDigest {
				got = append(got, shape(d))
			}
		}
		if p.Older == 0 {
			break
		}
		cur = gateway.LogCursor{Before: p.Older}
	}
	want := []string{
		evs[3].ID + " buffered may_respond [" + evs[1].ID + "," + evs[2].ID + "," + evs[3].ID + "]",
		evs[0].ID + " immediate must_respond",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages newest first =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
