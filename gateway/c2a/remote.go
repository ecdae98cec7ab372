package c2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/client"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// Remote is a Backend over a relay's HTTP API (docs/design.md §5.6). Reads and
// envelope sends are retried on network errors, 429 and 5xx with backoff
// (a send keeps its Idempotency-Key and message id, so it records once);
// actions are not retried.
type Remote struct {
	// URL is the relay's base URL, e.g. "http://127.0.0.1:7777".
	URL string
	// Token is the bearer token, "" when the relay has none.
	Token string
	// Client is the HTTP client; http.DefaultClient when nil.
	Client *http.Client
	// Retries is how often a retryable call is retried; 3 when zero,
	// none when negative.
	Retries int
	// Logger receives retries; nil discards them.
	Logger *slog.Logger
}

var _ Backend = (*Remote)(nil)

// errNotServed reports a 404 for an endpoint the relay may not mount.
var errNotServed = client.ErrNotServed

// StatusError is an HTTP answer the relay gave without a JSON error body.
type StatusError = client.StatusError

func (rm *Remote) client() *client.Client {
	return &client.Client{URL: rm.URL, Token: rm.Token, HTTP: rm.Client, Retries: rm.Retries, Logger: rm.Logger}
}

func (rm *Remote) log() *slog.Logger {
	if rm.Logger != nil {
		return rm.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// do performs a request and decodes a 200 JSON answer into out. Errors:
// *gateway.Rejection for an envelope error code (E-…), *gateway.ActionError
// for other {"error":{code,message}} answers, errNotServed for 404 without
// a JSON error, *StatusError otherwise (client.Client.Do).
func (rm *Remote) do(ctx context.Context, rq client.Request, out any) error {
	err := rm.client().Do(ctx, rq, out)
	var ce *client.Error
	if !errors.As(err, &ce) {
		return err
	}
	if envelope.Code(ce.Code).Valid() && ce.Status != http.StatusNotFound {
		return &gateway.Rejection{Code: envelope.Code(ce.Code), Reason: ce.Message, Line: ce.Line}
	}
	return &gateway.ActionError{Code: ce.Code, Reason: ce.Message}
}

func esc(s string) string { return url.PathEscape(s) }

// Deliveries reads GET /v1/agents/{agent}/deliveries.
func (rm *Remote) Deliveries(ctx context.Context, agent, group string, sinceSeq int64, limit int) ([]gateway.Delivery, error) {
	var out []gateway.Delivery
	for {
		q := url.Values{}
		if group != "" {
			q.Set("group", group)
		}
		if sinceSeq > 0 {
			q.Set("since_seq", strconv.FormatInt(sinceSeq, 10))
		}
		page := 1000
		if limit > 0 {
			page = min(page, limit-len(out))
		}
		q.Set("limit", strconv.Itoa(page))
		if gateway.IsPerEvent(ctx) {
			q.Set("per_event", "1")
		}
		var res struct {
			Deliveries []gateway.Delivery `json:"deliveries"`
		}
		if err := rm.do(ctx, client.Request{Method: "GET", Path: "/v1/agents/" + client.PathSegment(agent) + "/deliveries?" + q.Encode(), Agent: agent, Retry: true}, &res); err != nil {
			return nil, err
		}
		out = append(out, res.Deliveries...)
		// Pages are only well defined within one group (seq is per group).
		if group == "" || len(res.Deliveries) < page || (limit > 0 && len(out) >= limit) {
			return out, nil
		}
		sinceSeq = res.Deliveries[len(res.Deliveries)-1].Seq
	}
}

// Delivery reads GET /v1/agents/{agent}/deliveries?event_id=ID: the
// agent's delivery of that one event. A relay from before event_id
// answers with the list instead (no event_id in its answer); then every
// delivery is read and searched.
func (rm *Remote) Delivery(ctx context.Context, agent, group, id string) (gateway.Delivery, bool, error) {
	q := url.Values{"event_id": {id}}
	if group != "" {
		q.Set("group", group)
	}
	var res struct {
		EventID    string             `json:"event_id"`
		Deliveries []gateway.Delivery `json:"deliveries"`
	}
	if err := rm.do(ctx, client.Request{Method: "GET", Path: "/v1/agents/" + client.PathSegment(agent) + "/deliveries?" + q.Encode(), Agent: agent, Retry: true}, &res); err != nil {
		return gateway.Delivery{}, false, err
	}
	if res.EventID != id {
		return searchDeliveries(ctx, rm, agent, group, id)
	}
	for _, d := range res.Deliveries {
		if d.EventID == id {
			return d, true, nil
		}
	}
	return gateway.Delivery{}, false, nil
}

// DeliveryPage reads GET /v1/agents/{agent}/deliveries?before_pos=P (or
// after_pos when cur.After is set): one keyset page of the agent's
// deliveries over every group. Window is left empty: the answer does
// not carry the events the page was computed from.
func (rm *Remote) DeliveryPage(ctx context.Context, agent string, cur gateway.LogCursor, limit int) (gateway.DeliveryPage, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if cur.After > 0 {
		q.Set("after_pos", strconv.FormatInt(cur.After, 10))
	} else {
		q.Set("before_pos", strconv.FormatInt(cur.Before, 10))
	}
	var res struct {
		Deliveries []gateway.Delivery `json:"deliveries"`
		Older      int64              `json:"older_pos"`
		Newer      int64              `json:"newer_pos"`
	}
	if err := rm.do(ctx, client.Request{Method: "GET", Path: "/v1/agents/" + client.PathSegment(agent) + "/deliveries?" + q.Encode(), Agent: agent, Retry: true}, &res); err != nil {
		return gateway.DeliveryPage{}, err
	}
	return gateway.DeliveryPage{Deliveries: res.Deliveries, Older: res.Older, Newer: res.Newer}, nil
}

// Follow reads the agent's SSE stream GET /v1/agents/{agent}/stream for
// one group.
func (rm *Remote) Follow(ctx context.Context, agent, group string, sinceSeq int64) iter.Seq2[gateway.Delivery, error] {
	return rm.stream(ctx, agent, url.Values{"group": {group}, "since_seq": {strconv.FormatInt(sinceSeq, 10)}})
}

// FollowAll reads the agent's SSE stream GET /v1/agents/{agent}/stream
// over every group, after a ledger position.
func (rm *Remote) FollowAll(ctx context.Context, agent string, afterPos int64) iter.Seq2[gateway.Delivery, error] {
	return rm.stream(ctx, agent, url.Values{"since_pos": {strconv.FormatInt(afterPos, 10)}})
}

// stream reads GET /v1/agents/{agent}/stream?q; its end, an `event:
// error` (*client.StreamError) or a refusal is yielded as the last error.
func (rm *Remote) stream(ctx context.Context, agent string, q url.Values) iter.Seq2[gateway.Delivery, error] {
	return func(yield func(gateway.Delivery, error) bool) {
		stopped := errors.New("stopped")
		err := rm.client().Stream(ctx, "/v1/agents/"+client.PathSegment(agent)+"/stream?"+q.Encode(), agent, func(event string, data []byte) error {
			if event != "delivery" {
				return nil
			}
			var d gateway.Delivery
			if err := json.Unmarshal(data, &d); err != nil {
				return fmt.Errorf("c2a: bad delivery on the stream: %w", err)
			}
			if !yield(d, nil) {
				return stopped
			}
			return nil
		})
		if errors.Is(err, stopped) || ctx.Err() != nil {
			return
		}
		yield(gateway.Delivery{}, fmt.Errorf("c2a: relay stream: %w", rm.mapped(err)))
	}
}

// mapped is err with the relay's error answers as do returns them.
func (rm *Remote) mapped(err error) error {
	var ce *client.Error
	if errors.As(err, &ce) {
		return &gateway.ActionError{Code: ce.Code, Reason: ce.Message}
	}
	return err
}

// Groups reads GET /v1/groups.
func (rm *Remote) Groups(ctx context.Context) ([]ledger.Group, error) {
	var res struct {
		Groups []ledger.Group `json:"groups"`
	}
	err := rm.do(ctx, client.Request{Method: "GET", Path: "/v1/groups", Retry: true}, &res)
	return res.Groups, err
}

// Events reads GET /v1/groups/{group}/events.
func (rm *Remote) Events(ctx context.Context, group string, sinceSeq int64, kinds []string, limit int) ([]ledger.Event, error) {
	var out []ledger.Event
	for {
		q := url.Values{"since_seq": {strconv.FormatInt(sinceSeq, 10)}}
		if len(kinds) > 0 {
			q.Set("kinds", strings.Join(kinds, ","))
		}
		page := 1000
		if limit > 0 {
			page = min(page, limit-len(out))
		}
		q.Set("limit", strconv.Itoa(page))
		var res struct {
			Events  []ledger.Event `json:"events"`
			NextSeq int64          `json:"next_seq"`
		}
		if err := rm.do(ctx, client.Request{Method: "GET", Path: "/v1/groups/" + client.PathSegment(group) + "/events?" + q.Encode(), Retry: true}, &res); err != nil {
			return nil, err
		}
		out = append(out, res.Events...)
		if len(res.Events) < page || (limit > 0 && len(out) >= limit) {
			return out, nil
		}
		sinceSeq = res.NextSeq
	}
}

// Act posts POST /v1/groups/{group}/events/{id}/{action}.
func (rm *Remote) Act(ctx context.Context, req gateway.ActionRequest) (gateway.ActionResult, error) {
	body, _ := json.Marshal(map[string]any{"signal": req.Signal, "note": req.Note, "takeover_stale": req.TakeoverStale})
	var res gateway.ActionResult
	err := rm.do(ctx, client.Request{Method: "POST", Path: "/v1/groups/" + client.PathSegment(req.Group) + "/events/" + esc(req.EventID) + "/" + esc(string(req.Action)),
		Agent: req.Actor, Body: body}, &res)
	return res, err
}

// Ingest posts the envelope to POST /crosstalk/receive.
func (rm *Remote) Ingest(ctx context.Context, agent string, text []byte, idempotencyKey string) (SendResult, error) {
	var res struct {
		Results []struct {
			Message   string `json:"message"`
			EventID   string `json:"event_id"`
			GroupID   string `json:"group_id"`
			Seq       int64  `json:"seq"`
			Duplicate bool   `json:"duplicate"`
			Differs   bool   `json:"differs"`
			Status    string `json:"status"`
		} `json:"results"`
	}
	err := rm.do(ctx, client.Request{Method: "POST", Path: "/crosstalk/receive", Agent: agent, Body: text,
		ContentType: "text/plain; charset=utf-8", IdempotencyKey: idempotencyKey, Retry: true}, &res)
	if err != nil {
		return SendResult{}, err
	}
	if len(res.Results) == 0 {
		return SendResult{}, errors.New("c2a: the relay returned no receipt")
	}
	r := res.Results[0]
	return SendResult{Message: r.Message, EventID: r.EventID, Group: r.GroupID, Seq: r.Seq, Duplicate: r.Duplicate, Differs: r.Differs, Status: r.Status}, nil
}

// Cursor reads the delivery cursor of GET /v1/agents/{agent}/cursors; a
// relay older than delivery cursors resumed channels at the read cursor,
// and so does this; on a relay without the endpoint, it finds the agent's
// last chat.read event of the group.
func (rm *Remote) Cursor(ctx context.Context, agent, group string) (int64, error) {
	cs, err := rm.cursors(ctx, agent)
	if err == nil {
		return cs[group], nil
	}
	if !errors.Is(err, errNotServed) {
		return 0, err
	}
	reads, err := rm.Events(ctx, group, 0, []string{gateway.KindRead}, 0)
	if err != nil {
		return 0, err
	}
	last := ""
	for _, ev := range reads {
		if d, err := gateway.ParseData(ev); err == nil && attention.SameActor(ev.By, agent) {
			last = d.EventID
		}
	}
	if last == "" {
		return 0, nil
	}
	all, err := rm.Events(ctx, group, 0, nil, 0)
	if err != nil {
		return 0, err
	}
	for _, ev := range all {
		if ev.ID == last {
			return ev.Seq, nil
		}
	}
	return 0, nil
}

// Cursors reads GET /v1/agents/{agent}/cursors once: the delivery
// cursors of every group. On a relay without that endpoint it reads each
// group's as Cursor does.
func (rm *Remote) Cursors(ctx context.Context, agent string) (map[string]int64, error) {
	all, err := rm.cursors(ctx, agent)
	if !errors.Is(err, errNotServed) {
		return all, err
	}
	return cursorPerGroup(ctx, rm, agent)
}

// Resume reads GET /v1/agents/{agent}/cursors?resume=1: the delivery
// cursors and, from the same read, the position a channel over every
// group follows from (resume_after). A relay that does not compute one
// answers without it, and Resume returns position 0 (the whole log, as
// before); on a relay without the endpoint it returns Cursors' answer and
// position 0.
func (rm *Remote) Resume(ctx context.Context, agent string) (map[string]int64, int64, error) {
	cs, pos, err := rm.readCursors(ctx, agent, "?resume=1")
	if errors.Is(err, errNotServed) {
		cs, err = cursorPerGroup(ctx, rm, agent)
		return cs, 0, err
	}
	return cs, pos, err
}

// cursors reads GET /v1/agents/{agent}/cursors: the delivery cursors by
// group, or, from a relay that predates them, the read cursors.
func (rm *Remote) cursors(ctx context.Context, agent string) (map[string]int64, error) {
	cs, _, err := rm.readCursors(ctx, agent, "")
	return cs, err
}

// readCursors reads GET /v1/agents/{agent}/cursors with query q: the
// delivery cursors (the read cursors from a relay that predates them)
// and resume_after (0 when absent).
func (rm *Remote) readCursors(ctx context.Context, agent, q string) (map[string]int64, int64, error) {
	var res struct {
		Cursors     map[string]int64 `json:"cursors"`
		Delivered   map[string]int64 `json:"delivered"`
		ResumeAfter int64            `json:"resume_after"`
	}
	if err := rm.do(ctx, client.Request{Method: "GET", Path: "/v1/agents/" + client.PathSegment(agent) + "/cursors" + q, Agent: agent, Retry: true}, &res); err != nil {
		return nil, 0, err
	}
	if res.Delivered == nil {
		return res.Cursors, 0, nil
	}
	return res.Delivered, max(res.ResumeAfter, 0), nil
}

// Touch posts POST /v1/agents/{agent}/heartbeat; on a relay without it,
// it reads one delivery, which the relay counts as activity.
func (rm *Remote) Touch(ctx context.Context, agent string) error {
	err := rm.do(ctx, client.Request{Method: "POST", Path: "/v1/agents/" + client.PathSegment(agent) + "/heartbeat", Agent: agent, Body: []byte("{}")}, nil)
	if errors.Is(err, errNotServed) {
		_, err = rm.Deliveries(ctx, agent, "", 0, 1)
	}
	return err
}

// Agents reads GET /v1/agents.
func (rm *Remote) Agents(ctx context.Context) ([]gateway.AgentStatus, error) {
	var res struct {
		Agents []gateway.AgentStatus `json:"agents"`
	}
	err := rm.do(ctx, client.Request{Method: "GET", Path: "/v1/agents", Retry: true}, &res)
	if errors.Is(err, errNotServed) {
		return nil, fmt.Errorf("c2a: %w: GET /v1/agents (the relay's owner mounts it with api.Server.MountAgents)", err)
	}
	return res.Agents, err
}

// Notify posts POST /v1/agents/{agent}/notify; a relay without it only
// gets a log line here.
func (rm *Remote) Notify(ctx context.Context, agent, group, eventID, kind, message string) error {
	body, _ := json.Marshal(map[string]string{"group": group, "event_id": eventID, "kind": kind, "message": message})
	err := rm.do(ctx, client.Request{Method: "POST", Path: "/v1/agents/" + client.PathSegment(agent) + "/notify", Agent: agent, Body: body}, nil)
	if errors.Is(err, errNotServed) {
		rm.log().Warn("relay cannot record a notice", "agent", agent, "group", group, "event", eventID, "kind", kind, "message", message)
		return nil
	}
	return err
}
