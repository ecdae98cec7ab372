package web

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/client"
)

// openSets is what an agent's page shows of the open-set queries (issue
// #14; docs/agents.md "Open-set queries"): one page each of what the
// agent owes and of the obligations it waits on.
type openSets struct {
	Owe     []oweRow
	Waiting []waitingRow
	// OweMore and WaitingMore link to the next page of each list.
	OweMore, WaitingMore string
	// Settled reports that settled items are shown (?settled=1);
	// SettledToggle links to the page with the other choice.
	Settled       bool
	SettledToggle string
}

// oweRow is one item of what an agent owes.
type oweRow struct {
	gateway.Delivery
	Time    string
	State   string // "open", or how it was settled
	Blocks  string // the obligation's, if any
	Expires string // the deadline, if any
}

// waitingRow is one obligation an agent waits on.
type waitingRow struct {
	gateway.Waiting
	Time     string
	Deadline string
	Action   string // the default action, cut to maxActionRunes
}

// openSetItems is how many items of each open-set list an agent page
// shows: with the page's deliveries (pageBytes) the page stays under 200
// KB of HTML.
const openSetItems = 50

// maxActionRunes bounds the default action shown in a row (it may be
// 500 bytes long): the thread shows it whole.
const maxActionRunes = 120

// openSets reads one page of each open-set query for agent: ?owe_after=
// and ?waiting_after= page them, openSetItems at a time; ?settled=1 adds the
// settled items.
func (s *Server) openSets(ctx context.Context, r *http.Request, agent string) (openSets, error) {
	qv := r.URL.Query()
	out := openSets{Settled: qv.Get("settled") == "1"}
	base := "/ui/agents/" + client.PathSegment(agent)
	more := func(name, after string) string {
		v := url.Values{name: {after}}
		if out.Settled {
			v.Set("settled", "1")
		}
		return base + "?" + v.Encode()
	}
	out.SettledToggle = base + "?settled=1"
	if out.Settled {
		out.SettledToggle = base
	}
	owe, err := s.relay.Owed(ctx, agent, gateway.OpenSetQuery{All: out.Settled, After: qv.Get("owe_after"), Limit: openSetItems})
	if err != nil {
		return out, err
	}
	for _, d := range owe.Items {
		row := oweRow{Delivery: d, Time: humanTime(d.TS), State: "open"}
		if st := d.Settled(); st != "" {
			row.State = st
		}
		if ob := d.Obligation; ob != nil && d.Reason == attention.ReasonObligation {
			row.Blocks = string(ob.Blocks)
		}
		if !d.Deadline.IsZero() {
			row.Expires = d.Deadline.UTC().Format(time.RFC3339)
		}
		out.Owe = append(out.Owe, row)
	}
	if owe.Next != "" {
		out.OweMore = more("owe_after", owe.Next)
	}
	waiting, err := s.relay.WaitingOn(ctx, agent, gateway.OpenSetQuery{All: out.Settled, After: qv.Get("waiting_after"), Limit: openSetItems})
	if err != nil {
		return out, err
	}
	for _, w := range waiting.Items {
		row := waitingRow{Waiting: w, Time: humanTime(w.TS), Action: w.Obligation.DefaultAction}
		if r := []rune(row.Action); len(r) > maxActionRunes {
			row.Action = string(r[:maxActionRunes-1]) + "…"
		}
		if !w.Obligation.Deadline.IsZero() {
			row.Deadline = w.Obligation.Deadline.UTC().Format(time.RFC3339)
		}
		out.Waiting = append(out.Waiting, row)
	}
	if waiting.Next != "" {
		out.WaitingMore = more("waiting_after", waiting.Next)
	}
	return out, nil
}
