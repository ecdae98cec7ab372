package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/gateway/reserve"
)

// registerScopes adds the reservation and liveness tools (BeadBoard
// §4–§5; docs/agents.md "Reservations", "Liveness") when the backend
// keeps them (c2a.Coordinator).
func (s *server) registerScopes(srv *mcp.Server) error {
	co, ok := s.opts.Backend.(c2a.Coordinator)
	if !ok {
		return nil
	}
	idem := &mcp.ToolAnnotations{IdempotentHint: true}
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}
	scopes := func(sc *jsonschema.Schema) {
		sc.MinItems, sc.MaxItems = ptr(1), ptr(reserve.MaxScopes)
	}
	return errors.Join(
		addTool(srv, s, &mcp.Tool{Name: "scope.reserve", Title: "Reserve path scopes", Annotations: idem,
			Description: "Reserve path scopes of the repository before editing them (\"src/auth/*\", \"docs/api.md\", \"src\"), " +
				"so other agents know you are working there. Reserving a scope you hold renews it. If another agent holds an " +
				"overlapping scope you are refused with its holder, scope and overlap class (exact or partial): do not edit " +
				"there; ask the holder, or pass takeoverStale when its holder is stale (no heartbeat for stale_after). " +
				"Release with scope.release when done."},
			map[string]func(*jsonschema.Schema){"scopes": scopes, "ttlSeconds": intRange(1, reserve.MaxTTL.Seconds()),
				"reason": lenRange(0, reserve.MaxReasonLen)},
			func(ctx context.Context, in reserveIn) (*mcp.CallToolResult, gateway.ReserveAnswer, error) {
				return s.reserve(ctx, co, in)
			}),
		addTool(srv, s, &mcp.Tool{Name: "scope.release", Title: "Release path scopes", Annotations: idem,
			Description: "Release path scopes you reserved (exactly as reserved). A scope you do not hold is an error and nothing is released."},
			map[string]func(*jsonschema.Schema){"scopes": scopes},
			func(ctx context.Context, in releaseIn) (*mcp.CallToolResult, ReleaseOut, error) {
				rs, err := co.Release(ctx, s.opts.Agent, in.Scopes)
				if err != nil {
					return nil, ReleaseOut{}, err
				}
				return textResult(fmt.Sprintf("released %d reservation(s)", len(rs))), ReleaseOut{Released: rs}, nil
			}),
		addTool(srv, s, &mcp.Tool{Name: "scope.reservations", Title: "Who holds which paths", Annotations: ro,
			Description: "List the live reservations with their holders' liveness, or with path only those overlapping it: " +
				"who is touching this file or directory."},
			map[string]func(*jsonschema.Schema){"path": lenRange(0, 4096)},
			func(ctx context.Context, in reservationsIn) (*mcp.CallToolResult, ReservationsOut, error) {
				rs, err := co.Reservations(ctx, in.Path)
				if err != nil {
					return nil, ReservationsOut{}, err
				}
				if rs == nil {
					rs = []gateway.HeldReservation{}
				}
				return textResult(describeHeld(rs, in.Path)), ReservationsOut{Reservations: rs}, nil
			}),
		addTool(srv, s, &mcp.Tool{Name: "agent.heartbeat", Title: "Heartbeat", Annotations: idem,
			Description: "Tell the relay you are alive. You are active until stale_after (default 15 min) after your last " +
				"heartbeat or tool call, stale until twice that, then evicted; others may take over a stale agent's " +
				"reservations and claims. Safe to call repeatedly."},
			nil,
			func(ctx context.Context, _ struct{}) (*mcp.CallToolResult, gateway.Presence, error) {
				st, err := co.Heartbeat(ctx, s.opts.Agent)
				if err != nil {
					return nil, st, err
				}
				return textResult(fmt.Sprintf("%s is %s", st.ID, st.Liveness)), st, nil
			}),
	)
}

type reserveIn struct {
	Scopes        []string `json:"scopes" jsonschema:"path scopes relative to the repository root; a trailing /* covers a directory"`
	TTLSeconds    int      `json:"ttlSeconds,omitempty" jsonschema:"how long the reservation lasts, in seconds (default 1800)"`
	Reason        string   `json:"reason,omitempty" jsonschema:"why, shown to other agents"`
	TakeoverStale bool     `json:"takeoverStale,omitempty" jsonschema:"take over overlapping reservations whose holder is stale or evicted"`
}

func (s *server) reserve(ctx context.Context, co c2a.Coordinator, in reserveIn) (*mcp.CallToolResult, gateway.ReserveAnswer, error) {
	ans, err := co.Reserve(ctx, reserve.Request{Agent: s.opts.Agent, Scopes: in.Scopes, TTL: time.Duration(in.TTLSeconds) * time.Second,
		Reason: in.Reason, TakeoverStale: in.TakeoverStale})
	if err != nil {
		return nil, ans, err
	}
	if !ans.Granted {
		var b strings.Builder
		b.WriteString("refused: do not edit these scopes")
		for _, c := range ans.Conflicts {
			fmt.Fprintf(&b, "\n%s: held by %s as %s (%s overlap; holder %s)", c.Scope, c.Holder, c.HeldScope, c.Class, c.Liveness)
		}
		res := textResult(b.String())
		res.IsError = true
		return res, ans, nil
	}
	var b strings.Builder
	b.WriteString("granted")
	for _, r := range ans.Reservations {
		fmt.Fprintf(&b, "\n%s until %s", r.Scope, r.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return textResult(b.String()), ans, nil
}

type releaseIn struct {
	Scopes []string `json:"scopes" jsonschema:"the scopes to release, as reserved"`
}

// ReleaseOut is scope.release's structured result.
type ReleaseOut struct {
	Released []reserve.Reservation `json:"released"`
}

type reservationsIn struct {
	Path string `json:"path,omitempty" jsonschema:"only reservations overlapping this path (who is touching it)"`
}

// ReservationsOut is scope.reservations' structured result.
type ReservationsOut struct {
	Reservations []gateway.HeldReservation `json:"reservations"`
}

func describeHeld(rs []gateway.HeldReservation, path string) string {
	if len(rs) == 0 {
		if path != "" {
			return "nobody holds a scope overlapping " + path
		}
		return "no live reservations"
	}
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s held by %s (%s) until %s", r.Scope, r.Agent, r.HolderLiveness, r.ExpiresAt.UTC().Format(time.RFC3339))
		if r.Reason != "" {
			fmt.Fprintf(&b, ": %s", r.Reason)
		}
	}
	return b.String()
}
