package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// ProvenanceMeta returns the `meta: provenance` block of a message
// forwarded from event srcEvent of group srcGroup (CCCS §9.1); summarized
// says its text is a summary, not the original.
func ProvenanceMeta(srcGroup, srcEvent string, summarized bool) envelope.Meta {
	m := metaBlock(metaProvenance, "Src-Group-Id", srcGroup, "Src-Event-Id", srcEvent)
	if summarized {
		m.Fields = append(m.Fields, envelope.Field{Key: "Summarized", Value: "yes"})
	}
	return m
}

// Provenance is where a forwarded chat.message came from (CCCS §9.1):
// data.src_group_id, data.src_event_id and, for a summary rather than the
// original text, data.summarized.
type Provenance struct {
	SrcGroupID string `json:"src_group_id,omitempty"`
	SrcEventID string `json:"src_event_id,omitempty"`
	Summarized bool   `json:"summarized,omitempty"`
}

// provenanceOf reads env's `meta: provenance`: both Src-Group-Id and
// Src-Event-Id, or neither (CCCS §6.1, §9.1). Errors wrap ErrProtocol.
func provenanceOf(env *envelope.Envelope) (Provenance, error) {
	var p Provenance
	if !hasMeta(env, metaProvenance) {
		return p, nil
	}
	g, _ := env.MetaValue(metaProvenance, "Src-Group-Id")
	e, _ := env.MetaValue(metaProvenance, "Src-Event-Id")
	s, _ := env.MetaValue(metaProvenance, "Summarized")
	p.SrcGroupID, p.SrcEventID = strings.TrimSpace(g), strings.TrimSpace(e)
	if err := checkProvenance(p.SrcGroupID, p.SrcEventID); err != nil {
		return p, err
	}
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "no", "false":
	case "yes", "true":
		p.Summarized = true
	default:
		return p, fmt.Errorf("%w: meta: provenance Summarized %q is not yes or no", ErrProtocol, s)
	}
	switch env.Intent {
	case envelope.IntentAck, envelope.IntentNack, envelope.IntentRevoke, envelope.IntentError:
		return p, fmt.Errorf("%w: meta: provenance belongs on a message, not a %s", ErrProtocol, env.Intent)
	}
	return p, nil
}

// checkSource refuses provenance that this ledger contradicts: a
// src_event_id the ledger holds in another group than src_group_id names
// (CCCS §9.1: the pair identifies one event). A source the ledger does not
// hold is kept as the sender states it — it may be another relay's — and
// the web inbox shows it as unavailable. It returns "" to accept.
func (r *Relay) checkSource(ctx context.Context, env *envelope.Envelope) string {
	p, err := provenanceOf(env)
	if err != nil || p.SrcEventID == "" {
		return ""
	}
	ev, err := r.store.Get(ctx, p.SrcEventID)
	if err != nil || ev.GroupID == p.SrcGroupID {
		return ""
	}
	return fmt.Sprintf("meta: provenance names event %s of group %q, but this ledger holds it in group %q", p.SrcEventID, p.SrcGroupID, ev.GroupID)
}

// checkProvenance enforces CCCS §6.1: "If either src_group_id or
// src_event_id is present, both MUST be present."
func checkProvenance(group, event string) error {
	switch {
	case group == "" && event == "":
		return nil
	case group == "":
		return fmt.Errorf("%w: src_event_id %q without src_group_id: provenance names both or neither (CCCS §9.1)", ErrProtocol, event)
	case event == "":
		return fmt.Errorf("%w: src_group_id %q without src_event_id: provenance names both or neither (CCCS §9.1)", ErrProtocol, group)
	}
	for _, v := range []string{group, event} {
		if len(v) > 200 || strings.ContainsAny(v, "\r\n\t ") {
			return fmt.Errorf("%w: provenance id %q must be one word of at most 200 bytes", ErrProtocol, v)
		}
	}
	return nil
}

// ForwardRequest asks to forward event EventID into group ToGroup (CCCS
// §9.1): the source group is the event's own.
type ForwardRequest struct {
	EventID string `json:"event_id"`
	ToGroup string `json:"to_group"`
	// Summary, when set, replaces the original text, prefixed
	// "[Summarized] ", and the message says so (data.summarized).
	Summary string `json:"summary,omitempty"`
	// To and Intent address the forwarded message; ALL and BROADCAST
	// (context for everyone, asking nothing) by default.
	To     string `json:"to,omitempty"`
	Intent string `json:"intent,omitempty"`
	// Message is the forwarded envelope's message id: a retry with the
	// same one records once.
	Message string `json:"message,omitempty"`
}

// Forward returns the envelope request that forwards req.EventID, a
// chat.message actor was shown, into another group with its provenance:
// the original text verbatim, or a summary that says so (CCCS §9.1 (a),
// (b)). The caller composes and ingests it like any send.
func (r *Relay) Forward(ctx context.Context, actor string, req ForwardRequest) (SendRequest, error) {
	actor = r.book.ActorID(actor)
	req.ToGroup = strings.TrimSpace(req.ToGroup)
	if req.EventID == "" || req.ToGroup == "" {
		return SendRequest{}, actionErr(CodeInvalid, "forward needs an event id and a destination group")
	}
	src, err := r.store.Get(ctx, req.EventID)
	if errors.Is(err, ledger.ErrNotFound) {
		return SendRequest{}, actionErr(CodeNotFound, "no event %q to forward", req.EventID)
	}
	if err != nil {
		return SendRequest{}, fmt.Errorf("gateway: reading %s to forward: %w", req.EventID, err)
	}
	sd, err := ParseData(src)
	switch {
	case err != nil || src.Kind != KindMessage:
		return SendRequest{}, actionErr(CodeInvalid, "event %s is a %s; only a chat.message is forwarded", src.ID, src.Kind)
	case !r.shownTo(src, sd, actor):
		// Forwarding must not leak a message to a group its forwarder was
		// never shown it in.
		return SendRequest{}, actionErr(CodePermission, "event %s is not addressed to %s, who may not forward it", src.ID, actor)
	case r.Group(r.contextOf(req.ToGroup)) == src.GroupID:
		return SendRequest{}, actionErr(CodeInvalid, "event %s is already in group %s; forward it to another group", src.ID, src.GroupID)
	}
	out := SendRequest{From: actor, To: cmp.Or(strings.TrimSpace(req.To), "ALL"), Intent: cmp.Or(strings.TrimSpace(req.Intent), envelope.IntentBroadcast),
		Context: r.contextOf(req.ToGroup), Body: sd.Text, SrcGroupID: src.GroupID, SrcEventID: src.ID, Message: req.Message}
	if s := strings.TrimSpace(req.Summary); s != "" {
		out.Body, out.Summarized = SummaryPrefix+s, true
	}
	return out, nil
}

// SummaryPrefix starts the text of a summarised forward (CCCS §9.1 (b)).
const SummaryPrefix = "[Summarized] "

// contextOf returns the envelope context that maps to group: the
// configured one, none for the default group, or the group id itself.
func (r *Relay) contextOf(group string) string {
	for c, g := range r.groups {
		if g == group {
			return c
		}
	}
	if group == DefaultGroup {
		return ""
	}
	return group
}

// routeOf splits env's X-Route (`a → b → c`, or with "->") into its hops.
func routeOf(env *envelope.Envelope) []string {
	v, ok := env.MetaValue("routing", "X-Route")
	if !ok {
		return nil
	}
	var hops []string
	for _, h := range strings.Split(strings.ReplaceAll(v, "->", "→"), "→") {
		if h = strings.TrimSpace(h); h != "" && len(hops) < 32 {
			hops = append(hops, h)
		}
	}
	return hops
}
