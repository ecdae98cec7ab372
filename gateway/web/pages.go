package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// maxItems bounds the items of one group page; older ones are behind the
// thread views.
const maxItems = 300

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
}

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
	gs, err := s.relay.Store().Groups(ctx)
	if err != nil {
		s.internal(w, r, c, err)
		return
	}
	queue, err := s.queue(ctx, c.viewer)
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
	for _, g := range gs {
		unread, err := s.unread(ctx, g.ID, c.viewer)
		if err != nil {
			s.internal(w, r, c, err)
			return
		}
		data.Groups = append(data.Groups, groupRow{ID: g.ID, LastSeq: g.LastSeq, Unread: unread, Attention: perGroup[g.ID]})
	}
	s.render(w, r, c, http.StatusOK, "index", "Groups", data)
}

// unread counts the chat messages of group after viewer's read cursor
// that viewer did not write.
func (s *Server) unread(ctx context.Context, group, viewer string) (int, error) {
	viewer = s.relay.Book().ActorID(viewer)
	var since int64
	cur, err := s.relay.Store().GetCursor(ctx, group, viewer)
	switch {
	case err == nil:
		since = cur.Seq
	case !errors.Is(err, ledger.ErrNotFound):
		return 0, err
	}
	evs, err := s.relay.Store().Range(ctx, group, since, []string{gateway.KindMessage}, 0)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ev := range evs {
		if !strings.EqualFold(ev.By, viewer) {
			n++
		}
	}
	return n, nil
}

type groupData struct {
	Group   string
	Items   []item
	Omitted int
	LastSeq int64
	Unread  int
}

// group is one group's envelopes in order, live.
func (s *Server) group(w http.ResponseWriter, r *http.Request, c *call) {
	g := r.PathValue("group")
	items, err := s.groupItems(r.Context(), g)
	if err != nil {
		s.internal(w, r, c, err)
		return
	}
	if len(items) == 0 {
		s.fail(w, r, c, http.StatusNotFound, "not_found", "no group "+g)
		return
	}
	data := groupData{Group: g, LastSeq: items[len(items)-1].Seq}
	if len(items) > maxItems {
		data.Omitted = len(items) - maxItems
		items = items[len(items)-maxItems:]
	}
	data.Items = items
	if data.Unread, err = s.unread(r.Context(), g, c.viewer); err != nil {
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
}

// thread is one thread: its envelopes and the notes about them, indented
// by reply chain, live.
func (s *Server) thread(w http.ResponseWriter, r *http.Request, c *call) {
	g, th := r.PathValue("group"), r.PathValue("thread")
	all, err := s.groupItems(r.Context(), g)
	if err != nil {
		s.internal(w, r, c, err)
		return
	}
	data := threadData{Group: g, Thread: th}
	for _, it := range all {
		data.LastSeq = it.Seq
		if it.Thread == th {
			data.Items = append(data.Items, it)
			if it.Card && it.Message != "" {
				data.Last = it
			}
		}
	}
	if len(data.Items) == 0 {
		s.fail(w, r, c, http.StatusNotFound, "not_found", "no thread "+th+" in group "+g)
		return
	}
	s.render(w, r, c, http.StatusOK, "thread", "Thread "+th, data)
}

// markRead moves the viewer's read cursor to the group's last event.
func (s *Server) markRead(w http.ResponseWriter, r *http.Request, c *call) {
	g := r.PathValue("group")
	back := "/ui/groups/" + url.PathEscape(g)
	evs, err := s.relay.Store().Range(r.Context(), g, max(0, s.lastSeq(r.Context(), g)-1), nil, 0)
	if err != nil || len(evs) == 0 {
		s.redirect(w, r, c, back, "nothing to mark read")
		return
	}
	last := evs[len(evs)-1]
	if _, err := s.relay.Act(r.Context(), gateway.ActionRequest{Action: gateway.ActionRead, Group: g, EventID: last.ID, Actor: c.viewer}); err != nil {
		s.actionFailed(w, r, c, err)
		return
	}
	s.redirect(w, r, c, back, fmt.Sprintf("marked read up to #%d for %s", last.Seq, c.viewer))
}

func (s *Server) lastSeq(ctx context.Context, group string) int64 {
	gs, err := s.relay.Store().Groups(ctx)
	if err != nil {
		return 0
	}
	for _, g := range gs {
		if g.ID == group {
			return g.LastSeq
		}
	}
	return 0
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

// queue returns agent's deliveries over every group: pending ones first
// (oldest first), then the rest (newest first).
func (s *Server) queue(ctx context.Context, agent string) ([]deliveryView, error) {
	agent = s.relay.Book().ActorID(agent)
	ds, err := s.relay.Deliveries(ctx, agent, "", 0, 0)
	if err != nil {
		return nil, err
	}
	settled, err := s.settlements(ctx, agent)
	if err != nil {
		return nil, err
	}
	out := make([]deliveryView, 0, len(ds))
	for _, d := range ds {
		v := deliveryView{Delivery: d, Time: humanTime(d.TS), StatusClass: statusClass(d.Verification)}
		if d.Verification == "" {
			v.StatusClass = ""
		}
		if d.Reason == attention.ReasonObligation {
			// Only its author or delegate settles an obligation: a
			// reply or a disposition is evidence (docs/agents.md).
			if d.Discharged {
				v.Settled = "discharged"
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
		v.Pending = owes && v.Settled == "" && (!d.Expired || d.Reason == attention.ReasonObligation) && (d.ClaimedBy == "" || strings.EqualFold(d.ClaimedBy, agent))
		v.CanAck = attentionMsg && !d.Acked
		v.CanClaim = d.Kind == gateway.KindMessage && d.Policy != attention.MustNotRespond &&
			(d.Directedness == attention.ToMe || d.Directedness == attention.ToMyRole) && !strings.EqualFold(d.ClaimedBy, agent)
		v.CanSettle = d.Kind == gateway.KindMessage && d.Policy != attention.MustNotRespond && v.Settled == ""
		out = append(out, v)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Pending != b.Pending {
			return a.Pending
		}
		if a.Pending {
			return a.TS < b.TS
		}
		return a.TS > b.TS
	})
	return out, nil
}

func isAttention(p string) bool { return p == "attention" || p == "high" || p == "urgent" }

// settlement is what an agent has done about events: dispositions and
// reactions by event, and the messages it has answered.
type settlement struct {
	byEvent   map[string]attention.Disposition
	responded map[string]bool // message ids the agent replied to
}

func (s *Server) settlements(ctx context.Context, agent string) (settlement, error) {
	st := settlement{byEvent: map[string]attention.Disposition{}, responded: map[string]bool{}}
	gs, err := s.relay.Store().Groups(ctx)
	if err != nil {
		return st, err
	}
	kinds := []string{gateway.KindDisposition, gateway.KindReaction, gateway.KindMessage}
	for _, g := range gs {
		evs, err := s.relay.Store().Range(ctx, g.ID, 0, kinds, 0)
		if err != nil {
			return st, err
		}
		for _, ev := range evs {
			d, err := gateway.ParseData(ev)
			if err != nil {
				continue
			}
			switch ev.Kind {
			case gateway.KindDisposition:
				if strings.EqualFold(ev.By, agent) && d.EventID != "" {
					st.byEvent[d.EventID] = attention.Disposition(d.Disposition)
				}
			case gateway.KindReaction:
				if strings.EqualFold(d.ActorID, agent) && d.EventID != "" {
					if disp, ok := attention.Signal(d.Signal).Disposition(); ok {
						st.byEvent[d.EventID] = disp
					}
				}
			case gateway.KindMessage:
				if x := d.X; x != nil && x.Envelope != nil && x.Envelope.Parent != "" && strings.EqualFold(x.Sender, agent) {
					st.responded[x.Envelope.Parent] = true
				}
			}
		}
	}
	return st, nil
}

type agentsData struct {
	Agents []agentRow
}

type agentRow struct {
	ID       string
	Names    []string
	Roles    []string
	Liveness string
}

// agents lists the address book and the agents seen.
func (s *Server) agents(w http.ResponseWriter, r *http.Request, c *call) {
	if a := strings.TrimSpace(r.URL.Query().Get("agent")); a != "" {
		http.Redirect(w, r, "/ui/agents/"+url.PathEscape(a), http.StatusSeeOther)
		return
	}
	seen := s.relay.LastSeen()
	var data agentsData
	have := map[string]bool{}
	for _, a := range s.relay.Book().Agents() {
		have[strings.ToLower(a.ID)] = true
		data.Agents = append(data.Agents, agentRow{ID: a.ID, Names: a.Names, Roles: a.Roles, Liveness: liveness(seen, a.ID)})
	}
	for _, id := range s.knownAgents() {
		if !have[strings.ToLower(id)] {
			data.Agents = append(data.Agents, agentRow{ID: id, Liveness: liveness(seen, id)})
		}
	}
	sort.Slice(data.Agents, func(i, j int) bool { return data.Agents[i].ID < data.Agents[j].ID })
	s.render(w, r, c, http.StatusOK, "agents", "Agents", data)
}

func liveness(seen map[string]time.Time, id string) string {
	t, ok := seen[strings.ToLower(id)]
	if !ok {
		return "never seen"
	}
	return string(attention.LivenessOf(t, time.Now()))
}

type agentData struct {
	Version  string // the ledger version the page shows (GET /ui/changes)
	Agent    string
	MayAct   bool
	Pending  []deliveryView
	Others   []deliveryView
	Liveness string
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
	q, err := s.queue(r.Context(), agent)
	if err != nil {
		s.internal(w, r, c, err)
		return
	}
	data := agentData{Version: version, Agent: agent, MayAct: s.mayActAs(c, agent), Liveness: liveness(s.relay.LastSeen(), agent)}
	for _, d := range q {
		if d.Pending {
			data.Pending = append(data.Pending, d)
		} else if len(data.Others) < maxItems {
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
	case gateway.ActionAck, gateway.ActionClaim, gateway.ActionDefer, gateway.ActionResolve, gateway.ActionRead:
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
	s.redirect(w, r, c, "/ui/agents/"+url.PathEscape(agent), msg)
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
// cookie.
func (s *Server) login(w http.ResponseWriter, r *http.Request, c *call) {
	next := localPath(r.PostFormValue("next"))
	p, ok := s.api.TokenPrincipal(r.PostFormValue("token"))
	if !ok {
		s.render(w, r, c, http.StatusUnauthorized, "login", "Log in", loginData{Next: next, Error: "unknown token"})
		return
	}
	s.sessions.remove(c.sess.id)
	ns := s.sessions.create(p)
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
