package api

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/coder/websocket"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/gateway/channel"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// AgentOptions configure the agent endpoints of MountAgents. Nil means
// defaults.
type AgentOptions struct {
	// Channel holds the delivery channel's bounds (MaxAttempts,
	// AckTimeout, Window, Heartbeat, MaxMessage, Version); its Agent,
	// Backend and Logger are set per connection.
	Channel channel.Options
}

// MountAgents adds the agent endpoints of docs/design.md §5.6 / docs/agents.md to
// the API, behind the same gate (Host, Origin, token, rate limit) as every
// other endpoint:
//
//	GET  /v1/agents                       agents with last_seen and liveness
//	GET  /v1/agents/{agent}/channel       the JSON-RPC delivery channel (WebSocket)
//	GET  /v1/agents/{agent}/cursors       the agent's read cursor per group
//	GET  /v1/agents/{agent}/owe           what the agent owes (?all=1 adds the settled)
//	GET  /v1/agents/{agent}/waiting       the obligations it waits on (?all=1 adds the discharged)
//	POST /v1/agents/{agent}/heartbeat     mark the agent seen
//	POST /v1/agents/{agent}/notify        record a delivery failure notice
//
// Call it once, after New and before serving; later calls do nothing.
func (s *Server) MountAgents(opts *AgentOptions) {
	s.agentsOnce.Do(func() { s.mountAgents(opts) })
}

func (s *Server) mountAgents(opts *AgentOptions) {
	if opts == nil {
		opts = &AgentOptions{}
	}
	ch := opts.Channel
	s.mux.HandleFunc("GET /v1/agents", s.agents)
	s.mux.HandleFunc("GET /v1/agents/{agent}/channel", s.names(func(w http.ResponseWriter, r *http.Request) { s.channel(w, r, ch) }))
	s.mux.HandleFunc("GET /v1/agents/{agent}/cursors", s.names(s.cursors))
	s.mux.HandleFunc("GET /v1/agents/{agent}/owe", s.names(s.owe))
	s.mux.HandleFunc("GET /v1/agents/{agent}/waiting", s.names(s.waiting))
	s.mux.HandleFunc("POST /v1/agents/{agent}/heartbeat", s.names(s.heartbeatAgent))
	s.mux.HandleFunc("POST /v1/agents/{agent}/notify", s.names(s.notifyAgent))
}

// agents is GET /v1/agents.
func (s *Server) agents(w http.ResponseWriter, r *http.Request) {
	as, err := s.relay.Agents(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, gateway.CodeInternal, err.Error())
		return
	}
	// Pages by id: ?after=ID&limit=N (default and most 1000).
	limit, err := queryInt(r, "limit")
	if err != nil {
		writeError(w, http.StatusBadRequest, gateway.CodeInvalid, err.Error())
		return
	}
	if limit == 0 || limit > maxPage {
		limit = maxPage
	}
	after := strings.ToLower(r.URL.Query().Get("after"))
	start := sort.Search(len(as), func(i int) bool { return after == "" || strings.ToLower(as[i].ID) > after })
	as = as[start:]
	next := ""
	if int64(len(as)) > limit {
		as = as[:limit]
		next = as[len(as)-1].ID
	}
	if as == nil {
		as = []gateway.AgentStatus{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": as, "next": next})
}

// channel is GET /v1/agents/{agent}/channel: a WebSocket carrying the
// JSON-RPC delivery channel (package channel). Browsers from other
// origins are refused by the WebSocket handshake's Origin check.
func (s *Server) channel(w http.ResponseWriter, r *http.Request, tmpl channel.Options) {
	agent, err := s.agentOf(r, r.PathValue("agent"))
	if err != nil {
		writeError(w, http.StatusForbidden, gateway.CodePermission, err.Error())
		return
	}
	agent = s.relay.Book().ActorID(agent)
	ctx, done, ok := s.openStream(w, r)
	if !ok {
		return
	}
	defer done()
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		s.log.Warn("channel handshake failed", "agent", agent, "err", err)
		return // Accept has answered
	}
	opts := tmpl
	opts.Agent, opts.Logger = agent, s.logBase.With("component", "channel")
	opts.Backend = &c2a.Local{Relay: s.relay, Transport: "channel"}
	limit := opts.MaxMessage
	if limit <= 0 {
		limit = channel.DefaultMaxMessage
	}
	if err := channel.Serve(ctx, channel.NewWebSocketConn(c, limit), opts); err != nil {
		s.log.Info("channel ended", "agent", agent, "err", err)
	}
}

// cursors is GET /v1/agents/{agent}/cursors: {"agent", "cursors":
// {group: seq}, "delivered": {group: seq}} — the read cursors (CCCS §6.3,
// what `clip copy` starts after) and the delivery cursors, where a channel
// resumes (gateway.ActionDelivered). They move independently. With
// resume=1 it adds "resume_after": the ledger position a channel over
// every group follows from (gateway.Relay.AgentResume), computed from the
// delivery cursors it returns.
func (s *Server) cursors(w http.ResponseWriter, r *http.Request) {
	agent, err := s.agentOf(r, r.PathValue("agent"))
	if err != nil {
		writeError(w, http.StatusForbidden, gateway.CodePermission, err.Error())
		return
	}
	agent = s.relay.Book().ActorID(agent)
	gs, err := s.relay.Groups(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, gateway.CodeInternal, err.Error())
		return
	}
	// One store call each when the ledger can (ledger.CursorLister),
	// else one per group.
	ids := make([]string, len(gs))
	for i, g := range gs {
		ids[i] = g.ID
	}
	cs, err := ledger.CursorsIn(r.Context(), s.relay.Store(), agent, ids)
	if err != nil {
		writeError(w, http.StatusInternalServerError, gateway.CodeInternal, err.Error())
		return
	}
	read := make(map[string]int64, len(cs))
	for g, c := range cs {
		read[g] = c.Seq
	}
	delivered, err := s.relay.DeliveryCursors(r.Context(), agent, gs)
	if err != nil {
		writeError(w, http.StatusInternalServerError, gateway.CodeInternal, err.Error())
		return
	}
	res := map[string]any{"agent": agent, "cursors": read, "delivered": delivered}
	if r.URL.Query().Get("resume") == "1" {
		// The delivery cursors again, with the position computed from
		// them in the same read, so that the two agree.
		cs, after, err := s.relay.AgentResume(r.Context(), agent)
		if err != nil {
			writeError(w, http.StatusInternalServerError, gateway.CodeInternal, err.Error())
			return
		}
		res["delivered"], res["resume_after"] = cs, after
	}
	writeJSON(w, http.StatusOK, res)
}

// owe is GET /v1/agents/{agent}/owe: {"agent", "owe": [gateway.Delivery],
// "next"} — what the agent owes (gateway.Relay.Owed; docs/agents.md
// "Open-set queries"). Query: all=1 adds the settled items, after=EVENT-ID
// and limit=N (at most 1000) page them.
func (s *Server) owe(w http.ResponseWriter, r *http.Request) {
	s.openSet(w, r, "owe", func(agent string, q gateway.OpenSetQuery) (any, string, error) {
		p, err := s.relay.Owed(r.Context(), agent, q)
		return p.Items, p.Next, err
	})
}

// waiting is GET /v1/agents/{agent}/waiting: {"agent", "waiting":
// [gateway.Waiting], "next"} — the open obligations the agent authored or
// may discharge as delegate (gateway.Relay.WaitingOn; docs/agents.md
// "Obligations"). Query as for owe; all=1 adds the discharged ones.
func (s *Server) waiting(w http.ResponseWriter, r *http.Request) {
	s.openSet(w, r, "waiting", func(agent string, q gateway.OpenSetQuery) (any, string, error) {
		p, err := s.relay.WaitingOn(r.Context(), agent, q)
		return p.Items, p.Next, err
	})
}

// openSet answers an open-set query as {"agent", key: items, "next"}
// after reading its query parameters (all, after, limit).
func (s *Server) openSet(w http.ResponseWriter, r *http.Request, key string, query func(agent string, q gateway.OpenSetQuery) (any, string, error)) {
	agent, err := s.agentOf(r, r.PathValue("agent"))
	if err != nil {
		writeError(w, http.StatusForbidden, gateway.CodePermission, err.Error())
		return
	}
	q, err := openSetQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, gateway.CodeInvalid, err.Error())
		return
	}
	agent = s.relay.Book().ActorID(agent)
	if _, authenticated := principal(r); !authenticated && r.Header.Get("X-Crosstalk-Agent") != "" {
		// The agent itself asks on a relay without tokens (a token's
		// principal is seen by the gate): activity, as for deliveries.
		s.relay.Touch(agent)
	}
	items, next, err := query(agent, q)
	if err != nil {
		writeError(w, http.StatusInternalServerError, gateway.CodeInternal, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"agent": agent, key: items, "next": next})
}

// maxAfter bounds an event id a client names: the after parameter of an
// open-set query, the event_id of a notice.
const maxAfter = 128

// openSetQuery reads all (1, true, 0, false or empty), after and limit.
func openSetQuery(r *http.Request) (gateway.OpenSetQuery, error) {
	var q gateway.OpenSetQuery
	switch v := r.URL.Query().Get("all"); v {
	case "", "0", "false":
	case "1", "true":
		q.All = true
	default:
		return q, fmt.Errorf("all must be 1 or 0, got %q", v)
	}
	limit, err := queryInt(r, "limit")
	if err != nil {
		return q, err
	}
	q.Limit = int(min(limit, maxPage))
	q.After = r.URL.Query().Get("after")
	if len(q.After) > maxAfter {
		return q, fmt.Errorf("after is an event id, at most %d bytes", maxAfter)
	}
	return q, nil
}

// heartbeatAgent is POST /v1/agents/{agent}/heartbeat: records a
// heartbeat in the liveness projection (BeadBoard §4.2, package liveness)
// and answers the agent's status.
func (s *Server) heartbeatAgent(w http.ResponseWriter, r *http.Request) {
	agent, err := s.agentOf(r, r.PathValue("agent"))
	if err != nil {
		writeError(w, http.StatusForbidden, gateway.CodePermission, err.Error())
		return
	}
	agent = s.relay.Book().ActorID(agent)
	st, err := s.relay.Heartbeat(r.Context(), agent)
	if err != nil {
		s.log.Error("heartbeat failed", "agent", agent, "err", err)
		writeError(w, http.StatusInternalServerError, gateway.CodeInternal, "heartbeat: ledger failure")
		return
	}
	writeJSON(w, http.StatusOK, gateway.Presence{ID: agent, LastSeen: st.LastSeen, Liveness: st.Liveness})
}

// notifyBody is the body of POST /v1/agents/{agent}/notify.
type notifyBody struct {
	Group   string `json:"group"`
	EventID string `json:"event_id"`
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// notifyAgent is POST /v1/agents/{agent}/notify: a harness host (`crosstalk
// harness` against this relay) records a delivery failure for its agent.
// Only the kinds delivery_failed and harness_failed are accepted.
func (s *Server) notifyAgent(w http.ResponseWriter, r *http.Request) {
	agent, err := s.agentOf(r, r.PathValue("agent"))
	if err != nil {
		writeError(w, http.StatusForbidden, gateway.CodePermission, err.Error())
		return
	}
	var b notifyBody
	if err := readJSON(r, &b, false); err != nil {
		badBody(w, err)
		return
	}
	if b.Kind != "delivery_failed" && b.Kind != "harness_failed" {
		writeError(w, http.StatusBadRequest, gateway.CodeInvalid, "kind must be delivery_failed or harness_failed")
		return
	}
	if strings.TrimSpace(b.Group) == "" {
		writeError(w, http.StatusBadRequest, gateway.CodeInvalid, "group is required")
		return
	}
	// The group is a name as a {group} path value is (docs/security.md,
	// "Identifiers"): in NFC, and refused with an invisible, bidi or
	// control character, so that no notice creates a group that looks
	// like another.
	group, err := normalizeGroup(r, s.relay.Store(), b.Group)
	if err != nil {
		writeError(w, http.StatusBadRequest, string(envelope.CodeAddress), "group: "+err.Error())
		return
	}
	if strings.TrimSpace(group) != group {
		// No envelope's context has one (it is trimmed): "proj " would
		// be a group listed as proj that only notices reach.
		writeError(w, http.StatusBadRequest, string(envelope.CodeAddress), fmt.Sprintf("group %q has surrounding space", group))
		return
	}
	if len(b.EventID) > maxAfter {
		writeError(w, http.StatusBadRequest, gateway.CodeInvalid, fmt.Sprintf("event_id is an event id, at most %d bytes", maxAfter))
		return
	}
	if err := s.relay.NotifyAgent(r.Context(), agent, group, b.EventID, b.Kind, b.Message); err != nil {
		writeError(w, http.StatusServiceUnavailable, gateway.CodeUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "recorded"})
}
