package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/jetstream"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/gateway/reserve"
	"github.com/crosstalk-go/crosstalk/internal/fakeclock"
	"github.com/crosstalk-go/crosstalk/internal/natstest"
)

// liveRelay is one relay process: a relay with liveness, the API and
// reservations, on a ledger that outlives it.
type liveRelay struct {
	t     *testing.T
	relay *gateway.Relay
	srv   *httptest.Server
}

func startLiveRelay(t *testing.T, st ledger.Store, clk *fakeclock.Clock, stale time.Duration) *liveRelay {
	t.Helper()
	relay := gateway.New(st, &gateway.Options{Now: clk.Now, StaleAfter: stale})
	a := api.New(relay, &api.Options{})
	a.MountAgents(nil)
	svc, err := reserve.NewService(context.Background(), st, reserve.Options{Now: clk.Now, Policy: relay.ReservePolicy()})
	if err != nil {
		t.Fatal(err)
	}
	a.MountReservations(svc)
	srv := httptest.NewServer(a)
	t.Cleanup(func() { a.Close(); srv.Close() })
	return &liveRelay{t: t, relay: relay, srv: srv}
}

func (l *liveRelay) call(method, path, body string, out any) {
	l.t.Helper()
	req, err := http.NewRequest(method, l.srv.URL+path, strings.NewReader(body))
	if err != nil {
		l.t.Fatal(err)
	}
	res, err := l.srv.Client().Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		l.t.Fatalf("%s %s = %d %s", method, path, res.StatusCode, b)
	}
	if out != nil {
		if err := json.NewDecoder(bytes.NewReader(b)).Decode(out); err != nil {
			l.t.Fatal(err)
		}
	}
}

func (l *liveRelay) reserve(agent string, takeover bool, scopes ...string) api.ReserveAnswer {
	l.t.Helper()
	b, _ := json.Marshal(api.ReserveBody{Agent: agent, Scopes: scopes, TTL: "2h", TakeoverStale: takeover})
	var ans api.ReserveAnswer
	l.call("POST", "/v1/reservations", string(b), &ans)
	return ans
}

func (l *liveRelay) list() []api.HeldReservation {
	l.t.Helper()
	var ans struct{ Reservations []api.HeldReservation }
	l.call("GET", "/v1/reservations", "", &ans)
	return ans.Reservations
}

// TestStaleTakeover follows a killed agent's reservation through BeadBoard
// §4.3–§4.4 with a fake clock: while its holder is active nothing takes
// it over; once stale only --takeover-stale does, archiving the old one
// as expired in the ledger; evicted likewise; and a restarted relay
// derives the same reservations and liveness from the ledger.
func TestStaleTakeover(t *testing.T) {
	const stale = time.Minute
	t0 := time.Date(2026, 1, 13, 10, 0, 0, 0, time.UTC)
	clk := fakeclock.New(t0)
	path := filepath.Join(t.TempDir(), "ledger.db")
	st, err := sqlite.Open(context.Background(), path, &sqlite.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	r := startLiveRelay(t, st, clk, stale)
	var hb gateway.Presence
	r.call("POST", "/v1/agents/claude/heartbeat", "", &hb)
	if hb.Liveness != attention.Active || !hb.LastSeen.Equal(t0) {
		t.Fatalf("heartbeat = %+v", hb)
	}
	if ans := r.reserve("claude", false, "src/*", "docs/a.md"); !ans.Granted {
		t.Fatalf("claude: %+v", ans)
	}
	// claude is killed: no more heartbeats. Per liveness state:
	for _, step := range []struct {
		at       time.Duration
		liveness attention.Liveness
	}{
		{0, attention.Active},
		{stale - time.Millisecond, attention.Active},
	} {
		clk.Set(t0.Add(step.at))
		ans := r.reserve("chatgpt", true, "src/lib/parser.go")
		if ans.Granted || len(ans.Conflicts) != 1 || ans.Conflicts[0].Liveness != step.liveness || ans.Conflicts[0].Class != reserve.Partial {
			t.Fatalf("at +%v: takeover of an %s holder = %+v, want refused", step.at, step.liveness, ans)
		}
	}
	clk.Set(t0.Add(stale))
	if _, err := r.relay.Liveness().Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rs := r.list(); len(rs) != 2 || rs[0].HolderLiveness != attention.Stale {
		t.Fatalf("list at stale = %+v", rs)
	}
	ans := r.reserve("chatgpt", false, "src/lib/parser.go")
	if ans.Granted || ans.Conflicts[0].Liveness != attention.Stale {
		t.Fatalf("without --takeover-stale = %+v, want refused naming a stale holder", ans)
	}
	if ans := r.reserve("chatgpt", true, "src/lib/parser.go"); !ans.Granted {
		t.Fatalf("takeover of a stale holder = %+v", ans)
	}
	// The old reservation is archived as expired, in the ledger.
	evs, err := st.Range(context.Background(), reserve.DefaultGroup, 0, []string{ledger.KindReservation}, 100)
	if err != nil {
		t.Fatal(err)
	}
	var took reserve.EventData
	for _, ev := range evs {
		var d reserve.EventData
		_ = json.Unmarshal(ev.Data, &d)
		if d.Action == reserve.ActionTakeover {
			took = d
		}
	}
	if took.Agent != "claude" || took.Scope != "src/*" || took.State != "expired" || took.TakenOverBy != "chatgpt" {
		t.Fatalf("takeover event = %+v", took)
	}
	// Evicted: gemini takes over claude's other scope.
	clk.Set(t0.Add(2 * stale))
	if ans := r.reserve("gemini", false, "docs/a.md"); ans.Granted || ans.Conflicts[0].Liveness != attention.Evicted {
		t.Fatalf("evicted holder without takeover = %+v", ans)
	}
	if ans := r.reserve("gemini", true, "docs/a.md"); !ans.Granted {
		t.Fatalf("takeover of an evicted holder = %+v", ans)
	}
	before := r.list()
	if _, err := r.relay.Liveness().Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Restart: a new relay on the reopened ledger.
	st.Close()
	st2, err := sqlite.Open(context.Background(), path, &sqlite.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	r2 := startLiveRelay(t, st2, clk, stale)
	if err := r2.relay.SyncLiveness(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := r2.list()
	if len(after) != 2 || len(before) != 2 {
		t.Fatalf("after restart %+v, before %+v", after, before)
	}
	for i := range after {
		if after[i].Reservation != before[i].Reservation || after[i].HolderLiveness != before[i].HolderLiveness {
			t.Fatalf("after restart %+v, before %+v", after[i], before[i])
		}
	}
	seen, l := r2.relay.AgentLiveness("claude")
	if l != attention.Evicted || !seen.Equal(t0) {
		t.Fatalf("claude after restart: %s seen %v, want evicted, seen at t0", l, seen)
	}
	// A heartbeat brings claude back; its takeovers stay.
	r2.call("POST", "/v1/agents/claude/heartbeat", "", &hb)
	if hb.Liveness != attention.Active {
		t.Fatalf("heartbeat after eviction = %+v", hb)
	}
	if ans := r2.reserve("claude", false, "src/lib/parser.go"); ans.Granted {
		t.Fatalf("claude reserving chatgpt's scope = %+v, want refused (chatgpt is active)", ans)
	}
}

// TestTwoRelaysJetStream: two relays on one JetStream ledger see the same
// reservations and liveness. claude beats on relay A only; relay B
// refuses a takeover while claude is active and grants it once the
// transition to stale is recorded; both list the same reservations.
func TestTwoRelaysJetStream(t *testing.T) {
	const stale = time.Minute
	node := natstest.Single(t, false)
	ctx := context.Background()
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	clk := fakeclock.New(t0)
	open := func() *liveRelay {
		s, err := jetstream.Open(ctx, node.URL, &jetstream.Options{Stream: "live", Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return startLiveRelay(t, s, clk, stale)
	}
	a, b := open(), open()
	a.call("POST", "/v1/agents/claude/heartbeat", "", nil)
	if ans := a.reserve("claude", false, "src/*"); !ans.Granted {
		t.Fatalf("claude on A: %+v", ans)
	}
	clk.Set(t0.Add(50 * time.Second))
	a.call("POST", "/v1/agents/claude/heartbeat", "", nil) // memory only on A
	clk.Set(t0.Add(55 * time.Second))
	if _, err := a.relay.Liveness().Sweep(ctx); err != nil { // flushes the sighting
		t.Fatal(err)
	}
	clk.Set(t0.Add(70 * time.Second))
	if ans := b.reserve("chatgpt", true, "src/x.go"); ans.Granted || ans.Conflicts[0].Liveness != attention.Active {
		t.Fatalf("takeover on B while claude beats on A = %+v, want refused", ans)
	}
	clk.Set(t0.Add(50*time.Second + stale))
	var wg sync.WaitGroup
	for _, r := range []*liveRelay{a, b} {
		wg.Go(func() {
			if _, err := r.relay.Liveness().Sweep(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	evs, err := a.relay.Store().Range(ctx, "x.crosstalk.liveness", 0, nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	claudes := 0 // chatgpt's reserve on B is a sighting of chatgpt
	for _, ev := range evs {
		if strings.Contains(string(ev.Data), `"agent":"claude"`) {
			claudes++
		}
	}
	if claudes != 3 { // active, flush, one stale between the two sweepers
		t.Fatalf("%d liveness events of claude, want 3", claudes)
	}
	if ans := b.reserve("chatgpt", true, "src/x.go"); !ans.Granted {
		t.Fatalf("takeover on B of a stale holder = %+v", ans)
	}
	la, lb := a.list(), b.list()
	if len(la) != 1 || len(lb) != 1 || la[0].Reservation != lb[0].Reservation || la[0].Agent != "chatgpt" {
		t.Fatalf("A lists %+v, B lists %+v", la, lb)
	}
	if err := a.relay.SyncLiveness(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*liveRelay{a, b} {
		if seen, l := r.relay.AgentLiveness("claude"); l != attention.Stale || !seen.Equal(t0.Add(50*time.Second)) {
			t.Fatalf("claude: %s seen %v", l, seen)
		}
	}
}
