package web

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/client"
	"github.com/crosstalk-go/crosstalk/signing"
)

// WebTransport is the transport name of envelopes sent from the paste and
// compose pages (data.x_crosstalk.transport).
const WebTransport = "web"

// maxForm bounds a POSTed form: a pasted intake of gateway.MaxIntake
// bytes, percent-encoded.
const maxForm = 3*gateway.MaxIntake + 64<<10

// previewEntry is one envelope (or error) found in pasted text.
type previewEntry struct {
	N         int
	Line      int
	Column    int
	Code      string
	Err       string
	Env       *envelope.Envelope
	Pkid      string // key id named by the signature, if any
	Alg       string
	Canonical string
	Warnings  []string
}

// resultView is what the relay did with one sent envelope.
type resultView struct {
	Line                int
	From, To, Intent    string
	Message             string
	Accepted, Duplicate bool
	Differs             bool // a duplicate that says something else (gateway.Outcome.Differs)
	Status, StatusClass string
	Group, Thread       string
	Seq                 int64
	Code, Reason        string
}

type pasteData struct {
	Text      string
	Previewed bool
	Preview   []previewEntry
	Found     int
	Errors    int
	Results   []resultView
	Sent      bool
}

// paste is the paste box.
func (s *Server) paste(w http.ResponseWriter, r *http.Request, c *call) {
	s.render(w, r, c, http.StatusOK, "paste", "Paste", pasteData{})
}

// pastePost previews (op=preview) or sends (op=send) pasted chat text.
func (s *Server) pastePost(w http.ResponseWriter, r *http.Request, c *call) {
	text := r.PostFormValue("text")
	data := pasteData{Text: text}
	if r.PostFormValue("op") == "send" {
		s.send(w, r, c, text, data)
		return
	}
	data.Previewed = true
	data.Preview = preview(text)
	for _, p := range data.Preview {
		if p.Err != "" {
			data.Errors++
		} else {
			data.Found++
		}
	}
	s.render(w, r, c, http.StatusOK, "paste", "Paste", data)
}

// preview reads every envelope of text as the relay would (lenient
// Reader), without verifying or recording anything.
func preview(text string) []previewEntry {
	rd := envelope.NewReader(strings.NewReader(text))
	var out []previewEntry
	for len(out) < 1000 {
		env, err := rd.Next()
		if err == io.EOF {
			break
		}
		p := previewEntry{N: len(out) + 1}
		var se *envelope.SyntaxError
		switch {
		case errors.As(err, &se):
			p.Line, p.Column, p.Code, p.Err = se.Line, se.Column, string(se.Code), se.Msg
		case err != nil:
			p.Code, p.Err = string(envelope.CodeFormat), err.Error()
		case !env.Complete:
			p.Env, p.Line, p.Code, p.Err = env, env.Line, string(envelope.CodeFormat), "envelope not terminated: missing [[END]] (the relay refuses it)"
		default:
			p.Env, p.Line, p.Warnings = env, env.Line, env.Warnings()
			if sig, err := signing.ParseSig(env.Sig); err == nil {
				p.Pkid, p.Alg = sig.Pkid, string(sig.Alg)
				if p.Pkid == "" {
					p.Pkid = "(bare JWS: tried against the sender's keys)"
				}
			} else if env.Signed() {
				p.Warnings = append(p.Warnings, "malformed sig: line: "+err.Error())
			}
			p.Canonical = copyText(env, string(env.Source()))
		}
		out = append(out, p)
		if err != nil && se == nil {
			break
		}
	}
	return out
}

// send records text in the relay (Relay.Ingest, transport "web") and shows
// the outcome of every envelope in it.
func (s *Server) send(w http.ResponseWriter, r *http.Request, c *call, text string, data pasteData) {
	in := gateway.Intake{Transport: WebTransport, Source: "web " + r.RemoteAddr, Data: strings.NewReader(text)}
	if !c.local {
		// Authenticated: the principal may only send as itself unless
		// the envelope is signed (docs/configuration.md).
		in.Principal = c.principal
	}
	outs, err := s.relay.Ingest(r.Context(), in)
	if errors.Is(err, gateway.ErrTooManyEnvelopes) {
		s.fail(w, r, c, http.StatusRequestEntityTooLarge, string(envelope.CodeTooLarge), err.Error()+"; nothing was recorded")
		return
	}
	if err != nil {
		s.log.Error("ingest from the web page failed", "err", err)
		s.fail(w, r, c, http.StatusServiceUnavailable, string(envelope.CodeTimeout), "the relay could not record the envelopes; nothing was recorded, try again")
		return
	}
	data.Sent = true
	for _, o := range outs {
		v := resultView{Accepted: o.Accepted(), Duplicate: o.Duplicate, Differs: o.Differs, Status: o.Verification.Status, StatusClass: statusClass(o.Verification.Status), Group: o.Event.GroupID, Seq: o.Event.Seq}
		if o.Envelope != nil {
			v.Line, v.From, v.To, v.Intent, v.Message = o.Envelope.Line, o.Envelope.From, o.Envelope.To, o.Envelope.Intent, o.Envelope.Message
		}
		if d, err := gateway.ParseData(o.Event); err == nil && d.X != nil && d.X.Envelope != nil {
			v.Thread, v.Message = d.X.Envelope.Thread, d.X.Envelope.Message
		}
		if o.Reject != nil {
			v.Code, v.Reason = string(o.Reject.Code), o.Reject.Reason
			if o.Reject.Line > 0 {
				v.Line = o.Reject.Line
			}
		}
		data.Results = append(data.Results, v)
	}
	status := http.StatusOK
	for _, v := range data.Results {
		if !v.Accepted {
			status = http.StatusUnprocessableEntity
		}
	}
	s.render(w, r, c, status, "paste", "Paste", data)
}

// composeForm is the compose form's fields.
type composeForm struct {
	From, To, Intent, Context string
	Thread, Parent            string
	User, Session             string
	Priority                  string
	Body                      string
}

type composeData struct {
	Form      composeForm
	Intents   []string
	ReplyTo   *item
	Canonical string
	Fenced    string
	Error     string
	Previewed bool
}

// compose is the compose form; ?group=G&reply=EVENT fills it in as a
// reply to that event's envelope.
func (s *Server) compose(w http.ResponseWriter, r *http.Request, c *call) {
	data := composeData{Intents: envelope.Intents, Form: composeForm{Intent: envelope.IntentRequest}}
	if !c.local {
		data.Form.From = c.principal
	}
	if id := r.URL.Query().Get("reply"); id != "" {
		ev, err := s.relay.Store().Get(r.Context(), id)
		if err != nil {
			s.fail(w, r, c, http.StatusNotFound, gateway.CodeNotFound, "no event "+id)
			return
		}
		d, err := gateway.ParseData(ev)
		if err != nil || d.X == nil || d.X.Envelope == nil {
			s.fail(w, r, c, http.StatusBadRequest, gateway.CodeInvalid, "event "+id+" holds no envelope to reply to")
			return
		}
		re := envelope.NewReply(d.X.Envelope, envelope.IntentRespond, "")
		data.Form = composeForm{From: re.From, To: re.To, Intent: re.Intent, Context: re.Context, Thread: re.Thread, Parent: re.Parent, User: re.User, Session: re.Session}
		t := newTimeline()
		if it, ok := t.add(ev); ok {
			data.ReplyTo = &it
		}
	}
	s.render(w, r, c, http.StatusOK, "compose", "Compose", data)
}

// composePost turns the form into a canonical envelope (Relay.Compose,
// unsigned) and shows it with its copy buttons.
func (s *Server) composePost(w http.ResponseWriter, r *http.Request, c *call) {
	f := composeForm{
		From: strings.TrimSpace(r.PostFormValue("from")), To: strings.TrimSpace(r.PostFormValue("to")),
		Intent: strings.TrimSpace(r.PostFormValue("intent")), Context: strings.TrimSpace(r.PostFormValue("context")),
		Thread: strings.TrimSpace(r.PostFormValue("thread")), Parent: strings.TrimSpace(r.PostFormValue("parent")),
		User: strings.TrimSpace(r.PostFormValue("user")), Session: strings.TrimSpace(r.PostFormValue("session")),
		Priority: r.PostFormValue("priority"), Body: r.PostFormValue("body"),
	}
	data := composeData{Form: f, Intents: envelope.Intents, Previewed: true}
	if f.From == "" || f.To == "" {
		data.Error = "from and to are required"
		s.render(w, r, c, http.StatusBadRequest, "compose", "Compose", data)
		return
	}
	req := gateway.SendRequest{From: f.From, To: f.To, Intent: f.Intent, Context: f.Context, Thread: f.Thread, Parent: f.Parent, User: f.User, Session: f.Session, Body: f.Body}
	if f.Priority == "high" || f.Priority == "urgent" || f.Priority == "low" {
		req.Meta = []envelope.Meta{{Namespace: "routing", Fields: []envelope.Field{{Key: "X-Priority", Value: f.Priority}}}}
	}
	text, err := s.relay.Compose(r.Context(), f.From, req, nil)
	if err != nil {
		var ae *gateway.ActionError
		if errors.As(err, &ae) {
			data.Error = ae.Reason
		} else {
			data.Error = err.Error()
		}
		s.render(w, r, c, http.StatusBadRequest, "compose", "Compose", data)
		return
	}
	data.Canonical = string(text)
	var buf bytes.Buffer
	ew := envelope.NewWriter(&buf)
	ew.Fence = true
	if env, err := envelope.Unmarshal(text); err == nil && ew.Write(env) == nil {
		data.Fenced = buf.String()
	} else {
		data.Fenced = fenced(data.Canonical)
	}
	s.render(w, r, c, http.StatusOK, "compose", "Compose", data)
}

// threadLink is the thread view's path, with the item's anchor.
func threadLink(group, thread string, seq int64) string {
	p := "/ui/groups/" + client.PathSegment(group)
	if thread != "" {
		p += "/threads/" + client.PathSegment(thread)
	}
	if seq > 0 {
		p += "#e" + strconv.FormatInt(seq, 10)
	}
	return p
}
