package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/transports"
)

// dispatcherReads wraps a ledger and counts the reads made with a
// context that carries dispatcherCtx, and the events they return, so a
// test counts the dispatcher's reads and not those of the relay's
// projections (which read with their own context).
type dispatcherReads struct {
	ledger.Store
	mu         sync.Mutex
	calls, evs int
}

type dispatcherCtx struct{}

func (c *dispatcherReads) note(ctx context.Context, n int) {
	if ctx.Value(dispatcherCtx{}) == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	c.evs += n
}

// yielded counts an event a follower yields: part of its call's read.
func (c *dispatcherReads) yielded(ctx context.Context) {
	if ctx.Value(dispatcherCtx{}) == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evs++
}

func (c *dispatcherReads) reset() (calls, evs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls, evs = c.calls, c.evs
	c.calls, c.evs = 0, 0
	return calls, evs
}

func (c *dispatcherReads) Get(ctx context.Context, id string) (ledger.Event, error) {
	c.note(ctx, 1)
	return c.Store.Get(ctx, id)
}

func (c *dispatcherReads) GetByDedupeKey(ctx context.Context, key string) (ledger.Event, error) {
	c.note(ctx, 1)
	return c.Store.GetByDedupeKey(ctx, key)
}

func (c *dispatcherReads) Range(ctx context.Context, group string, since int64, kinds []string, limit int) ([]ledger.Event, error) {
	evs, err := c.Store.Range(ctx, group, since, kinds, limit)
	c.note(ctx, len(evs))
	return evs, err
}

func (c *dispatcherReads) Groups(ctx context.Context) ([]ledger.Group, error) {
	gs, err := c.Store.Groups(ctx)
	c.note(ctx, 0)
	return gs, err
}

func (c *dispatcherReads) Log(ctx context.Context, after int64, limit int) ([]ledger.Logged, error) {
	ls, err := c.Store.Log(ctx, after, limit)
	c.note(ctx, len(ls))
	return ls, err
}

func (c *dispatcherReads) LogBefore(ctx context.Context, before int64, limit int) ([]ledger.Logged, error) {
	ls, err := c.Store.LogBefore(ctx, before, limit)
	c.note(ctx, len(ls))
	return ls, err
}

func (c *dispatcherReads) Follow(ctx context.Context, group string, since int64) iter.Seq2[ledger.Event, error] {
	c.note(ctx, 0)
	return func(yield func(ledger.Event, error) bool) {
		for ev, err := range c.Store.Follow(ctx, group, since) {
			c.yielded(ctx)
			if !yield(ev, err) {
				return
			}
		}
	}
}

func (c *dispatcherReads) FollowLog(ctx context.Context, after int64) iter.Seq2[ledger.Logged, error] {
	c.note(ctx, 0)
	return func(yield func(ledger.Logged, error) bool) {
		for l, err := range c.Store.FollowLog(ctx, after) {
			c.yielded(ctx)
			if !yield(l, err) {
				return
			}
		}
	}
}

func (c *dispatcherReads) GetCursor(ctx context.Context, group, actor string) (ledger.Cursor, error) {
	c.note(ctx, 0)
	return c.Store.GetCursor(ctx, group, actor)
}

func (c *dispatcherReads) GetMark(ctx context.Context, name string) (ledger.Mark, error) {
	c.note(ctx, 0)
	return c.Store.GetMark(ctx, name)
}

// runDispatcher runs r's dispatcher with a context the dispatcherReads
// wrapper counts.
func runDispatcher(t *testing.T, r *gateway.Relay, opts *gateway.OutboundOptions) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), dispatcherCtx{}, true))
	done := make(chan error, 1)
	go func() { done <- r.RunOutbound(ctx, opts) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunOutbound = %v", err)
		}
	}
}

// horizonRelay is routedRelay over a SQLite ledger the test also holds,
// wrapped in a dispatcherReads.
func horizonRelay(t *testing.T) (*gateway.Relay, *sqlite.Store, *dispatcherReads) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	book, err := gateway.NewAddressBook([]gateway.Agent{
		{ID: "claude", Names: []string{"CLAUDE"}, Transport: "folder", Address: "claude-out"},
		{ID: "chatgpt", Names: []string{"CHATGPT"}, Transport: "mail", Address: "gpt@example.test"},
		{ID: "gemini", Names: []string{"GEMINI"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &dispatcherReads{Store: st}
	return gateway.New(c, &gateway.Options{Book: book}), st, c
}

// oldLedger writes into st, as a relay without a dispatch horizon left
// it, n messages from GEMINI to CLAUDE spread over groups, each followed
// (a batch later) by its delivered record, and no mark: 2n events. The
// messages carry the data of a message the relay r recorded.
func oldLedger(t *testing.T, r *gateway.Relay, st ledger.Store, n, groups int) {
	t.Helper()
	ctx := context.Background()
	ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "template", "a year of these"))
	tmpl, err := st.Range(ctx, "template", 0, []string{gateway.KindMessage}, 1)
	if err != nil || len(tmpl) != 1 {
		t.Fatalf("template message: %v, %v", tmpl, err)
	}
	// Its own delivery is recorded too: nothing of the history is pending.
	if _, err := st.Append(ctx, []ledger.Record{deliveredRecord(t, tmpl[0])}); err != nil {
		t.Fatal(err)
	}
	const batch = 500
	for i := 0; i < n; i += batch {
		var msgs []ledger.Record
		for j := i; j < min(i+batch, n); j++ {
			msgs = append(msgs, ledger.Record{Kind: gateway.KindMessage, GroupID: fmt.Sprintf("g%d", j%groups), By: "gemini", Data: tmpl[0].Data, DedupeKey: fmt.Sprintf("history-%d", j), Compact: true})
		}
		res, err := st.Append(ctx, msgs)
		if err != nil {
			t.Fatal(err)
		}
		var recs []ledger.Record
		for _, rs := range res {
			recs = append(recs, deliveredRecord(t, rs.Event))
		}
		if _, err := st.Append(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
}

// deliveredRecord is the record the dispatcher writes when it delivered
// ev to claude.
func deliveredRecord(t *testing.T, ev ledger.Event) ledger.Record {
	t.Helper()
	data, err := json.Marshal(gateway.EventData{EventID: ev.ID, ActorID: "claude", State: "delivered", Message: "delivered via folder to claude-out after 1 attempt(s)"})
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Record{Kind: gateway.KindDelivery, GroupID: ev.GroupID, By: "system", Data: data, DedupeKey: "delivery:" + ev.ID + ":claude", Compact: true}
}

// lastPos returns the position of the ledger's last event.
func lastPos(t *testing.T, st ledger.Store) ledger.Mark {
	t.Helper()
	ls, err := st.LogBefore(context.Background(), 0, 1)
	if err != nil || len(ls) != 1 {
		t.Fatalf("LogBefore(0, 1) = %v, %v", ls, err)
	}
	return ledger.Mark{Pos: ls[0].Pos, EventID: ls[0].ID}
}

// waitSaved waits until the dispatcher of r has saved the horizon want
// in st.
func waitSaved(t *testing.T, r *gateway.Relay, st ledger.Store, want ledger.Mark) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		m, err := st.GetMark(context.Background(), gateway.OutboundHorizonName(r))
		if err == nil && m == want {
			return
		}
		if time.Now().After(deadline) {
			now, _ := gateway.OutboundHorizon(r)
			t.Fatalf("saved dispatch horizon = %+v, %v (the dispatcher's: %+v), want %+v", m, err, now, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitRecords is waitEvents of delivery records with a longer bound: a
// start without a horizon reads the whole history first.
func waitRecords(t *testing.T, r *gateway.Relay, group string, n int) []ledger.Event {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		evs := waitEvents(t, r, group, gateway.KindDelivery, n)
		if len(evs) >= n || time.Now().After(deadline) {
			return evs
		}
	}
}

// recordsOf returns how many delivery records of the message ev to
// actor the group holds.
func recordsOf(t *testing.T, st ledger.Store, ev ledger.Event, actor string) int {
	t.Helper()
	evs, err := st.Range(context.Background(), ev.GroupID, 0, []string{gateway.KindDelivery}, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rec := range evs {
		d, err := gateway.ParseData(rec)
		if err == nil && d.EventID == ev.ID && d.ActorID == actor {
			n++
		}
	}
	return n
}

// TestOutboundRestartReadsPendingNotHistory checks that a restart of the
// dispatcher of a relay with a long history costs what is pending, not
// the history: it follows the ledger from its saved horizon, and reads
// the delivery records after the horizon only. Before the horizon, every
// start read every delivery record of every group and then the whole log
// (which this test's first start, on a ledger without a horizon, still
// does: a ledger written before there was one).
func TestOutboundRestartReadsPendingNotHistory(t *testing.T) {
	const history, groups, pending = 5_000, 50, 5
	r, st, reads := horizonRelay(t)
	oldLedger(t, r, st, history, groups)
	folder := &recordingSender{}
	opts := &gateway.OutboundOptions{Senders: map[string]transports.Sender{"folder": folder, "mail": &recordingSender{}}, HorizonEvery: 10 * time.Millisecond}
	send := func(round int) {
		for i := range pending {
			ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "new", fmt.Sprintf("round %d, pending %d", round, i)))
		}
	}

	send(1)
	reads.reset()
	stop := runDispatcher(t, r, opts)
	if evs := waitRecords(t, r, "new", pending); len(evs) != pending {
		t.Fatalf("delivery records = %d, want %d", len(evs), pending)
	}
	waitSaved(t, r, st, lastPos(t, st))
	stop()
	callsBefore, evsBefore := reads.reset()
	if evsBefore < 2*history {
		t.Errorf("a start without a horizon read %d events, want the whole history (%d and more)", evsBefore, 2*history)
	}

	send(2)
	stop = runDispatcher(t, r, opts)
	if evs := waitRecords(t, r, "new", 2*pending); len(evs) != 2*pending {
		t.Fatalf("delivery records after the restart = %d, want %d", len(evs), 2*pending)
	}
	waitSaved(t, r, st, lastPos(t, st))
	stop()
	calls, evs := reads.reset()
	t.Logf("dispatcher reads over %d events of history with %d pending: %d calls, %d events without a horizon; %d calls, %d events from the horizon", 2*history, pending, callsBefore, evsBefore, calls, evs)
	// From the horizon: the event there (checked), then the pending
	// messages and the records written after them, twice (the records
	// first, then the log), and what the follower reads live.
	if limit := 8*pending + 8; evs > limit || calls > limit {
		t.Errorf("the restart's reads = %d calls, %d events, want at most %d of each: bounded by what is pending, not the %d events of history", calls, evs, limit, 2*history)
	}
	if got := folder.count("claude-out"); got != 2*pending {
		t.Errorf("sends = %d, want %d (each new message once, nothing of the history)", got, 2*pending)
	}
}

// TestOutboundHorizonNeverPassesPending checks that the horizon stays
// before a message whose delivery is pending (its receiver down, the
// delivery in backoff) however many later messages are delivered, that a
// restart from it delivers that message, and that a crash between the
// delivery records and the next save of the horizon sends nothing again:
// the records after the horizon are read first.
func TestOutboundHorizonNeverPassesPending(t *testing.T) {
	r, st, _ := horizonRelay(t)
	ctx := context.Background()
	message := func(to, body string) ledger.Event {
		t.Helper()
		outs := ingest(t, r, "", env("GEMINI", to, "REQUEST", "g", body))
		ev, err := st.Get(ctx, outs[0].Event.ID)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}

	// Run 1: claude's receiver is down.
	down := &recordingSender{err: errors.New("receiver down")}
	gpt := &recordingSender{}
	stop := runDispatcher(t, r, &gateway.OutboundOptions{
		Senders:    map[string]transports.Sender{"folder": down, "mail": gpt},
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond, MaxAttempts: 1 << 30,
		HorizonEvery: 5 * time.Millisecond,
	})
	m0 := message("CHATGPT", "delivered first")
	if n := len(waitEvents(t, r, "g", gateway.KindDelivery, 1)); n != 1 {
		t.Fatalf("records of the first message = %d, want 1", n)
	}
	beforeM1 := lastPos(t, st) // m0's record
	m1 := message("CLAUDE", "its receiver is down")
	for i := range 20 {
		message("CHATGPT", fmt.Sprintf("delivered while claude is down %d", i))
	}
	if n := len(waitEvents(t, r, "g", gateway.KindDelivery, 21)); n != 21 {
		t.Fatalf("records = %d, want 21", n)
	}
	for deadline := time.Now().Add(time.Minute); down.tries() < 3; { // m1 has been tried and is in backoff
		if time.Now().After(deadline) {
			t.Fatalf("%s tried %d times, want 3", m1.ID, down.tries())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if now, _ := gateway.OutboundHorizon(r); now != beforeM1 {
		t.Errorf("dispatch horizon with %s pending = %+v, want the event before it %+v", m1.ID, now, beforeM1)
	}
	waitSaved(t, r, st, beforeM1)
	stop()
	if m, err := st.GetMark(ctx, gateway.OutboundHorizonName(r)); err != nil || m != beforeM1 {
		t.Fatalf("saved horizon after run 1 = %+v, %v, want %+v", m, err, beforeM1)
	}

	// Run 2: claude is back; the horizon is never saved (a crash after
	// the records and before the save: a ledger that refuses the mark,
	// since a stop would save it).
	crashed := gateway.New(crashBeforeSave{r.Store()}, &gateway.Options{Book: r.Book()})
	up := &recordingSender{}
	stop = runDispatcher(t, crashed, &gateway.OutboundOptions{
		Senders:      map[string]transports.Sender{"folder": up, "mail": gpt},
		HorizonEvery: time.Hour,
	})
	message("CHATGPT", "delivered in run 2")
	if n := len(waitEvents(t, r, "g", gateway.KindDelivery, 23)); n != 23 {
		t.Fatalf("records after run 2 = %d, want 23", n)
	}
	stop()
	if got := up.count("claude-out"); got != 1 {
		t.Errorf("sends to claude in run 2 = %d, want 1 (the message pending since run 1)", got)
	}
	if m, err := st.GetMark(ctx, gateway.OutboundHorizonName(r)); err != nil || m != beforeM1 {
		t.Fatalf("saved horizon after run 2 = %+v, %v, want still %+v", m, err, beforeM1)
	}

	// Run 3: from the old horizon, with every record after it already
	// written; only the new message goes out.
	folder3, gpt3 := &recordingSender{}, &recordingSender{}
	stop = runDispatcher(t, r, &gateway.OutboundOptions{
		Senders:      map[string]transports.Sender{"folder": folder3, "mail": gpt3},
		HorizonEvery: 5 * time.Millisecond,
	})
	defer stop()
	m3 := message("CLAUDE", "delivered in run 3")
	if n := len(waitEvents(t, r, "g", gateway.KindDelivery, 24)); n != 24 {
		t.Fatalf("records after run 3 = %d, want 24", n)
	}
	waitSaved(t, r, st, lastPos(t, st))
	if got, gotGPT := folder3.count("claude-out"), gpt3.count("gpt@example.test"); got != 1 || gotGPT != 0 {
		t.Errorf("sends in run 3 = %d to claude, %d to chatgpt; want 1 and 0 (only the new message)", got, gotGPT)
	}
	for _, ev := range []ledger.Event{m1, m3} {
		if n := recordsOf(t, st, ev, "claude"); n != 1 {
			t.Errorf("delivery records of %s to claude = %d, want 1", ev.ID, n)
		}
	}
	if n := recordsOf(t, st, m0, "chatgpt"); n != 1 {
		t.Errorf("delivery records of %s to chatgpt = %d, want 1", m0.ID, n)
	}
	if got := gpt.count("gpt@example.test"); got != 22 {
		t.Errorf("sends to chatgpt in runs 1 and 2 = %d, want 22 (each once)", got)
	}
}

// crashBeforeSave is a ledger whose dispatcher never saves its
// horizon, as one killed before each save: it refuses every mark.
type crashBeforeSave struct{ ledger.Store }

func (crashBeforeSave) SetMark(context.Context, string, ledger.Mark) error {
	return errors.New("killed before the save")
}

// TestOutboundHorizonUpgrade checks a ledger written before there was a
// dispatch horizon: it is read from the start as before (nothing
// delivered goes out again, what is pending does), and then gains a
// horizon.
func TestOutboundHorizonUpgrade(t *testing.T) {
	r, st, _ := horizonRelay(t)
	oldLedger(t, r, st, 300, 3)
	pending := ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "g0", "pending at the upgrade"))
	if _, err := st.GetMark(context.Background(), gateway.OutboundHorizonName(r)); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("GetMark before the upgrade error = %v, want ErrNotFound", err)
	}
	folder := &recordingSender{}
	stop := runDispatcher(t, r, &gateway.OutboundOptions{Senders: map[string]transports.Sender{"folder": folder}, HorizonEvery: 5 * time.Millisecond})
	defer stop()
	if n := len(waitEvents(t, r, "g0", gateway.KindDelivery, 101)); n != 101 {
		t.Fatalf("records in g0 = %d, want 101", n)
	}
	waitSaved(t, r, st, lastPos(t, st))
	if got := folder.count("claude-out"); got != 1 {
		t.Errorf("sends = %d, want 1 (the pending message %s only)", got, pending[0].Event.ID)
	}
}

// TestOutboundHorizonOtherRoutes checks that a horizon holds only for the
// routes it was made with: an agent that gains a transport between
// restarts still gets the envelope sent to it before the horizon, which
// had no delivery for it then, and nothing else goes out again.
func TestOutboundHorizonOtherRoutes(t *testing.T) {
	r, st, c := horizonRelay(t)
	toGemini := ingest(t, r, "", env("CLAUDE", "GEMINI", "REQUEST", "g", "sent while gemini read through the API"))[0].Event
	ingest(t, r, "", env("GEMINI", "CHATGPT", "REQUEST", "g", "delivered at once"))
	gpt := &recordingSender{}
	stop := runDispatcher(t, r, &gateway.OutboundOptions{Senders: map[string]transports.Sender{"folder": &recordingSender{}, "mail": gpt}, HorizonEvery: 5 * time.Millisecond})
	if n := len(waitEvents(t, r, "g", gateway.KindDelivery, 1)); n != 1 {
		t.Fatalf("records = %d, want 1", n)
	}
	waitSaved(t, r, st, lastPos(t, st))
	stop()

	book, err := gateway.NewAddressBook([]gateway.Agent{
		{ID: "claude", Names: []string{"CLAUDE"}, Transport: "folder", Address: "claude-out"},
		{ID: "chatgpt", Names: []string{"CHATGPT"}, Transport: "mail", Address: "gpt@example.test"},
		{ID: "gemini", Names: []string{"GEMINI"}, Transport: "folder", Address: "gemini-out"},
	})
	if err != nil {
		t.Fatal(err)
	}
	r2 := gateway.New(c, &gateway.Options{Book: book})
	folder2, gpt2 := &recordingSender{}, &recordingSender{}
	stop = runDispatcher(t, r2, &gateway.OutboundOptions{Senders: map[string]transports.Sender{"folder": folder2, "mail": gpt2}, HorizonEvery: 5 * time.Millisecond})
	defer stop()
	if n := len(waitEvents(t, r2, "g", gateway.KindDelivery, 2)); n != 2 {
		t.Fatalf("records after the address book changed = %d, want 2", n)
	}
	if n := recordsOf(t, st, toGemini, "gemini"); n != 1 {
		t.Errorf("delivery records of %s to gemini = %d, want 1", toGemini.ID, n)
	}
	if got, gotGPT := folder2.count("gemini-out"), gpt2.count("gpt@example.test"); got != 1 || gotGPT != 0 {
		t.Errorf("sends after the address book changed = %d to gemini, %d to chatgpt; want 1 and 0", got, gotGPT)
	}
}

// TestOutboundHorizonReplacedLog checks that a saved horizon the ledger's
// log does not hold (a ledger restored or imported anew numbers its log
// otherwise) is not trusted: the start reads the ledger from its
// beginning, and the message before that position without a record is
// delivered.
func TestOutboundHorizonReplacedLog(t *testing.T) {
	tests := []struct {
		name string
		mark func(last ledger.Mark) ledger.Mark
	}{
		{"another event at its position", func(last ledger.Mark) ledger.Mark { return ledger.Mark{Pos: last.Pos, EventID: "not-" + last.EventID} }},
		{"past the log's end", func(last ledger.Mark) ledger.Mark { return ledger.Mark{Pos: last.Pos + 100, EventID: last.EventID} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, st, _ := horizonRelay(t)
			pending := ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "g", "never delivered"))[0].Event
			ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "g", "nor this one"))
			if err := st.SetMark(context.Background(), gateway.OutboundHorizonName(r), tt.mark(lastPos(t, st))); err != nil {
				t.Fatal(err)
			}
			folder := &recordingSender{}
			stop := runDispatcher(t, r, &gateway.OutboundOptions{Senders: map[string]transports.Sender{"folder": folder, "mail": &recordingSender{}}, HorizonEvery: time.Hour})
			defer stop()
			if n := len(waitEvents(t, r, "g", gateway.KindDelivery, 2)); n != 2 {
				t.Fatalf("records = %d, want 2", n)
			}
			if n := recordsOf(t, st, pending, "claude"); n != 1 {
				t.Errorf("delivery records of %s to claude = %d, want 1", pending.ID, n)
			}
			if got := folder.count("claude-out"); got != 2 {
				t.Errorf("sends to claude = %d, want 2", got)
			}
		})
	}
}
