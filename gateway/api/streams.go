package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

type (
	ledgerGroup = ledger.Group
	ledgerEvent = ledger.Event
)

// sse writes Server-Sent Events.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func startSSE(w http.ResponseWriter) (*sse, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "internal", "streaming unsupported")
		return nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": connected\n\n")
	f.Flush()
	return &sse{w: w, f: f}, true
}

func (s *sse) event(id, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(s.w, "id: %s\nevent: %s\ndata: %s\n\n", id, name, b); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

func (s *sse) comment(text string) error {
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

// streamContext ends when the request ends or the server closes its
// streams.
func (s *Server) streamContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.streams, cancel)
	return ctx, func() { stop(); cancel() }
}

// groupStream is GET /v1/groups/{group}/stream: the group's events with
// seq > since_seq (or > Last-Event-ID), then live, as SSE with id = seq
// and heartbeats.
func (s *Server) groupStream(w http.ResponseWriter, r *http.Request) {
	since, err := queryInt(r, "since_seq")
	if err != nil {
		writeError(w, http.StatusBadRequest, gateway.CodeInvalid, err.Error())
		return
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, gateway.CodeInvalid, "Last-Event-ID must be a seq")
			return
		}
		since = n
	}
	ctx, cancel := s.streamContext(r)
	defer cancel()
	out, ok := startSSE(w)
	if !ok {
		return
	}
	type item struct {
		ev  ledger.Event
		err error
	}
	ch := make(chan item)
	go func() {
		defer close(ch)
		for ev, err := range s.relay.Store().Follow(ctx, r.PathValue("group"), since) {
			select {
			case ch <- item{ev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	tick := time.NewTicker(s.heartbeat)
	defer tick.Stop()
	for {
		select {
		case it, ok := <-ch:
			if !ok {
				return
			}
			if it.err != nil {
				out.event("", "error", apiError{Code: "daemon_unavailable", Message: it.err.Error()})
				return
			}
			if out.event(strconv.FormatInt(it.ev.Seq, 10), "event", it.ev) != nil {
				return
			}
		case <-tick.C:
			if out.comment("heartbeat") != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// cursorVector is the resume point of an agent stream across groups:
// "group:seq,group:seq", sorted by group. It is the SSE id of every
// delivery, so Last-Event-ID resumes every group where it stopped.
type cursorVector map[string]int64

func parseVector(s string) (cursorVector, error) {
	v := cursorVector{}
	if s == "" {
		return v, nil
	}
	for _, part := range strings.Split(s, ",") {
		i := strings.LastIndexByte(part, ':')
		if i <= 0 {
			return nil, fmt.Errorf("bad resume point %q", part)
		}
		n, err := strconv.ParseInt(part[i+1:], 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("bad resume point %q", part)
		}
		v[part[:i]] = n
	}
	return v, nil
}

func (v cursorVector) String() string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s:%d", k, v[k])
	}
	return b.String()
}

// groupPoll is how often an agent stream over all groups looks for new
// groups.
const groupPoll = 2 * time.Second

// agentStream is GET /v1/agents/{agent}/stream[?group=G&since_seq=N]: the
// agent's deliveries, stored then live, as SSE. Over all groups, the id of
// each event is the cursor vector; Last-Event-ID resumes from it.
func (s *Server) agentStream(w http.ResponseWriter, r *http.Request) {
	agent, err := s.agentOf(r, r.PathValue("agent"))
	if err != nil {
		writeError(w, http.StatusForbidden, gateway.CodePermission, err.Error())
		return
	}
	vec, err := parseVector(r.Header.Get("Last-Event-ID"))
	if err != nil {
		writeError(w, http.StatusBadRequest, gateway.CodeInvalid, err.Error())
		return
	}
	only := r.URL.Query().Get("group")
	if since, err := queryInt(r, "since_seq"); err != nil {
		writeError(w, http.StatusBadRequest, gateway.CodeInvalid, err.Error())
		return
	} else if only != "" && since > vec[only] {
		vec[only] = since
	}
	ctx, cancel := s.streamContext(r)
	defer cancel()
	out, ok := startSSE(w)
	if !ok {
		return
	}
	type item struct {
		d   gateway.Delivery
		err error
	}
	ch := make(chan item)
	following := map[string]bool{}
	follow := func(group string) {
		following[group] = true
		since := vec[group]
		go func() {
			for d, err := range s.relay.FollowDeliveries(ctx, agent, group, since) {
				select {
				case ch <- item{d, err}:
				case <-ctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		}()
	}
	discover := func() {
		if only != "" {
			if !following[only] {
				follow(only)
			}
			return
		}
		gs, err := s.relay.Store().Groups(ctx)
		if err != nil {
			return
		}
		for _, g := range gs {
			if !following[g.ID] {
				follow(g.ID)
			}
		}
	}
	discover()
	tick := time.NewTicker(s.heartbeat)
	defer tick.Stop()
	poll := time.NewTicker(groupPoll)
	defer poll.Stop()
	for {
		select {
		case it := <-ch:
			if it.err != nil {
				out.event("", "error", apiError{Code: "daemon_unavailable", Message: it.err.Error()})
				return
			}
			vec[it.d.Group] = it.d.Seq
			if out.event(vec.String(), "delivery", it.d) != nil {
				return
			}
		case <-poll.C:
			discover()
		case <-tick.C:
			s.relay.Touch(agent)
			if out.comment("heartbeat") != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}
