package c2a

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// Remote is a Backend over a relay's HTTP API (DESIGN §5.6). Reads and
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
var errNotServed = errors.New("c2a: the relay does not serve this endpoint")

// StatusError is an HTTP answer the relay gave without a JSON error body.
type StatusError struct {
	Status int
	Body   string
}

// Error returns the relay's status and error.
func (e *StatusError) Error() string {
	return fmt.Sprintf("c2a: relay answered %d: %s", e.Status, strings.TrimSpace(e.Body))
}

func (rm *Remote) client() *http.Client {
	if rm.Client != nil {
		return rm.Client
	}
	return http.DefaultClient
}

func (rm *Remote) log() *slog.Logger {
	if rm.Logger != nil {
		return rm.Logger
	}
	return slog.New(slog.DiscardHandler)
}

type request struct {
	method, path, agent string
	body                []byte
	contentType         string
	idempotencyKey      string
	retry               bool
}

// do performs a request and decodes a 200 JSON answer into out. Errors:
// *gateway.ActionError for {"error":{code,message}} answers of /v1,
// errNotServed for 404 without a JSON error, *StatusError otherwise.
func (rm *Remote) do(ctx context.Context, rq request, out any) error {
	retries := rm.Retries
	if retries == 0 {
		retries = 3
	}
	if !rq.retry || retries < 0 {
		retries = 0
	}
	var err error
	for attempt := 1; ; attempt++ {
		var status int
		var body []byte
		status, body, err = rm.once(ctx, rq)
		retryable := err != nil || status == http.StatusTooManyRequests || status >= 500
		if err == nil && !retryable {
			return decodeAnswer(status, body, out)
		}
		if err == nil {
			err = decodeAnswer(status, body, out)
		}
		if attempt > retries || ctx.Err() != nil {
			return err
		}
		wait := retryDelay(attempt, 200*time.Millisecond, 5*time.Second)
		rm.log().Warn("relay call failed; retrying", "path", rq.path, "attempt", attempt, "wait", wait, "err", err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("c2a: %s %s: %w", rq.method, rq.path, ctx.Err())
		}
	}
}

func (rm *Remote) once(ctx context.Context, rq request) (int, []byte, error) {
	var body io.Reader
	if rq.body != nil {
		body = bytes.NewReader(rq.body)
	}
	req, err := http.NewRequestWithContext(ctx, rq.method, strings.TrimRight(rm.URL, "/")+rq.path, body)
	if err != nil {
		return 0, nil, fmt.Errorf("c2a: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if rq.body != nil {
		ct := rq.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if rm.Token != "" {
		req.Header.Set("Authorization", "Bearer "+rm.Token)
	}
	if rq.agent != "" {
		req.Header.Set("X-Crosstalk-Agent", rq.agent)
	}
	if rq.idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", rq.idempotencyKey)
	}
	res, err := rm.client().Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("c2a: relay %s: %w", rm.URL, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("c2a: reading the relay's answer: %w", err)
	}
	return res.StatusCode, b, nil
}

func decodeAnswer(status int, body []byte, out any) error {
	if status == http.StatusOK {
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("c2a: bad answer from the relay: %w", err)
		}
		return nil
	}
	var ae struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Line    int    `json:"line"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &ae) == nil && ae.Error.Code != "" {
		if envelope.Code(ae.Error.Code).Valid() && status != http.StatusNotFound {
			return &gateway.Rejection{Code: envelope.Code(ae.Error.Code), Reason: ae.Error.Message, Line: ae.Error.Line}
		}
		return &gateway.ActionError{Code: ae.Error.Code, Reason: ae.Error.Message}
	}
	if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
		return errNotServed
	}
	return &StatusError{Status: status, Body: string(body)}
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
		var res struct {
			Deliveries []gateway.Delivery `json:"deliveries"`
		}
		if err := rm.do(ctx, request{method: "GET", path: "/v1/agents/" + esc(agent) + "/deliveries?" + q.Encode(), agent: agent, retry: true}, &res); err != nil {
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

// Follow reads the agent's SSE stream GET /v1/agents/{agent}/stream for
// one group.
func (rm *Remote) Follow(ctx context.Context, agent, group string, sinceSeq int64) iter.Seq2[gateway.Delivery, error] {
	return func(yield func(gateway.Delivery, error) bool) {
		q := url.Values{"group": {group}, "since_seq": {strconv.FormatInt(sinceSeq, 10)}}
		req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimRight(rm.URL, "/")+"/v1/agents/"+esc(agent)+"/stream?"+q.Encode(), nil)
		if err != nil {
			yield(gateway.Delivery{}, fmt.Errorf("c2a: %w", err))
			return
		}
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("X-Crosstalk-Agent", agent)
		if rm.Token != "" {
			req.Header.Set("Authorization", "Bearer "+rm.Token)
		}
		res, err := rm.client().Do(req)
		if err != nil {
			if ctx.Err() == nil {
				yield(gateway.Delivery{}, fmt.Errorf("c2a: relay stream: %w", err))
			}
			return
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
			yield(gateway.Delivery{}, decodeAnswer(res.StatusCode, b, nil))
			return
		}
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		var event string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				event = ""
			case strings.HasPrefix(line, "event: "):
				event = line[len("event: "):]
			case strings.HasPrefix(line, "data: ") && event == "delivery":
				var d gateway.Delivery
				if err := json.Unmarshal([]byte(line[len("data: "):]), &d); err != nil {
					yield(gateway.Delivery{}, fmt.Errorf("c2a: bad delivery on the stream: %w", err))
					return
				}
				if !yield(d, nil) {
					return
				}
			case strings.HasPrefix(line, "data: ") && event == "error":
				yield(gateway.Delivery{}, fmt.Errorf("c2a: relay stream error: %s", line[len("data: "):]))
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		err = sc.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		yield(gateway.Delivery{}, fmt.Errorf("c2a: relay stream ended: %w", err))
	}
}

// Groups reads GET /v1/groups.
func (rm *Remote) Groups(ctx context.Context) ([]ledger.Group, error) {
	var res struct {
		Groups []ledger.Group `json:"groups"`
	}
	err := rm.do(ctx, request{method: "GET", path: "/v1/groups", retry: true}, &res)
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
		if err := rm.do(ctx, request{method: "GET", path: "/v1/groups/" + esc(group) + "/events?" + q.Encode(), retry: true}, &res); err != nil {
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
	body, _ := json.Marshal(map[string]string{"signal": req.Signal, "note": req.Note})
	var res gateway.ActionResult
	err := rm.do(ctx, request{method: "POST", path: "/v1/groups/" + esc(req.Group) + "/events/" + esc(req.EventID) + "/" + esc(string(req.Action)),
		agent: req.Actor, body: body}, &res)
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
			Status    string `json:"status"`
		} `json:"results"`
	}
	err := rm.do(ctx, request{method: "POST", path: "/crosstalk/receive", agent: agent, body: text,
		contentType: "text/plain; charset=utf-8", idempotencyKey: idempotencyKey, retry: true}, &res)
	if err != nil {
		return SendResult{}, err
	}
	if len(res.Results) == 0 {
		return SendResult{}, errors.New("c2a: the relay returned no receipt")
	}
	r := res.Results[0]
	return SendResult{Message: r.Message, EventID: r.EventID, Group: r.GroupID, Seq: r.Seq, Duplicate: r.Duplicate, Status: r.Status}, nil
}

// Cursor reads the delivery cursor of GET /v1/agents/{agent}/cursors; a
// relay older than delivery cursors resumed channels at the read cursor,
// and so does this; on a relay without the endpoint, it finds the agent's
// last chat.read event of the group.
func (rm *Remote) Cursor(ctx context.Context, agent, group string) (int64, error) {
	var res struct {
		Cursors   map[string]int64 `json:"cursors"`
		Delivered map[string]int64 `json:"delivered"`
	}
	err := rm.do(ctx, request{method: "GET", path: "/v1/agents/" + esc(agent) + "/cursors", agent: agent, retry: true}, &res)
	if err == nil {
		if res.Delivered == nil {
			return res.Cursors[group], nil
		}
		return res.Delivered[group], nil
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
		if d, err := gateway.ParseData(ev); err == nil && strings.EqualFold(ev.By, agent) {
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

// Touch posts POST /v1/agents/{agent}/heartbeat; on a relay without it,
// it reads one delivery, which the relay counts as activity.
func (rm *Remote) Touch(ctx context.Context, agent string) error {
	err := rm.do(ctx, request{method: "POST", path: "/v1/agents/" + esc(agent) + "/heartbeat", agent: agent, body: []byte("{}")}, nil)
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
	err := rm.do(ctx, request{method: "GET", path: "/v1/agents", retry: true}, &res)
	if errors.Is(err, errNotServed) {
		return nil, fmt.Errorf("c2a: %w: GET /v1/agents (the relay's owner mounts it with api.Server.MountAgents)", err)
	}
	return res.Agents, err
}

// Notify posts POST /v1/agents/{agent}/notify; a relay without it only
// gets a log line here.
func (rm *Remote) Notify(ctx context.Context, agent, group, eventID, kind, message string) error {
	body, _ := json.Marshal(map[string]string{"group": group, "event_id": eventID, "kind": kind, "message": message})
	err := rm.do(ctx, request{method: "POST", path: "/v1/agents/" + esc(agent) + "/notify", agent: agent, body: body}, nil)
	if errors.Is(err, errNotServed) {
		rm.log().Warn("relay cannot record a notice", "agent", agent, "group", group, "event", eventID, "kind", kind, "message", message)
		return nil
	}
	return err
}
