package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/transports/httpx"
)

// Result is one envelope's entry in the JSON answer of POST
// /crosstalk/receive and POST /v1/send (docs/design.md §5.6).
type Result struct {
	Message   string `json:"message,omitempty"`
	EventID   string `json:"event_id,omitempty"`
	GroupID   string `json:"group_id,omitempty"`
	Seq       int64  `json:"seq,omitempty"`
	Duplicate bool   `json:"duplicate"`
	// Differs: a duplicate whose recorded envelope says something else
	// (gateway.Outcome.Differs).
	Differs bool      `json:"differs,omitempty"`
	Status  string    `json:"status"` // the verification status, or "rejected"
	Error   *apiError `json:"error,omitempty"`
}

func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json")
}

// receive is POST /crosstalk/receive (docs/design.md §5.5): one or more envelopes
// as text; 200 with receipt envelopes (or JSON) when every envelope was
// recorded, else the status of the first rejection with every receipt.
func (s *Server) receive(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r, int64(s.relay.IntakeLimit()))
	if status := bodiesStatus(err); status != 0 {
		w.Header().Set("Retry-After", "1")
		s.errorEnvelope(w, r, status, envelope.CodeRate, err.Error())
		return
	}
	if err != nil {
		s.errorEnvelope(w, r, http.StatusBadRequest, envelope.CodeFormat, "reading the request body: "+err.Error())
		return
	}
	p, authenticated := principal(r)
	in := gateway.Intake{Transport: "http", Source: r.RemoteAddr, IdempotencyKey: idempotencyKey(r), Text: body}
	if authenticated {
		in.Principal = p
	}
	outs, err := s.relay.Ingest(r.Context(), in)
	if errors.Is(err, gateway.ErrTooManyEnvelopes) {
		s.errorEnvelope(w, r, http.StatusRequestEntityTooLarge, envelope.CodeTooLarge, err.Error())
		return
	}
	if err != nil {
		// Nothing is acknowledged: the client must retry.
		s.log.Error("ingest failed", "err", err)
		w.Header().Set("Retry-After", "1")
		s.errorEnvelope(w, r, http.StatusServiceUnavailable, envelope.CodeTimeout, "the relay could not record the envelope; retry")
		return
	}
	s.answer(w, r, outs)
}

// answer writes the outcomes of an intake.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, outs []gateway.Outcome) {
	status := http.StatusOK
	for _, o := range outs {
		if o.Reject != nil {
			status = statusOf(o.Reject.Code)
			break
		}
	}
	if wantsJSON(r) {
		results := make([]Result, len(outs))
		for i, o := range outs {
			res := Result{EventID: o.Event.ID, GroupID: o.Event.GroupID, Seq: o.Event.Seq, Duplicate: o.Duplicate, Differs: o.Differs, Status: o.Verification.Status}
			if o.Envelope != nil {
				res.Message = o.Envelope.Message
			}
			if o.Reject != nil {
				res.Status = "rejected"
				res.Error = &apiError{Code: string(o.Reject.Code), Message: o.Reject.Reason, Line: o.Reject.Line}
			}
			results[i] = res
		}
		// Structs of one member, not maps: the same JSON, without a map
		// to make and to sort.
		if len(outs) == 1 && outs[0].Reject != nil {
			writeJSON(w, status, struct {
				Error *apiError `json:"error"`
			}{results[0].Error})
			return
		}
		writeJSON(w, status, struct {
			Results []Result `json:"results"`
		}{results})
		return
	}
	w.Header()["Content-Type"] = textPlain
	w.WriteHeader(status)
	// Straight into the response's buffer: a receipt that cannot be
	// written is left out, as before, and the others go.
	ew := envelope.NewWriter(w)
	for _, o := range outs {
		if err := ew.Write(s.relay.Receipt(o)); err != nil {
			if !errors.Is(err, envelope.ErrInvalid) {
				return // the client is gone
			}
			s.log.Error("writing receipt", "err", err)
		}
	}
}

// textPlain is the Content-Type of receipts, shared by every answer as
// its header value (Header.Set would allocate it for each): the header
// is copied when it is written, and nothing changes the value in place.
var textPlain = []string{"text/plain; charset=utf-8"}

// errorEnvelope answers the envelope endpoint with an ERROR envelope.
func (s *Server) errorEnvelope(w http.ResponseWriter, r *http.Request, status int, code envelope.Code, msg string) {
	if wantsJSON(r) {
		writeError(w, status, string(code), msg)
		return
	}
	e := envelope.NewError(nil, code, msg, msg)
	e.From = s.relay.Name()
	b, err := envelope.Marshal(e)
	if err != nil {
		b = []byte(msg + "\n")
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if _, err := s.relay.Groups(r.Context()); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "store": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "store": "ok"})
}

func (s *Server) groups(w http.ResponseWriter, r *http.Request) {
	gs, err := s.relay.Groups(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, gateway.CodeInternal, err.Error())
		return
	}
	if gs == nil {
		gs = []ledgerGroup{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"groups": gs})
}

// queryInt reads a non-negative integer query parameter.
func queryInt(r *http.Request, name string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s must be a non-negative integer, got %q", name, v)
	}
	return n, nil
}

// maxPage bounds one page of events or deliveries.
const maxPage = 1000

// page reads since_seq and limit (0 or over maxPage: maxPage).
func page(r *http.Request) (since, limit int64, err error) {
	since, err = queryInt(r, "since_seq")
	limit, err2 := queryInt(r, "limit")
	if err = errors.Join(err, err2); err != nil {
		return 0, 0, err
	}
	if limit == 0 || limit > maxPage {
		limit = maxPage
	}
	return since, limit, nil
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	since, limit, err := page(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, gateway.CodeInvalid, err.Error())
		return
	}
	var kinds []string
	if k := r.URL.Query().Get("kinds"); k != "" {
		kinds = strings.Split(k, ",")
	}
	if r.URL.Query().Has("before_seq") {
		s.eventsBefore(w, r, kinds, int(limit))
		return
	}
	evs, err := s.relay.Store().Range(r.Context(), r.PathValue("group"), since, kinds, int(limit))
	if err != nil {
		writeError(w, http.StatusInternalServerError, gateway.CodeInternal, err.Error())
		return
	}
	next := since
	if len(evs) > 0 {
		next = evs[len(evs)-1].Seq
	} else {
		evs = []ledgerEvent{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": evs, "next_seq": next})
}

// beforeScan bounds how many events one before_seq page reads looking
// for the kinds asked: past it the page is short and prev_seq continues.
const beforeScan = 10 * maxPage

// eventsBefore is GET /v1/groups/{group}/events?before_seq=N: the newest
// limit events (of kinds) with seq < N, N = 0 (or past it) meaning the
// group's end, in
// seq order, and prev_seq, the before_seq of the next older page (0 at
// the group's start). Seqs are dense, so it reads windows of seqs
// backwards: O(page), or O(beforeScan) for rare kinds.
func (s *Server) eventsBefore(w http.ResponseWriter, r *http.Request, kinds []string, limit int) {
	group := r.PathValue("group")
	before, err := queryInt(r, "before_seq")
	if err != nil {
		writeError(w, http.StatusBadRequest, gateway.CodeInvalid, err.Error())
		return
	}
	st := s.relay.Store()
	// 0, or a seq past the group's end, is the group's end: a page past
	// it would read beforeScan empty seqs and send the client on from
	// there.
	gs, err := st.Groups(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, gateway.CodeInternal, err.Error())
		return
	}
	var last int64
	for _, g := range gs {
		if g.ID == group {
			last = g.LastSeq
		}
	}
	if before == 0 || before > last+1 {
		before = last + 1
	}
	var evs []ledgerEvent
	end := max(before-1, 0) // the last seq still to read
	for end > 0 && len(evs) < limit && before-1-end < beforeScan {
		// Seqs are dense: without a kinds filter the page is exactly the
		// limit seqs before end; with one, read wider windows.
		window := limit - len(evs)
		if len(kinds) > 0 {
			window = max(limit, 256)
		}
		from := max(0, end-int64(window))
		win, err := st.Range(r.Context(), group, from, kinds, int(end-from))
		if err != nil {
			writeError(w, http.StatusInternalServerError, gateway.CodeInternal, err.Error())
			return
		}
		var keep []ledgerEvent
		for _, ev := range win {
			if ev.Seq <= end {
				keep = append(keep, ev)
			}
		}
		if n := limit - len(evs); len(keep) > n {
			keep = keep[len(keep)-n:]
			from = keep[0].Seq - 1
		}
		evs = append(keep, evs...)
		end = from
	}
	if evs == nil {
		evs = []ledgerEvent{}
	}
	prev := int64(0)
	if end > 0 {
		prev = end + 1
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": evs, "prev_seq": prev})
}

// agentOf returns the agent a request acts for: the path's agent (for
// deliveries) or the X-Crosstalk-Agent hint, which an authenticated
// principal may only set to itself. Without tokens the hint is trusted
// (CCCS §5.3 local-trust: documented in docs/configuration.md).
func (s *Server) agentOf(r *http.Request, want string) (string, error) {
	p, authenticated := principal(r)
	if want == "" {
		want = r.Header.Get("X-Crosstalk-Agent")
	}
	if want == "" {
		return p, nil
	}
	// Actor ids compare exactly: ActorID has already matched the address
	// book's names without regard to case and lower-cased simple names,
	// and what it leaves apart the ledger records apart (a case fold
	// would let "sam" act as "ſam", another actor; docs/security.md).
	if authenticated && s.relay.Book().ActorID(want) != s.relay.Book().ActorID(p) {
		return "", fmt.Errorf("principal %q may not act as %q", p, want)
	}
	return want, nil
}

func (s *Server) deliveries(w http.ResponseWriter, r *http.Request) {
	agent, err := s.agentOf(r, r.PathValue("agent"))
	if err != nil {
		writeError(w, http.StatusForbidden, gateway.CodePermission, err.Error())
		return
	}
	since, limit, err := page(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, gateway.CodeInvalid, err.Error())
		return
	}
	if _, authenticated := principal(r); authenticated || r.Header.Get("X-Crosstalk-Agent") != "" {
		// The agent itself asks (its token, or the local hint of
		// `crosstalk inbox --agent`): that is activity (docs/design.md §5.4).
		s.relay.Touch(agent)
	}
	q := r.URL.Query()
	if q.Has("before_pos") || q.Has("after_pos") {
		s.deliveryPage(w, r, agent, int(limit))
		return
	}
	group, err := s.queryGroup(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, string(envelope.CodeAddress), err.Error())
		return
	}
	if id := q.Get("event_id"); id != "" {
		// One event's delivery (per event), read alone: c2a.FindDelivery.
		d, ok, err := s.relay.Delivery(r.Context(), agent, group, id)
		if err != nil {
			writeError(w, http.StatusInternalServerError, gateway.CodeInternal, err.Error())
			return
		}
		ds := []gateway.Delivery{}
		if ok {
			ds = append(ds, d)
		}
		writeJSON(w, http.StatusOK, map[string]any{"agent": s.relay.Book().ActorID(agent), "event_id": id, "deliveries": ds})
		return
	}
	ctx := r.Context()
	if q.Get("per_event") == "1" {
		ctx = gateway.PerEvent(ctx) // one delivery per event: no merging, no digest omission
	}
	ds, err := s.relay.Deliveries(ctx, agent, group, since, int(limit))
	if err != nil {
		writeError(w, http.StatusInternalServerError, gateway.CodeInternal, err.Error())
		return
	}
	if ds == nil {
		ds = []gateway.Delivery{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"agent": s.relay.Book().ActorID(agent), "deliveries": ds})
}

// deliveryPage is GET /v1/agents/{agent}/deliveries?before_pos=N or
// ?after_pos=N: one keyset page of the agent's deliveries over every
// group by ledger position (Relay.DeliveriesFrom; before_pos=0 is the
// newest page), with older_pos and newer_pos, the cursors of the pages
// around it (0 when there is none).
func (s *Server) deliveryPage(w http.ResponseWriter, r *http.Request, agent string, limit int) {
	before, err := queryInt(r, "before_pos")
	after, err2 := queryInt(r, "after_pos")
	if err = errors.Join(err, err2); err != nil || r.URL.Query().Has("before_pos") && r.URL.Query().Has("after_pos") {
		if err == nil {
			err = errors.New("give before_pos or after_pos, not both")
		}
		writeError(w, http.StatusBadRequest, gateway.CodeInvalid, err.Error())
		return
	}
	if r.URL.Query().Get("limit") == "" {
		limit = defaultDeliveryPage
	}
	p, err := s.relay.DeliveriesFrom(r.Context(), agent, gateway.LogCursor{Before: before, After: after}, limit)
	if err != nil {
		writeError(w, http.StatusInternalServerError, gateway.CodeInternal, err.Error())
		return
	}
	ds := p.Deliveries
	if ds == nil {
		ds = []gateway.Delivery{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"agent": s.relay.Book().ActorID(agent), "deliveries": ds, "older_pos": p.Older, "newer_pos": p.Newer})
}

// defaultDeliveryPage is a delivery page's size when limit is absent.
const defaultDeliveryPage = 100

// actionBody is the optional JSON body of an action.
type actionBody struct {
	Signal string `json:"signal"`
	Note   string `json:"note"`
	// TakeoverStale (claim): take over a stale holder's claim.
	TakeoverStale bool `json:"takeover_stale"`
}

func (s *Server) act(w http.ResponseWriter, r *http.Request) {
	agent, err := s.agentOf(r, "")
	if err != nil {
		writeError(w, http.StatusForbidden, gateway.CodePermission, err.Error())
		return
	}
	var body actionBody
	if err := readJSON(r, &body, true); err != nil {
		badBody(w, err)
		return
	}
	res, err := s.relay.Act(r.Context(), gateway.ActionRequest{
		Action: gateway.Action(r.PathValue("action")), Group: r.PathValue("group"), EventID: r.PathValue("id"),
		Actor: agent, Signal: body.Signal, Note: body.Note, TakeoverStale: body.TakeoverStale,
	})
	if err != nil {
		status, code, msg := actionStatus(err)
		if status == http.StatusInternalServerError {
			s.log.Error("action failed", "err", err)
		}
		writeError(w, status, code, msg)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// errTooLarge marks a request body over its limit: 413 E-TOO-LARGE.
var errTooLarge = errors.New("too large")

// badBody answers a body that readJSON refused.
func badBody(w http.ResponseWriter, err error) {
	if status := bodiesStatus(err); status != 0 {
		w.Header().Set("Retry-After", "1")
		writeError(w, status, string(envelope.CodeRate), err.Error())
		return
	}
	if errors.Is(err, errTooLarge) {
		writeError(w, http.StatusRequestEntityTooLarge, string(envelope.CodeTooLarge), err.Error())
		return
	}
	writeError(w, http.StatusBadRequest, gateway.CodeInvalid, err.Error())
}

// idempotencyKey returns the request's Idempotency-Key header as the
// events record it: in the form httpx.HeaderKey gives, so that a key of
// any length or bytes is recorded in at most 71 printable characters.
func idempotencyKey(r *http.Request) string {
	return httpx.HeaderKey(r.Header.Get("Idempotency-Key"))
}

// readBody reads the request body, or its first limit+1 bytes when it is
// longer than limit (the caller refuses it). A body whose length the
// request declares is read into one buffer of that size, instead of one
// grown and copied as it fills — up to maxPrealloc: past it the buffer
// grows as the bytes arrive, so that a client declaring max_body and
// sending nothing (or one byte a second) does not hold that much of the
// relay's memory per connection until the read timeout.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if n := r.ContentLength; n >= 0 && n <= min(limit, maxPrealloc) {
		b := make([]byte, n)
		_, err := io.ReadFull(r.Body, b) // net/http's body ends after n bytes
		return b, err
	}
	return io.ReadAll(io.LimitReader(r.Body, limit+1))
}

// maxPrealloc bounds the buffer readBody makes for a declared body
// length before the body's bytes arrive.
const maxPrealloc = 64 << 10

// readJSON decodes a JSON request body of at most maxJSONBody bytes: one
// JSON value and nothing after it; optional allows an empty body.
func readJSON(r *http.Request, v any, optional bool) error {
	b, err := readBody(r, maxJSONBody)
	if err != nil {
		return fmt.Errorf("reading body: %w", err)
	}
	if len(b) > maxJSONBody {
		return fmt.Errorf("%w: body larger than %d bytes", errTooLarge, maxJSONBody)
	}
	if len(bytes.Trim(b, " \t\r\n")) == 0 && optional { // JSON whitespace only
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad JSON body: %w", err)
	}
	// One value: what follows it would be silently ignored.
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("bad JSON body: data after the JSON value")
	}
	return nil
}

// send is POST /v1/send: compose an envelope as the principal (signed when
// the relay holds its key) and ingest it like any other.
func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	agent, err := s.agentOf(r, "")
	if err != nil {
		writeError(w, http.StatusForbidden, gateway.CodePermission, err.Error())
		return
	}
	var req gateway.SendRequest
	if err := readJSON(r, &req, false); err != nil {
		badBody(w, err)
		return
	}
	if _, authenticated := principal(r); authenticated && req.From != "" && s.relay.Book().ActorID(req.From) != s.relay.Book().ActorID(agent) {
		writeError(w, http.StatusForbidden, gateway.CodePermission, fmt.Sprintf("principal %q may not send as %q", agent, req.From))
		return
	}
	if req.From == "" && agent == LocalUser {
		writeError(w, http.StatusBadRequest, gateway.CodeInvalid, `send needs "from" (or X-Crosstalk-Agent) without a token`)
		return
	}
	s.composeAndIngest(w, r, agent, req)
}

// forward answers POST /v1/forward: the event named by event_id, which
// the caller was shown, is appended to to_group with its provenance (CCCS
// §9.1), as a send by the caller; the answer is send's.
func (s *Server) forward(w http.ResponseWriter, r *http.Request) {
	agent, err := s.agentOf(r, "")
	if err != nil {
		writeError(w, http.StatusForbidden, gateway.CodePermission, err.Error())
		return
	}
	if agent == LocalUser && r.Header.Get("X-Crosstalk-Agent") == "" {
		writeError(w, http.StatusBadRequest, gateway.CodeInvalid, `forward needs X-Crosstalk-Agent without a token`)
		return
	}
	var req gateway.ForwardRequest
	if err := readJSON(r, &req, false); err != nil {
		badBody(w, err)
		return
	}
	send, err := s.relay.Forward(r.Context(), agent, req)
	if err != nil {
		status, code, msg := actionStatus(err)
		writeError(w, status, code, msg)
		return
	}
	s.composeAndIngest(w, r, agent, send)
}

// composeAndIngest composes req as agent, ingests it and answers with the
// outcome (send, forward).
func (s *Server) composeAndIngest(w http.ResponseWriter, r *http.Request, agent string, req gateway.SendRequest) {
	text, err := s.relay.Compose(r.Context(), agent, req, s.signer)
	if err != nil {
		status, code, msg := actionStatus(err)
		writeError(w, status, code, msg)
		return
	}
	in := gateway.Intake{Transport: "api", Source: r.RemoteAddr, Text: text, IdempotencyKey: idempotencyKey(r)}
	if _, authenticated := principal(r); authenticated {
		in.Principal = agent
	}
	outs, err := s.relay.Ingest(r.Context(), in)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, gateway.CodeUnavailable, "the relay could not record the envelope; retry")
		return
	}
	r.Header.Set("Accept", "application/json")
	s.answer(w, r, outs)
}
