package a2a

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// metaKey is the key of the crosstalk fields in A2A metadata: on the task
// (the group and the last envelope sent and received) and on the agent's
// messages and artifacts (the envelope they came from).
const metaKey = "crosstalk"

// quota counts the tasks that wait for a reply, over all agents.
type quota struct {
	mu       sync.Mutex
	max, cur int
	per      map[string]int // by principal
}

// share is how many of the quota one principal may hold: a quarter, so
// that a caller whose tasks wait (returnImmediately, or gone) for a day
// cannot take every other caller's.
func (q *quota) share() int { return max(1, q.max/4) }

// acquire takes one for principal, or says why it cannot.
func (q *quota) acquire(principal string) (ok bool, why string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.cur >= q.max:
		return false, fmt.Sprintf("%d tasks already wait for replies", q.max)
	case q.per[principal] >= q.share():
		return false, fmt.Sprintf("%d tasks of yours already wait for replies (a caller may have a quarter of the relay's %d)", q.per[principal], q.max)
	}
	if q.per == nil {
		q.per = map[string]int{}
	}
	q.cur++
	q.per[principal]++
	return true, ""
}

func (q *quota) release(principal string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.cur--
	if q.per[principal]--; q.per[principal] <= 0 {
		delete(q.per, principal)
	}
}

// executor is the a2asrv.AgentExecutor of one agent: it turns a message
// into an envelope and waits for the agent's reply in the ledger.
type executor struct {
	b       *Bridge
	agent   gateway.Agent
	pending *quota
}

var _ a2asrv.AgentExecutor = (*executor)(nil)

// callerOf is the principal an execution runs for.
func callerOf(ctx context.Context) (caller, error) {
	c, ok := ctx.Value(callerKey{}).(caller)
	if !ok || c.principal == "" {
		return caller{}, sdk.ErrUnauthenticated
	}
	return c, nil
}

// Execute sends the message to the agent as an envelope, then reports the
// task's progress until the agent's reply settles it.
func (e *executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		c, err := callerOf(ctx)
		if err != nil {
			yield(nil, err)
			return
		}
		body, err := textOf(ec.Message)
		if err != nil {
			yield(nil, err)
			return
		}
		if ok, why := e.pending.acquire(c.principal); !ok {
			yield(nil, fmt.Errorf("%w: %s", sdk.ErrServerError, why))
			return
		}
		defer e.pending.release(c.principal)

		var parent string
		if ec.StoredTask != nil {
			// A continuation (after input-required) answers the agent's
			// last reply.
			parent = metaString(ec.StoredTask.Metadata, "reply")
		}
		sent, err := e.send(ctx, c, ec, envelope.IntentRequest, body, parent)
		if err != nil {
			yield(nil, err)
			return
		}
		meta := map[string]any{metaKey: map[string]any{
			"group": sent.GroupID, "message": sent.message, "event": sent.ID, "agent": e.agent.ID,
		}}
		if ec.StoredTask == nil {
			task := sdk.NewSubmittedTask(ec, ec.Message)
			task.Metadata = meta
			if !yield(task, nil) {
				return
			}
		}
		working := sdk.NewStatusUpdateEvent(ec, sdk.TaskStateWorking, nil)
		working.Metadata = meta
		if !yield(working, nil) {
			return
		}
		e.await(ctx, ec, sent, yield)
	}
}

// sentEnvelope is an envelope the bridge recorded.
type sentEnvelope struct {
	ledger.Event
	message string // envelope message id
}

// send composes an envelope from the caller to the agent and ingests it
// like POST /v1/send does.
func (e *executor) send(ctx context.Context, c caller, ec *a2asrv.ExecutorContext, intent, body, parent string) (sentEnvelope, error) {
	req := gateway.SendRequest{
		From: c.principal, To: e.agent.ID, Intent: intent, Context: ec.ContextID, Parent: parent, Body: body,
		Meta: []envelope.Meta{{Namespace: "a2a", Fields: a2aFields(ec)}},
	}
	text, err := e.b.relay.Compose(ctx, c.principal, req, e.b.opts.Signer)
	if err != nil {
		var ae *gateway.ActionError
		if errors.As(err, &ae) {
			return sentEnvelope{}, fmt.Errorf("%w: %s", sdk.ErrInvalidParams, ae.Reason)
		}
		return sentEnvelope{}, fmt.Errorf("a2a: composing the envelope: %w", err)
	}
	in := gateway.Intake{Transport: "a2a", Source: "a2a task " + string(ec.TaskID), Data: bytes.NewReader(text)}
	if c.authenticated {
		in.Principal = c.principal
	}
	outs, err := e.b.relay.Ingest(ctx, in)
	if err != nil {
		e.b.log.Error("ingesting an A2A message", "agent", e.agent.ID, "err", err)
		return sentEnvelope{}, fmt.Errorf("%w: the relay could not record the envelope; retry", sdk.ErrInternalError)
	}
	if len(outs) != 1 || outs[0].Envelope == nil {
		return sentEnvelope{}, fmt.Errorf("%w: the message did not make one envelope", sdk.ErrInvalidParams)
	}
	if rj := outs[0].Reject; rj != nil {
		return sentEnvelope{}, fmt.Errorf("%w: %s %s", sdk.ErrInvalidParams, rj.Code, rj.Reason)
	}
	return sentEnvelope{Event: outs[0].Event, message: outs[0].Envelope.Message}, nil
}

// a2aFields records the A2A ids in the envelope's `meta: a2a` block.
func a2aFields(ec *a2asrv.ExecutorContext) []envelope.Field {
	fs := []envelope.Field{{Key: "Task-ID", Value: string(ec.TaskID)}, {Key: "Context-ID", Value: ec.ContextID}}
	if ec.Message != nil {
		fs = append(fs, envelope.Field{Key: "Message-ID", Value: ec.Message.ID})
	}
	return fs
}

// await follows the envelope's group from its event on, until the agent
// replies, its delivery fails for good, the reply timeout passes, or the
// bridge closes.
func (e *executor) await(ctx context.Context, ec *a2asrv.ExecutorContext, sent sentEnvelope, yield func(sdk.Event, error) bool) {
	ctx, cancel := context.WithTimeout(ctx, e.b.opts.ReplyTimeout)
	defer cancel()
	stop := context.AfterFunc(e.b.ctx, cancel)
	defer stop()
	for ev, err := range e.b.relay.Store().Follow(ctx, sent.GroupID, sent.Seq) {
		if err != nil {
			if ctx.Err() == nil {
				e.b.log.Error("following the group for a reply", "group", sent.GroupID, "err", err)
				yield(e.status(ec, sdk.TaskStateFailed, "the relay could not read its ledger: "+err.Error(), nil), nil)
			}
			return
		}
		d, err := gateway.ParseData(ev)
		if err != nil {
			continue
		}
		if x := d.X; x != nil && x.Envelope != nil {
			// Any envelope: a RESPOND is a chat.message, an ACK a
			// chat.ack or reaction, an ERROR a system.notify.
			if x.Envelope.Parent != sent.message || !attention.SameActor(x.Sender, e.agent.ID) {
				continue
			}
			state, final := stateOf(x.Envelope.Intent)
			msg := e.agentMessage(ec, x.Envelope, ev)
			taskMeta := map[string]any{metaKey: map[string]any{
				"group": sent.GroupID, "message": sent.message, "event": sent.ID, "agent": e.agent.ID,
				"reply": x.Envelope.Message, "reply_event": ev.ID,
			}}
			if state == sdk.TaskStateCompleted {
				art := sdk.NewArtifactEvent(ec, sdk.NewTextPart(x.Envelope.Body))
				art.Artifact.Name = "reply"
				art.Artifact.Metadata = msg.Metadata
				if !yield(art, nil) {
					return
				}
			}
			up := sdk.NewStatusUpdateEvent(ec, state, msg)
			up.Metadata = taskMeta
			if !yield(up, nil) || final {
				return
			}
			continue
		}
		if ev.Kind == gateway.KindDelivery && d.EventID == sent.ID && attention.SameActor(d.ActorID, e.agent.ID) && d.State == "failed" {
			yield(e.status(ec, sdk.TaskStateFailed, fmt.Sprintf("%s could not be reached: %s", e.agent.ID, d.Note), nil), nil)
			return
		}
	}
	switch {
	case e.b.ctx.Err() != nil:
		// The relay shuts down, and tasks live in memory: end the task
		// (the SDK waits for a final state), so that its callers' requests
		// and streams end too. The request stays in the ledger.
		yield(e.status(ec, sdk.TaskStateFailed, fmt.Sprintf("the relay shut down before %s replied; the request %s is in its ledger", e.agent.ID, sent.message), nil), nil)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		yield(e.status(ec, sdk.TaskStateFailed, fmt.Sprintf("no reply from %s within %s", e.agent.ID, e.b.opts.ReplyTimeout), nil), nil)
	}
}

// stateOf maps a reply's intent to the task's state, and whether that
// ends the wait: an ACK only says the agent has the message.
func stateOf(intent string) (sdk.TaskState, bool) {
	intent, _, _ = envelope.NormalizeIntent(intent)
	switch intent {
	case envelope.IntentAck:
		return sdk.TaskStateWorking, false
	case envelope.IntentError:
		return sdk.TaskStateFailed, true
	case envelope.IntentNack:
		return sdk.TaskStateRejected, true
	case envelope.IntentRequest, envelope.IntentPoll, envelope.IntentEscalate:
		return sdk.TaskStateInputRequired, true
	}
	return sdk.TaskStateCompleted, true
}

// agentMessage is the A2A message of a reply envelope.
func (e *executor) agentMessage(ec *a2asrv.ExecutorContext, env *envelope.Envelope, ev ledger.Event) *sdk.Message {
	msg := sdk.NewMessageForTask(sdk.MessageRoleAgent, ec, sdk.NewTextPart(env.Body))
	msg.ID = env.Message
	msg.Metadata = map[string]any{metaKey: map[string]any{
		"message": env.Message, "event": ev.ID, "group": ev.GroupID, "from": env.From, "intent": env.Intent,
	}}
	return msg
}

// status is a status update with a text message from the agent.
func (e *executor) status(ec *a2asrv.ExecutorContext, state sdk.TaskState, text string, meta map[string]any) *sdk.TaskStatusUpdateEvent {
	up := sdk.NewStatusUpdateEvent(ec, state, sdk.NewMessageForTask(sdk.MessageRoleAgent, ec, sdk.NewTextPart(text)))
	up.Metadata = meta
	return up
}

// Cancel records a CLOSE envelope to the agent, answering the task's last
// envelope, and cancels the task.
func (e *executor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		c, err := callerOf(ctx)
		if err != nil {
			yield(nil, err)
			return
		}
		var parent string
		if ec.StoredTask != nil {
			parent = metaString(ec.StoredTask.Metadata, "reply")
			if parent == "" {
				parent = metaString(ec.StoredTask.Metadata, "message")
			}
		}
		if _, err := e.send(ctx, c, ec, envelope.IntentClose, "The A2A client canceled this task.", parent); err != nil {
			yield(nil, err)
			return
		}
		yield(e.status(ec, sdk.TaskStateCanceled, "canceled", nil), nil)
	}
}

// metaString reads a string field of the task's crosstalk metadata.
func metaString(meta map[string]any, key string) string {
	m, _ := meta[metaKey].(map[string]any)
	s, _ := m[key].(string)
	return s
}

// textOf is the envelope body of a message: its text parts, and its data
// parts as JSON, in order, separated by blank lines. Raw bytes and file
// URLs have no place in an envelope.
func textOf(m *sdk.Message) (string, error) {
	if m == nil {
		return "", fmt.Errorf("%w: no message", sdk.ErrInvalidParams)
	}
	for i, p := range m.Parts {
		switch p.Content.(type) {
		case sdk.Text, sdk.Data:
		default:
			return "", fmt.Errorf("%w: part %d is %T; the relay carries text and JSON data only", sdk.ErrUnsupportedContentType, i+1, p.Content)
		}
	}
	body := partsText(m.Parts)
	if strings.TrimSpace(body) == "" {
		return "", fmt.Errorf("%w: the message has no text", sdk.ErrInvalidParams)
	}
	return body, nil
}
