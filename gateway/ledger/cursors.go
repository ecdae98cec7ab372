package ledger

import (
	"context"
	"errors"
	"fmt"
)

// CursorLister is the optional capability of a Store to read every cursor
// of one actor in one call. A relay reads an agent's delivery cursor in
// every group when the agent's harness connects (gateway.Relay.AgentResume)
// and for GET /v1/agents/{agent}/cursors; with hundreds of groups, one
// GetCursor per group is what the harness waits on. CursorsIn uses it and
// falls back to GetCursor per group for a Store without it.
//
// A Store wrapping another Store implements CursorsOf by passing the call
// on with the package function CursorsOf, so that the capability is not
// lost behind the wrapper.
type CursorLister interface {
	// CursorsOf returns actor's cursors by group id: one for every group
	// listed by Groups in which GetCursor(group, actor) finds one, the
	// actor compared byte for byte as GetCursor does; none of another
	// actor, and no mark (SetMark). An actor without cursors gets an empty map. A Store
	// that passes the call on to one without the capability returns an
	// error wrapping errors.ErrUnsupported.
	CursorsOf(ctx context.Context, actor string) (map[string]Cursor, error)
}

// CursorsOf returns st.CursorsOf(ctx, actor) when st is a CursorLister,
// else an error wrapping errors.ErrUnsupported. A wrapper's CursorsOf
// calls it with the store it wraps.
func CursorsOf(ctx context.Context, st Store, actor string) (map[string]Cursor, error) {
	if cl, ok := st.(CursorLister); ok {
		return cl.CursorsOf(ctx, actor)
	}
	return nil, fmt.Errorf("ledger: cursors of %q: %w", actor, errors.ErrUnsupported)
}

// CursorsIn returns actor's cursors in groups, by group id, leaving out
// the groups where actor has none and every group not in groups: what
// GetCursor of each group in turn gives, read with one CursorsOf call
// when st supports it (CursorLister), else with those GetCursor calls.
func CursorsIn(ctx context.Context, st Store, actor string, groups []string) (map[string]Cursor, error) {
	all, err := CursorsOf(ctx, st, actor)
	switch {
	case err == nil:
		out := make(map[string]Cursor, min(len(all), len(groups)))
		for _, g := range groups {
			if c, ok := all[g]; ok {
				out[g] = c
			}
		}
		return out, nil
	case !errors.Is(err, errors.ErrUnsupported):
		return nil, err
	}
	out := make(map[string]Cursor, len(groups))
	for _, g := range groups {
		c, err := st.GetCursor(ctx, g, actor)
		switch {
		case errors.Is(err, ErrNotFound):
			continue
		case err != nil:
			return nil, err
		}
		out[g] = c
	}
	return out, nil
}
