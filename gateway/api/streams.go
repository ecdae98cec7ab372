package api

import (
	"fmt"
	"net/http"
	"net/url"
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
	ctx, done, ok := s.openStream(w, r)
	if !ok {
		return
	}
	defer done()
	out, ok := StartSSE(w)
	if !ok {
		return
	}
	ch := make(chan Next[ledger.Event])
	go func() {
		defer close(ch)
		Forward(ctx, s.relay.Store().Follow(ctx, r.PathValue("group"), since), ch)
	}()
	tick := time.NewTicker(s.heartbeat)
	defer tick.Stop()
	for {
		select {
		case it, ok := <-ch:
			if !ok {
				return
			}
			if it.Err != nil {
				out.JSON("", "error", apiError{Code: "daemon_unavailable", Message: it.Err.Error()})
				return
			}
			if out.JSON(strconv.FormatInt(it.V.Seq, 10), "event", it.V) != nil {
				return
			}
		case <-tick.C:
			if out.Comment("heartbeat") != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// cursorVector is the resume point of an agent stream across groups:
// "group:seq,group:seq", sorted by group. It is the SSE id of every
// delivery, so Last-Event-ID resumes every group where it stopped. A group
// is any envelope context, so `%`, `,` and control characters in its name
// are percent-encoded: the id stays one SSE line and splits back into the
// same groups.
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
		group, err := url.PathUnescape(part[:i])
		if err != nil {
			return nil, fmt.Errorf("bad resume point %q", part)
		}
		v[group] = n
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
		for j := 0; j < len(k); j++ {
			if c := k[j]; c == '%' || c == ',' || c < ' ' || c == 0x7f {
				fmt.Fprintf(&b, "%%%02X", c)
			} else {
				b.WriteByte(c)
			}
		}
		fmt.Fprintf(&b, ":%d", v[k])
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
	ctx, done, ok := s.openStream(w, r)
	if !ok {
		return
	}
	defer done()
	out, ok := StartSSE(w)
	if !ok {
		return
	}
	ch := make(chan Next[gateway.Delivery])
	following := map[string]bool{}
	follow := func(group string) {
		following[group] = true
		go Forward(ctx, s.relay.FollowDeliveries(ctx, agent, group, vec[group]), ch)
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
			if it.Err != nil {
				out.JSON("", "error", apiError{Code: "daemon_unavailable", Message: it.Err.Error()})
				return
			}
			vec[it.V.Group] = it.V.Seq
			if out.JSON(vec.String(), "delivery", it.V) != nil {
				return
			}
		case <-poll.C:
			discover()
		case <-tick.C:
			s.relay.Touch(agent)
			if out.Comment("heartbeat") != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}
