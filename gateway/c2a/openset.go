package c2a

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/client"
)

// Owed calls Relay.Owed.
func (l *Local) Owed(ctx context.Context, agent string, q gateway.OpenSetQuery) (gateway.Page[gateway.Delivery], error) {
	return l.Relay.Owed(ctx, agent, q)
}

// WaitingOn calls Relay.WaitingOn.
func (l *Local) WaitingOn(ctx context.Context, agent string, q gateway.OpenSetQuery) (gateway.Page[gateway.Waiting], error) {
	return l.Relay.WaitingOn(ctx, agent, q)
}

// Owed reads GET /v1/agents/{agent}/owe.
func (rm *Remote) Owed(ctx context.Context, agent string, q gateway.OpenSetQuery) (gateway.Page[gateway.Delivery], error) {
	return openSet[gateway.Delivery](ctx, rm, agent, "owe", q)
}

// WaitingOn reads GET /v1/agents/{agent}/waiting.
func (rm *Remote) WaitingOn(ctx context.Context, agent string, q gateway.OpenSetQuery) (gateway.Page[gateway.Waiting], error) {
	return openSet[gateway.Waiting](ctx, rm, agent, "waiting", q)
}

// openSet reads one page of GET /v1/agents/{agent}/{key}: {key: items,
// "next"}.
func openSet[T any](ctx context.Context, rm *Remote, agent, key string, q gateway.OpenSetQuery) (gateway.Page[T], error) {
	v := url.Values{}
	if q.All {
		v.Set("all", "1")
	}
	if q.After != "" {
		v.Set("after", q.After)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var res map[string]json.RawMessage
	if err := rm.do(ctx, client.Request{Method: "GET", Path: "/v1/agents/" + client.PathSegment(agent) + "/" + key + "?" + v.Encode(), Agent: agent, Retry: true}, &res); err != nil {
		return gateway.Page[T]{}, err
	}
	var p gateway.Page[T]
	if err := json.Unmarshal(res[key], &p.Items); err != nil {
		return p, fmt.Errorf("c2a: the relay's %s list: %w", key, err)
	}
	if n, ok := res["next"]; ok {
		if err := json.Unmarshal(n, &p.Next); err != nil {
			return p, fmt.Errorf("c2a: the relay's %s list: %w", key, err)
		}
	}
	return p, nil
}
