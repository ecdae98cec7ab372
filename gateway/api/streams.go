package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/internal/sse"
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
	out, ok := sse.Start(w)
	if !ok {
		return
	}
	sse.Pump(ctx, out, s.heartbeat, s.relay.Store().Follow(ctx, r.PathValue("group"), since),
		func(ev ledger.Event) error { return out.JSON(strconv.FormatInt(ev.Seq, 10), "event", ev) },
		func(err error) { out.JSON("", "error", apiError{Code: gateway.CodeUnavailable, Message: err.Error()}) },
		nil)
}

// agentStream is GET /v1/agents/{agent}/stream: the agent's deliveries,
// stored then live, as SSE. Over all groups it follows the ledger's log
// (Relay.FollowAgent): the id of each delivery is its ledger position,
// and the stream resumes after since_pos or Last-Event-ID — one number
// whatever the number of groups. With ?group=G it follows that group
// (Relay.FollowDeliveries): the id is the event's seq, and the stream
// resumes after since_seq or Last-Event-ID. An id of the old form, a list
// of group:seq cursors, is refused with 400: its client must start again
// from a position (docs/agents.md).
func (s *Server) agentStream(w http.ResponseWriter, r *http.Request) {
	agent, err := s.agentOf(r, r.PathValue("agent"))
	if err != nil {
		writeError(w, http.StatusForbidden, gateway.CodePermission, err.Error())
		return
	}
	only, err := s.queryGroup(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, string(envelope.CodeAddress), err.Error())
		return
	}
	param := "since_pos"
	if only != "" {
		param = "since_seq"
	}
	since, err := queryInt(r, param)
	if err != nil {
		writeError(w, http.StatusBadRequest, gateway.CodeInvalid, err.Error())
		return
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		if since, err = parseResume(last, strings.TrimPrefix(param, "since_")); err != nil {
			writeError(w, http.StatusBadRequest, gateway.CodeInvalid, err.Error())
			return
		}
	}
	ctx, done, ok := s.openStream(w, r)
	if !ok {
		return
	}
	defer done()
	out, ok := sse.Start(w)
	if !ok {
		return
	}
	seq := s.relay.FollowAgent(ctx, agent, since)
	id := func(d gateway.Delivery) int64 { return d.Position }
	if only != "" {
		seq = s.relay.FollowDeliveries(ctx, agent, only, since)
		id = func(d gateway.Delivery) int64 { return d.Seq }
	}
	// Each delivery is encoded into buf, which the stream keeps: every
	// connected harness encodes every envelope, so the encoding is
	// Delivery.AppendJSON's (json.Marshal's bytes without its reflection),
	// and out.Event copies buf before the next one.
	var buf []byte
	sse.Pump(ctx, out, s.heartbeat, seq,
		func(d gateway.Delivery) error {
			// Encoding is stream work too (Relay.StreamWork); the
			// write, which may wait for the client, is not.
			release, err := s.relay.StreamWork(ctx)
			if err != nil {
				return err
			}
			buf, err = d.AppendJSON(buf[:0])
			release()
			if err != nil {
				return err
			}
			err = out.Event(strconv.FormatInt(id(d), 10), "delivery", buf)
			if cap(buf) > maxStreamBuf {
				buf = nil // one large delivery does not pin its buffer
			}
			return err
		},
		func(err error) { out.JSON("", "error", apiError{Code: gateway.CodeUnavailable, Message: err.Error()}) },
		func() { s.relay.Touch(agent) })
}

// maxStreamBuf bounds the encoding buffer an agent stream keeps between
// deliveries.
const maxStreamBuf = 64 << 10

// parseResume parses the Last-Event-ID of an agent stream: a position
// (or, with ?group, a seq) — what must be named in what's error.
func parseResume(last, what string) (int64, error) {
	n, err := strconv.ParseInt(last, 10, 64)
	switch {
	case err == nil && n >= 0 && strconv.FormatInt(n, 10) == last:
		return n, nil
	case strings.Contains(last, ":"):
		return 0, errors.New("Last-Event-ID is a list of group:seq cursors, which this relay no longer uses: reconnect without it, or with since_pos (docs/agents.md)")
	}
	return 0, fmt.Errorf("Last-Event-ID must be a %s", what)
}
