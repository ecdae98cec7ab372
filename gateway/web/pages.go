package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/client"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// groupRow is one line of the groups page.
type groupRow struct {
	ID        string
	LastSeq   int64
	Unread    int
	Attention int
}

type indexData struct {
	Version string // the ledger version the page shows (GET /ui/changes)
	Groups  []groupRow
	Queue   []deliveryView // the viewer's pending items
	// First and Next link the first page and the next (empty: none) of
	// groups, indexPage at a time by id.
	First, Next string
}

// indexPage bounds the groups one groups page shows: each row costs a
// cursor read and up to four reads of its messages, and an open page is
// drawn again on every change to the ledger (GET /ui/changes), so a
// relay with hundreds of groups drew them all every second.
const indexPage = 100

// index is the groups page: every group with its unread count (the
// viewer's read cursor) and attention items (the viewer's pending C2A
// deliveries).
func (s *Server) index(w http.ResponseWriter, r *http.Request, c *call) {
	ctx := r.Context()
	version, err := s.version(ctx)
	if err != nil {
		s.internal(w, r, c, err)
		return
	}
	gs, err := s.relay.Groups(ctx)
	if err != nil {
		s.internal(w, r, c, err)
		return
	}
	queue, _, err := s.queue(ctx, c.viewer, cursor{})
	if err != nil {
		s.internal(w, r, c, err)
		return
	}
	perGroup := map[string]int{}
	var pending []deliveryView
	for _, d := range queue {
		if d.Pending {
			perGroup[d.Group]++
			pending = append(pending, d)
		}
	}
	data := indexData{Version: version, Queue: pending}
	slices.SortFunc(gs, func(a, b ledger.Group) int { return strings.Compare(a.ID, b.ID) })
	if after := r.URL.Query().Get("after"); after != "" {
		i, found := slices.BinarySearchFunc(gs, after, func(g ledger.Group, id string) int { return strings.Compare(g.ID, id) })
		if found {
			i++
		}
		gs, data.First = gs[i:], "/"
	}
	if len(gs) > indexPage {
		gs = gs[:indexPage]
		data.Next = "/?after=" + url.QueryEscape(gs[len(gs)-1].ID)
	}
	for _, g := range gs {
		unread, err := s.unread(ctx, g.ID, c.viewer, g.LastSeq)
		if err != nil {
			s.internal(w, r, c, err)
			return
		}
		data.Groups = append(data.Groups, groupRow{ID: g.ID, LastSeq: g.LastSeq, Unread: unread, Attention: perGroup[g.ID]})
	}
	s.render(w, r, c, http.StatusOK, "index", "Groups", data)
}

// unread counts the chat messages of group after viewer's read cursor
// that viewer did not write and was shown (Relay.ShownTo: a message aimed
// only at others is no read watermark's, so it would never leave the
// count), up to unreadCap (the others are skipped for at most four reads
// of unreadCap events). last is the
// group's last seq when the caller knows it (else 0): a cursor there
// leaves nothing to read.
func (s *Server) unread(ctx context.Context, group, viewer string, last int64) (int, error) {
	viewer = s.relay.Book().ActorID(viewer)
	var since int64
	cur, err := s.relay.Store().GetCursor(ctx, group, viewer)
	switch {
	case err == nil:
		since = cur.Seq
	case !errors.Is(err, ledger.ErrNotFound):
		return 0, err
	}
	if last > 0 && since >= last {
		return 0, nil
	}
	key, from := unreadKey{group, viewer}, since
	if last > 0 {
		if n, ok := s.unreads.get(key, from, last); ok {
			return n, nil
		}
	}
	n := 0
	for round := 0; n < unreadCap && round < 4; round++ {
		evs, err := s.relay.Store().Range(ctx, group, since, []string{gateway.KindMessage}, unreadCap)
		if err != nil {
			return 0, err
		}
		for _, ev := range evs {
			if !attention.SameActor(ev.By, viewer) && s.relay.ShownTo(ev, viewer) {
				n++
			}
		}
		if len(evs) < unreadCap {
			break
		}
		since = evs[len(evs)-1].Seq
	}
	if last > 0 {
		s.unreads.put(key, from, last, min(n, unreadCap))
	}
	return min(n, unreadCap), nil
}

// unreads remembers the unread counts of the groups page (Server.unread)
// by group and viewer, with the read cursor and the group's last seq they
// were counted for: the page is drawn again each second the ledger
// changes, and counting a group whose messages are others' decodes up to
// 4 × unreadCap of them. A group that did not change since, for a viewer
// whose cursor did not move, is not counted again.
type unreads struct {
	mu sync.Mutex
	m  map[unreadKey]unreadCount
}

type unreadKey struct{ group, viewer string }

type unreadCount struct {
	since, last int64
	n           int
}

// maxUnreads bounds the counts kept; past it they start over.
const maxUnreads = 1 << 12

func (u *unreads) get(k unreadKey, since, last int64) (int, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	c, ok := u.m[k]
	return c.n, ok && c.since == since && c.last == last
}

func (u *unreads) put(k unreadKey, since, last int64, n int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil || len(u.m) >= maxUnreads {
		u.m = map[unreadKey]unreadCount{}
	}
	u.m[k] = unreadCount{since, last, n}
}

type groupData struct {
	Group   string
	Items   []item
	LastSeq int64 // the group's last seq
	Unread  int
	// Live is set on the newest page: only it follows the group live.
	Live bool
	pageLinks
}

// group is one page of a group's envelopes in order (docs/web.md
// "Pagination"): the newest pageItems events, or those before ?before=
// or after ?after= (seqs); the newest page is live.
func (s *Server) group(w http.ResponseWriter, r *http.Request, c *call) {
	g := r.PathValue("group")
	cur, err := pageCursor(r)
	if err != nil {
		s.fail(w, r, c, http.StatusBadRequest, gateway.CodeInvalid, err.Error())
		return
	}
	last, err := s.groupLast(r.Context(), g)
	if err != nil {
		s.internal(w, r, c, err)
		return
	}
	if last == 0 {
		s.fail(w, r, c, http.StatusNotFound, "not_found", "no group "+g)
		return
	}
	from, to := max(0, last-pageItems), last
	switch {
	case cur.After > 0:
		from = min(cur.After, last)
		to = min(last, from+pageItems)
	case cur.Before > 0:
		to = min(last, cur.Before-1)
		from = max(0, to-pageItems)
	}
	items, err := s.groupWindow(r.Context(), g, from, to)
	if err != nil {
		s.internal(w, r, c, err)
		return
	}
	items = trimToBudget(items)
	if len(items) > 0 && items[0].Seq > from+1 {
		from = items[0].Seq - 1 // the budget moved older items to the older page
	}
	data := groupData{Group: g, LastSeq: last, Live: to == last, Items: items}
	base := "/ui/groups/" + client.PathSegment(g)
	if from > 0 {
		data.Older = link(base, "before", from+1)
	}
	if to < last {
		data.Newer = link(base, "after", to)
	}
	if data.Unread, err = s.unread(r.Context(), g, c.viewer, 0); err != nil {
		s.internal(w, r, c, err)
		return
	}
	s.render(w, r, c, http.StatusOK, "group", g, data)
}

type threadData struct {
	Group, Thread string
	Items         []item
	LastSeq       int64
	Last          item // the last envelope, for the reply button
	Live          bool
	// Scanned is the first seq this page looked at, when older events
	// remain unread: the thread may have older items.
	Scanned int64
	pageLinks
}

// thread is one thread: its envelopes and the notes about them, indented
// by reply chain, live. Without an index of threads it reads the group
// backwards from ?before= (a seq; the group's end when absent), at most
// threadScan events, and shows the thread's last pageItems items among
// them, with an "older" link when more history remains.
func (s *Server) thread(w http.ResponseWriter, r *http.Request, c *call) {
	g, th := r.PathValue("group"), r.PathValue("thread")
	cur, err := pageCursor(r)
	if err != nil {
		s.fail(w, r, c, http.StatusBadRequest, gateway.CodeInvalid, err.Error())
		return
	}
	last, err := s.groupLast(r.Context(), g)
	if err != nil {
		s.internal(w, r, c, err)
		return
	}
	to := last
	if cur.Before > 0 {
		to = min(last, cur.Before-1)
	}
	from := max(0, to-threadScan)
	all, err := s.groupWindow(r.Context(), g, from, to)
	if err != nil {
		s.internal(w, r, c, err)
		return
	}
	data := threadData{Group: g, Thread: th, LastSeq: last, Live: to == last}
	for _, it := range all {
		if it.Thread == th {
			data.Items = append(data.Items, it)
			if it.Card && it.Message != "" {
				data.Last = it
			}
		}
	}
	n := len(data.Items)
	data.Items = trimToBudget(data.Items)
	if len(data.Items) < n {
		// Cut by the page size: the older page starts at the first item.
		from = data.Items[0].Seq - 1
	}
	if len(data.Items) == 0 && from == 0 && cur.Before == 0 {
		s.fail(w, r, c, http.StatusNotFound, "not_found", "no thread "+th+" in group "+g)
		return
	}
	base := "/ui/groups/" + client.PathSegment(g) + "/threads/" + client.PathSegment(th)
	if from > 0 {
		data.Older, data.Scanned = link(base, "before", from+1), from+1
	}
	if to < last {
		data.Newer = base
	}
	s.render(w, r, c, http.StatusOK, "thread", "Thread "+th, data)
}

// markRead moves the viewer's read cursor to the group's last event shown
// to the viewer (Relay.LastShown).
func (s *Server) markRead(w http.ResponseWriter, r *http.Request, c *call) {
	g := r.PathValue("group")
	back := "/ui/groups/" + client.PathSegment(g)
	last, err := s.groupLast(r.Context(), g)
	if err != nil {
		s.internal(w, r, c, err)
		return
	}
	// The latest event shown to the viewer: the last one may be a
	// message aimed only at others, which no read watermark names.
	ev, ok, err := s.relay.LastShown(r.Context(), g, c.viewer, last)
	if err != nil {
		s.internal(w, r, c, err)
		return
	}
	if !ok {
		s.redirect(w, r, c, back, "nothing to mark read for "+c.viewer)
		return
	}
	if _, err := s.relay.Act(r.Context(), gateway.ActionRequest{Action: gateway.ActionRead, Group: g, EventID: ev.ID, Actor: c.viewer}); err != nil {
		s.actionFailed(w, r, c, err)
		return
	}
	s.redirect(w, r, c, back, fmt.Sprintf("marked read up to #%d for %s", ev.Seq, c.viewer))
}

// deliveryView is one C2A delivery on an agent's page.
type deliveryView struct {
	gateway.Delivery
	// Pending: the agent owes an answer or an ack, and has not settled it.
	Pending bool
	// Settled is the disposition that closed it, if any.
	Settled     string
	Time        string
	StatusClass string
	CanAck      bool
	CanClaim    bool
	CanSettle   bool
}

// queue returns one page of agent's deliveries (agentPage): pending ones
// first (oldest first), then the rest (newest first). Settlements count
// when they are in the page's window of the ledger.
func (s *Server) queue(ctx context.Context, agent string, cur cursor) ([]deliveryView, pageLinks, error) {
	agent = s.relay.Book().ActorID(agent)
	ds, win, links, err := s.agentPage(ctx, agent, cur)
	if err != nil {
		return nil, links, err
	}
	settled := settlements(win, agent)
	out := make([]deliveryView, 0, len(ds))
	for _, d := range ds {
		v := deliveryView{Delivery: d, Time: humanTime(d.TS), StatusClass: statusClass(d.Verification)}
		if d.Verification == "" {
			v.StatusClass = ""
		}
		if d.Reason == attention.ReasonObligation {
			// Only its author or delegate settles an obligation: a
			// reply or a disposition is evidence (docs/agents.md).
			switch {
			case d.Discharged:
				v.Settled = "discharged"
			case d.Obligation != nil && d.Obligation.Ack && d.Acked:
				v.Settled = "accepted" // a HANDOFF or BLOCKED: its ack settles it (BeadBoard §6.3)
			}
		} else if disp, ok := settled.byEvent[d.EventID]; ok && attention.Settles(d.Policy, disp) {
			v.Settled = string(disp)
		} else if d.MessageID != "" && settled.responded[d.MessageID] {
			v.Settled = string(attention.Responded)
		} else if d.Acked && attention.Settles(d.Policy, attention.Acknowledged) {
			v.Settled = string(attention.Acknowledged)
		}
		attentionMsg := d.Kind == gateway.KindMessage && d.Directedness == attention.ToMe && isAttention(d.Priority)
		// An ACK or NACK answering the agent is ack_only but owes nothing.
		owes := d.Policy == attention.MustRespond || d.Policy == attention.AckOnly && d.Reason != attention.ReasonAcknowledgement ||
			(attentionMsg && !d.Acked)
		v.Pending = owes && v.Settled == "" && (!d.Expired || d.Reason == attention.ReasonObligation) && (d.ClaimedBy == "" || attention.SameActor(d.ClaimedBy, agent))
		v.CanAck = attentionMsg && !d.Acked
		v.CanClaim = d.Kind == gateway.KindMessage && d.Policy != attention.MustNotRespond &&
			(d.Directedness == attention.ToMe || d.Directedness == attention.ToMyRole) && !attention.SameActor(d.ClaimedBy, agent)
		v.CanSettle = d.Kind == gateway.KindMessage && d.Policy != attention.MustNotRespond && v.Settled == ""
		out = append(out, v)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Pending != b.Pending {
			return a.Pending
		}
		if a.Pending {
			return a.Position < b.Position
		}
		return a.Position > b.Position
	})
	return out, links, nil
}

// fitPage returns how many of ds fit one page, taken from the start when
// forward, else from the end: at most pageItems, and their estimated
// size within pageBytes; at least one.
func fitPage(ds []gateway.Delivery, forward bool) int {
	total := 0
	for n := range min(len(ds), pageItems) {
		d := ds[len(ds)-1-n]
		if forward {
			d = ds[n]
		}
		total += len(d.Content) + 1536
		if total > pageBytes && n > 0 {
			return n
		}
	}
	return min(len(ds), pageItems)
}

// agentPage returns one keyset page of agent's deliveries over every
// group (Relay.DeliveriesFrom, docs/web.md "Pagination"), in log order,
// at most pageItems of them and pageBytes of text, the window of the
// ledger's log they were computed from, and the links to the older and
// newer pages: by ledger position, before= the oldest or after= the
// newest.
func (s *Server) agentPage(ctx context.Context, agent string, cur cursor) ([]gateway.Delivery, []ledger.Logged, pageLinks, error) {
	var links pageLinks
	forward := cur.After > 0
	p, err := s.relay.DeliveriesFrom(ctx, agent, gateway.LogCursor{Before: cur.Before, After: cur.After}, pageItems)
	if err != nil {
		return nil, nil, links, err
	}
	ds := p.Deliveries
	if keep := fitPage(ds, forward); keep < len(ds) {
		if forward {
			ds = ds[:keep]
			p.Newer = ds[len(ds)-1].Position
		} else {
			ds = ds[len(ds)-keep:]
			p.Older = ds[0].Position
		}
	}
	base := "/ui/agents/" + client.PathSegment(agent)
	if p.Older > 0 {
		links.Older = link(base, "before", p.Older)
	}
	if p.Newer > 0 {
		links.Newer = link(base, "after", p.Newer)
	}
	return ds, p.Window, links, nil
}

func isAttention(p string) bool { return p == "attention" || p == "high" || p == "urgent" }

// settlement is what an agent has done about events: dispositions and
// reactions by event, and the messages it has answered, within a window
// of the ledger (settlements).
type settlement struct {
	byEvent   map[string]attention.Disposition
	responded map[string]bool // message ids the agent replied to
}

func settlements(win []ledger.Logged, agent string) settlement {
	st := settlement{byEvent: map[string]attention.Disposition{}, responded: map[string]bool{}}
	for _, l := range win {
		ev := l.Event
		switch ev.Kind {
		case gateway.KindDisposition, gateway.KindReaction, gateway.KindMessage:
		default:
			continue
		}
		d, err := gateway.ParseData(ev)
		if err != nil {
			continue
		}
		switch ev.Kind {
		case gateway.KindDisposition:
			if attention.SameActor(ev.By, agent) && d.EventID != "" {
				st.byEvent[d.EventID] = attention.Disposition(d.Disposition)
			}
		case gateway.KindReaction:
			if attention.SameActor(d.ActorID, agent) && d.EventID != "" {
				if disp, ok := attention.Signal(d.Signal).Disposition(); ok {
					st.byEvent[d.EventID] = disp
				}
			}
		case gateway.KindMessage:
			if x := d.X; x != nil && x.Envelope != nil && x.Envelope.Parent != "" && attention.SameActor(x.Sender, agent) {
				st.responded[x.Envelope.Parent] = true
			}
		}
	}
	return st
}

type agentsData struct {
	Agents []gateway.AgentStatus
	pageLinks
}

// agents lists every actor of the ledger and the address book
// (Relay.Agents) with its liveness, events and what it owes, pageItems
// at a time by id: ?after=ID (docs/web.md "Pagination").
func (s *Server) agents(w http.ResponseWriter, r *http.Request, c *call) {
	if a := strings.TrimSpace(r.URL.Query().Get("agent")); a != "" {
		http.Redirect(w, r, "/ui/agents/"+client.PathSegment(a), http.StatusSeeOther)
		return
	}
	all, err := s.relay.Agents(r.Context())
	if err != nil {
		s.internal(w, r, c, err)
		return
	}
	after := strings.ToLower(r.URL.Query().Get("after"))
	start := sort.Search(len(all), func(i int) bool { return after == "" || strings.ToLower(all[i].ID) > after })
	var data agentsData
	if start > 0 {
		data.Newer = "/ui/agents"
		if start > pageItems {
			data.Newer += "?" + url.Values{"after": {all[start-pageItems-1].ID}}.Encode()
		}
	}
	end := min(len(all), start+pageItems)
	data.Agents = all[start:end]
	if end < len(all) {
		data.Older = "/ui/agents?" + url.Values{"after": {all[end-1].ID}}.Encode()
	}
	s.render(w, r, c, http.StatusOK, "agents", "Agents", data)
}

// liveness is the agent's liveness as a page shows it (package liveness).
func (s *Server) liveness(id string) string {
	seen, l := s.relay.AgentLiveness(id)
	if seen.IsZero() {
		return "never seen"
	}
	return string(l)
}

type agentData struct {
	Version  string // the ledger version the page shows (GET /ui/changes)
	Agent    string
	MayAct   bool
	Pending  []deliveryView
	Others   []deliveryView
	Liveness string
	Open     openSets
	pageLinks
}

// agent is an agent's C2A queue: pending must-respond items first, with
// claim, ack, defer and resolve buttons.
func (s *Server) agent(w http.ResponseWriter, r *http.Request, c *call) {
	agent := s.relay.Book().ActorID(r.PathValue("agent"))
	if !s.mayActAs(c, agent) {
		// As on the API (GET /v1/agents/{agent}/deliveries): a principal
		// reads its own queue only.
		s.fail(w, r, c, http.StatusForbidden, string(envelope.CodePerm), fmt.Sprintf("%s may not read the queue of %s", c.principal, agent))
		return
	}
	version, err := s.version(r.Context())
	if err != nil {
		s.internal(w, r, c, err)
		return
	}
	cur, err := pageCursor(r)
	if err != nil {
		s.fail(w, r, c, http.StatusBadRequest, gateway.CodeInvalid, err.Error())
		return
	}
	q, links, err := s.queue(r.Context(), agent, cur)
	if err != nil {
		s.internal(w, r, c, err)
		return
	}
	data := agentData{Version: version, Agent: agent, MayAct: s.mayActAs(c, agent), Liveness: s.liveness(agent), pageLinks: links}
	if data.Open, err = s.openSets(r.Context(), r, agent); err != nil {
		s.internal(w, r, c, err)
		return
	}
	for _, d := range q {
		if d.Pending {
			data.Pending = append(data.Pending, d)
		} else {
			data.Others = append(data.Others, d)
		}
	}
	s.render(w, r, c, http.StatusOK, "agent", agent, data)
}

// act performs an action of the agent's page through Relay.Act.
func (s *Server) act(w http.ResponseWriter, r *http.Request, c *call) {
	agent := s.relay.Book().ActorID(r.PathValue("agent"))
	if !s.mayActAs(c, agent) {
		s.fail(w, r, c, http.StatusForbidden, string(envelope.CodePerm), fmt.Sprintf("%s may not act as %s", c.principal, agent))
		return
	}
	action := gateway.Action(r.PostFormValue("action"))
	switch action {
	case gateway.ActionAck, gateway.ActionClaim, gateway.ActionDefer, gateway.ActionResolve, gateway.ActionRead, gateway.ActionDischarge:
	default:
		s.fail(w, r, c, http.StatusBadRequest, gateway.CodeInvalid, fmt.Sprintf("unknown action %q", action))
		return
	}
	req := gateway.ActionRequest{Action: action, Group: r.PostFormValue("group"), EventID: r.PostFormValue("event"), Actor: agent, Note: r.PostFormValue("note")}
	res, err := s.relay.Act(r.Context(), req)
	if err != nil {
		s.actionFailed(w, r, c, err)
		return
	}
	msg := fmt.Sprintf("%s: %s on #%d recorded as event #%d", agent, action, s.seqOf(r.Context(), req.EventID), res.Event.Seq)
	if res.Duplicate {
		msg = fmt.Sprintf("%s: %s was already recorded", agent, action)
	}
	s.redirect(w, r, c, "/ui/agents/"+client.PathSegment(agent), msg)
}

func (s *Server) seqOf(ctx context.Context, id string) int64 {
	ev, err := s.relay.Store().Get(ctx, id)
	if err != nil {
		return 0
	}
	return ev.Seq
}

// actionFailed shows a refused action with its CCCS code.
func (s *Server) actionFailed(w http.ResponseWriter, r *http.Request, c *call, err error) {
	var ae *gateway.ActionError
	if !errors.As(err, &ae) {
		s.internal(w, r, c, err)
		return
	}
	status := http.StatusBadRequest
	switch ae.Code {
	case gateway.CodeNotFound:
		status = http.StatusNotFound
	case gateway.CodePermission:
		status = http.StatusForbidden
	case gateway.CodeConflict:
		status = http.StatusConflict
	}
	s.fail(w, r, c, status, ae.Code, ae.Reason)
}

// internal logs err and shows a 500 page without its details.
func (s *Server) internal(w http.ResponseWriter, r *http.Request, c *call, err error) {
	s.log.Error("page failed", "path", r.URL.Path, "err", err)
	s.fail(w, r, c, http.StatusInternalServerError, gateway.CodeInternal, "the relay could not read its ledger; see its log")
}

type loginData struct {
	Next  string
	Error string
}

// login exchanges a bearer token for a logged-in session. The session id
// changes on login (no fixation); the token itself is not kept in the
// cookie. Unknown tokens count against the caller's address as on the
// API (api.TokenGuessBurst), so the form cannot be used to guess tokens.
func (s *Server) login(w http.ResponseWriter, r *http.Request, c *call) {
	next := localPath(r.PostFormValue("next"))
	token := r.PostFormValue("token")
	p, ok, err := s.api.LoginToken(r, token)
	if err != nil {
		// Past the bounds on unknown tokens from this address: the token
		// was not checked, so the answer says nothing about it.
		w.Header().Set("Retry-After", "1")
		s.render(w, r, c, http.StatusTooManyRequests, "login", "Log in", loginData{Next: next, Error: err.Error()})
		return
	}
	if !ok {
		s.render(w, r, c, http.StatusUnauthorized, "login", "Log in", loginData{Next: next, Error: "unknown token"})
		return
	}
	s.sessions.remove(c.sess.id)
	ns := s.sessions.create(p, token)
	http.SetCookie(w, ns.cookie(s.secureFor(r)))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session.
func (s *Server) logout(w http.ResponseWriter, r *http.Request, c *call) {
	s.sessions.remove(c.sess.id)
	http.SetCookie(w, clearCookie(s.secureFor(r)))
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// viewAs sets the agent a local user views the pages as (read cursors,
// attention queue). With tokens the viewer is always the principal.
func (s *Server) viewAs(w http.ResponseWriter, r *http.Request, c *call) {
	back := localPath(r.PostFormValue("back"))
	if !c.local {
		s.fail(w, r, c, http.StatusForbidden, string(envelope.CodePerm), "with tokens the pages show the logged-in principal only")
		return
	}
	agent := strings.TrimSpace(r.PostFormValue("agent"))
	if agent == "" {
		agent = "user"
	}
	agent = s.relay.Book().ActorID(agent)
	s.sessions.update(c.sess.id, func(ss *session) { ss.viewAs = agent })
	s.redirect(w, r, c, back, "viewing as "+agent)
}
