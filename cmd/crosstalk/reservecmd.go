package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/client"
	"github.com/crosstalk-go/crosstalk/gateway/reserve"
)

var cmdReserve = &command{
	name:    "reserve",
	args:    "--agent A [--ttl 30m] [--reason R] [--takeover-stale] [--json] SCOPE...",
	summary: "reserve path scopes for an agent (exit 1 when another agent holds an overlap)",
	run:     runReserve,
}

var cmdRelease = &command{
	name:    "release",
	args:    "--agent A [--json] SCOPE...",
	summary: "release an agent's reserved path scopes",
	run:     runRelease,
}

var cmdReservations = &command{
	name:    "reservations",
	args:    "[--path P] [--json]",
	summary: "list live reservations, or who holds a path",
	run:     runReservations,
}

func runReserve(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Reserve asks the relay to reserve each SCOPE (a path relative to the
repository root: "src/auth/*", "docs/api.md", "src") for the agent, per
BeadBoard §4.4–§5 (docs/agents.md "Reservations"). Reserving a scope the agent
already holds renews it. Another agent's overlapping reservation refuses the
whole request unless its holder is stale or evicted and --takeover-stale is
given. With tokens configured, --agent must be the token's principal.

Exit status: 0 when granted; 1 when refused, printing per conflict the holder,
its scope and the overlap class (exact or partial); 2 for a bad flag, TTL or
scope (one escaping the root, a wildcard other than a final "/*").`)
	rf := addRelayFlags(fs)
	agent := fs.String("agent", "", "agent `name` reserving (required)")
	ttl := fs.Duration("ttl", reserve.DefaultTTL, "how long the reservation lasts (at least 1s); without it a renewal never shortens a reservation")
	reason := fs.String("reason", "", "why, shown to other agents")
	takeover := fs.Bool("takeover-stale", false, "take over overlapping reservations of stale or evicted holders")
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	scopes, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *agent == "" || len(scopes) == 0 {
		return usagef("reserve: want --agent A SCOPE...")
	}
	if *ttl < reserve.MinTTL || *ttl > reserve.MaxTTL {
		return usagef("reserve: --ttl %v outside [%v, %v]", *ttl, reserve.MinTTL, reserve.MaxTTL)
	}
	if err := checkScopes("reserve", scopes...); err != nil {
		return err
	}
	// Without --ttl the relay applies its default, and a renewal keeps a
	// longer expiry (docs/agents.md "Rules"); sending the default would
	// shorten it.
	var ttlText string
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "ttl" {
			ttlText = ttl.String()
		}
	})
	body, err := json.Marshal(api.ReserveBody{Agent: *agent, Scopes: scopes, TTL: ttlText, Reason: *reason, TakeoverStale: *takeover})
	if err != nil {
		return err
	}
	var ans api.ReserveAnswer
	if err := rf.do(ctx, "POST", "/v1/reservations", *agent, strings.NewReader(string(body)), &ans); err != nil {
		return err
	}
	if *asJSON {
		if err := json.NewEncoder(e.stdout).Encode(ans); err != nil {
			return err
		}
	} else if ans.Granted {
		printReservations(e, ans.Reservations)
	} else {
		for _, c := range ans.Conflicts {
			fmt.Fprintf(e.stdout, "refused %s: held by %s as %s (%s; holder %s)\n", c.Scope, c.Holder, c.HeldScope, c.Class, c.Liveness)
		}
	}
	if !ans.Granted {
		return failedError{}
	}
	return nil
}

func runRelease(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Release gives back the agent's reservations of each SCOPE. A scope the agent
does not hold is an error and nothing is released.`)
	rf := addRelayFlags(fs)
	agent := fs.String("agent", "", "agent `name` releasing (required)")
	asJSON := fs.Bool("json", false, "print the released reservations as JSON")
	scopes, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *agent == "" || len(scopes) == 0 {
		return usagef("release: want --agent A SCOPE...")
	}
	if err := checkScopes("release", scopes...); err != nil {
		return err
	}
	q := url.Values{"agent": {*agent}, "scope": scopes}
	var ans struct {
		Released []reserve.Reservation `json:"released"`
	}
	if err := rf.do(ctx, "DELETE", "/v1/reservations?"+q.Encode(), *agent, nil, &ans); err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(ans)
	}
	for _, r := range ans.Released {
		fmt.Fprintf(e.stdout, "released %s\n", r.Scope)
	}
	return nil
}

func runReservations(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Reservations lists the live reservations: agent, scope, since, until, reason.
With --path, only those overlapping the path ("who holds this path").`)
	rf := addRelayFlags(fs)
	path := fs.String("path", "", "only reservations overlapping this `path`")
	asJSON := fs.Bool("json", false, "print as JSON")
	if rest, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(rest) > 0 {
		return usagef("reservations: unexpected argument %q", rest[0])
	}
	p := "/v1/reservations"
	if *path != "" {
		if err := checkScopes("reservations", *path); err != nil {
			return err
		}
		p += "?" + url.Values{"path": {*path}}.Encode()
	}
	var ans struct {
		Reservations []api.HeldReservation `json:"reservations"`
	}
	if err := rf.do(ctx, "GET", p, "", nil, &ans); err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(ans)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tLIVENESS\tSCOPE\tSINCE\tUNTIL\tREASON")
	for _, r := range ans.Reservations {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Agent, r.HolderLiveness, r.Scope, r.GrantedAt.Local().Format(time.DateTime), r.ExpiresAt.Local().Format(time.DateTime), r.Reason)
	}
	return tw.Flush()
}

var cmdHeartbeat = &command{
	name:    "heartbeat",
	args:    "--agent A [--json]",
	summary: "tell the relay an agent is alive (its liveness: active, stale, evicted)",
	run:     runHeartbeat,
}

// heartbeatAnswer is `crosstalk heartbeat --json`'s output, BeadBoard
// §4.2's envelope: ok, command, data, error.
type heartbeatAnswer struct {
	OK      bool              `json:"ok"`
	Command string            `json:"command"`
	Data    *gateway.Presence `json:"data,omitempty"`
	Error   string            `json:"error,omitempty"`
}

func runHeartbeat(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Heartbeat records that the agent is alive (BeadBoard §4.2; docs/agents.md
"Liveness"): an agent is active until stale_after (default 15m) after its last
heartbeat or other activity, stale until twice that, then evicted, and a stale
agent's reservations and claims can be taken over. Safe to run repeatedly: the
relay records transitions, not beats. With tokens configured, --agent must be
the token's principal.`)
	rf := addRelayFlags(fs)
	agent := fs.String("agent", "", "agent `name` (required)")
	asJSON := fs.Bool("json", false, "print {ok, command, data, error} as JSON")
	if rest, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(rest) > 0 || *agent == "" {
		return usagef("heartbeat: want --agent A")
	}
	var st gateway.Presence
	err := rf.do(ctx, "POST", "/v1/agents/"+client.PathSegment(*agent)+"/heartbeat", *agent, nil, &st)
	if *asJSON {
		ans := heartbeatAnswer{OK: err == nil, Command: "heartbeat"}
		if err != nil {
			ans.Error = err.Error()
		} else {
			ans.Data = &st
		}
		if werr := json.NewEncoder(e.stdout).Encode(ans); werr != nil {
			return werr
		}
		if err != nil {
			return failedError{}
		}
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s %s (last seen %s)\n", st.ID, st.Liveness, st.LastSeen.Local().Format(time.DateTime))
	return nil
}

func printReservations(e *env, rs []reserve.Reservation) {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tSCOPE\tSINCE\tUNTIL\tREASON")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Agent, r.Scope, r.GrantedAt.Local().Format(time.DateTime), r.ExpiresAt.Local().Format(time.DateTime), r.Reason)
	}
	tw.Flush()
}

// checkScopes refuses, as a usage error (exit 2), a scope the relay would
// refuse (BeadBoard §5.1): exit 1 stays "another agent holds it".
func checkScopes(cmd string, scopes ...string) error {
	for _, sc := range scopes {
		if _, err := reserve.Canonical(sc); err != nil {
			return usagef("%s: %s", cmd, strings.TrimPrefix(err.Error(), "reserve: "))
		}
	}
	return nil
}
