package jetstream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/nats-io/nats.go"
)

// maxTokenLen is the longest subject token token writes verbatim (after
// escaping); longer strings become a hash.
const maxTokenLen = 128

// token encodes s as one NATS subject token that is also a valid KV key
// part: ASCII letters, digits, '-' and '_' stay as they are, every other
// byte becomes "=XX" (two upper-case hex digits). The encoding is
// injective. A result longer than maxTokenLen is replaced by "=H" and the
// hex SHA-256 of s, which untoken cannot reverse; the stored messages
// always carry the original string, so nothing depends on reversing it.
func token(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "=%02X", c)
	}
	if b.Len() == 0 {
		return "=" // never used: callers reject empty strings
	}
	if b.Len() > maxTokenLen {
		sum := sha256.Sum256([]byte(s))
		return "=H" + hex.EncodeToString(sum[:])
	}
	return b.String()
}

// untoken reverses token; ok is false for a hashed, malformed or
// non-canonical token (one token would not write).
func untoken(t string) (s string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c != '=' {
			b.WriteByte(c)
			continue
		}
		if i+3 > len(t) {
			return "", false
		}
		v, err := strconv.ParseUint(t[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	// Only what token writes: "=61", "=2e" or a raw "é" would name the
	// same string as another token, so one group could be listed twice.
	if s = b.String(); token(s) != t {
		return "", false
	}
	return s, true
}

// Subjects of the ledger stream, under the prefix p (Options.Prefix):
//
//	p.ev.<group>.<kind>   one message per event (the event's JSON)
//	p.id.<event id>       id index: one message per event
//	p.key.<dedupe key>    dedupe index: one message per dedupe key, forever
//	p.pos.<group>.<n>     position of the group's event n*posEvery+1
//
// Every index message is written in the same atomic batch as its event
// and holds an indexEntry.
func (s *Store) evSubject(group, kind string) string {
	return s.prefix + ".ev." + token(group) + "." + token(kind)
}
func (s *Store) groupFilter(group string) string { return s.prefix + ".ev." + token(group) + ".*" }
func (s *Store) idSubject(id string) string      { return s.prefix + ".id." + token(id) }
func (s *Store) keySubject(key string) string    { return s.prefix + ".key." + token(key) }
func (s *Store) posSubject(group string, seq int64) string {
	return s.prefix + ".pos." + token(group) + "." + strconv.FormatInt((seq-1)/posEvery, 10)
}

// posEvery is the distance, in events of one group, between two
// position checkpoints (p.pos.<group>.<n>). Finding where seq N of a
// group starts in the stream reads at most posEvery-1 events too many.
const posEvery = 32

// wireEvent is the payload of an event message: the CCCS event plus its
// dedupe key, as in the export format.
type wireEvent struct {
	ledger.Event
	DedupeKey string `json:"x_dedupe_key,omitempty"`
}

// encodeEvent encodes ev without HTML escaping, so that data is stored
// byte for byte as NormalizeData left it.
func encodeEvent(ev ledger.Event) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(wireEvent{Event: ev, DedupeKey: ev.DedupeKey}); err != nil {
		return nil, fmt.Errorf("jetstream: encode event %s: %w", ev.ID, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func decodeEvent(m *rawMsg) (ledger.Event, error) {
	var w wireEvent
	if err := json.Unmarshal(m.data, &w); err != nil {
		return ledger.Event{}, fmt.Errorf("jetstream: stream message %d (%s): bad event: %w", m.seq, m.subject, err)
	}
	ev := w.Event
	ev.DedupeKey = w.DedupeKey
	return ev, nil
}

// indexEntry is the payload of an index message (id, key or pos): which
// event it points to, and where: the event message is Back messages
// before the index message in the stream. Atomic batches are stored in
// consecutive stream sequences, so Back is known when the batch is built.
type indexEntry struct {
	ID    string `json:"id"`
	Group string `json:"group_id"`
	Seq   int64  `json:"seq"`
	Back  uint64 `json:"back"`
}

// rawMsg is a stream message as the direct get and message get APIs
// return it.
type rawMsg struct {
	subject string
	seq     uint64
	hdr     nats.Header
	data    []byte
}

// Errors of the JetStream API this package branches on, by err_code.
const (
	errCodeWrongLastSeq         = 10071 // expected-last-subject-sequence failed
	errCodeWrongLastSeqConst    = 10164 // the same, on replicated streams / in flight
	errCodeLastSeqNotReady      = 10163 // leader not ready for expected checks
	errCodeDuplicateConflict    = 10158 // msg id in process
	errCodeBatchDuplicate       = 10201 // batch contains a duplicate msg id
	errCodeBatchIncomplete      = 10176 // batch abandoned (gap, timeout)
	errCodeBatchTooManyInflight = 10210
	errCodeNotLeader            = 10009
	errCodeNoMessage            = 10037 // message get: no message found
	errCodeStreamNotFound       = 10059
)

// apiError is an error answer of the JetStream API.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("nats: %s (code %d, err_code %d)", e.Description, e.Code, e.ErrCode)
}

// isConflict reports whether err is a failed compare-and-set: another
// writer got there first, so the caller refreshes and tries again.
func isConflict(err error) bool {
	var ae *apiError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrCode {
	case errCodeWrongLastSeq, errCodeWrongLastSeqConst, errCodeDuplicateConflict, errCodeBatchDuplicate:
		return true
	}
	return false
}

// isTransient reports whether err may go away by itself (a leader
// election, a reconnect, a full inflight table, a timeout), so the
// operation is retried unchanged.
func isTransient(err error) bool {
	var ae *apiError
	if errors.As(err, &ae) {
		switch ae.ErrCode {
		case errCodeLastSeqNotReady, errCodeBatchIncomplete, errCodeBatchTooManyInflight, errCodeNotLeader:
			return true
		}
		return ae.Code == 503 || ae.Code == 408 || ae.Code == 429 || ae.Code == 500
	}
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrConnectionClosed) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrDisconnected) ||
		errors.Is(err, errStale)
}

// errNoMsg reports that a get found no message.
var errNoMsg = errors.New("jetstream: no message")

// errStale reports a read answered by a replica that is behind.
var errStale = errors.New("jetstream: replica behind")

// getRequest is the body of a direct get or message get request
// (JSApiMsgGetRequest in nats-server).
type getRequest struct {
	Seq       uint64   `json:"seq,omitempty"`
	LastFor   string   `json:"last_by_subj,omitempty"`
	NextFor   string   `json:"next_by_subj,omitempty"`
	Batch     int      `json:"batch,omitempty"`
	MaxBytes  int      `json:"max_bytes,omitempty"`
	MultiLast []string `json:"multi_last,omitempty"`
}

// requestCtx bounds one request to the server by Options.Timeout, within
// ctx.
func (s *Store) requestCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.Timeout)
}

// directGet sends a single-message direct get, which any current replica
// may answer. It returns errNoMsg when there is no such message.
func (s *Store) directGet(ctx context.Context, req getRequest) (*rawMsg, error) {
	body, _ := json.Marshal(req)
	rctx, cancel := s.requestCtx(ctx)
	defer cancel()
	resp, err := s.nc.RequestWithContext(rctx, "$JS.API.DIRECT.GET."+s.opts.Stream, body)
	if err != nil {
		return nil, fmt.Errorf("jetstream: direct get: %w", err)
	}
	return parseDirect(resp)
}

// parseDirect turns one direct get answer into a rawMsg, errNoMsg or an
// error; a nil *rawMsg with a nil error is an end-of-batch marker.
func parseDirect(m *nats.Msg) (*rawMsg, error) {
	if st := m.Header.Get("Status"); st != "" {
		switch st {
		case "404":
			return nil, errNoMsg
		case "204": // EOB
			return nil, nil
		default:
			return nil, fmt.Errorf("jetstream: direct get: status %s %s", st, m.Header.Get("Description"))
		}
	}
	seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("jetstream: direct get: bad Nats-Sequence %q", m.Header.Get("Nats-Sequence"))
	}
	return &rawMsg{subject: m.Header.Get("Nats-Subject"), seq: seq, hdr: m.Header, data: m.Data}, nil
}

// directMany sends a batched or multi-last direct get and collects the
// answers until the end-of-batch marker. All answers come from one
// replica.
func (s *Store) directMany(ctx context.Context, req getRequest) ([]*rawMsg, error) {
	body, _ := json.Marshal(req)
	rctx, cancel := s.requestCtx(ctx)
	defer cancel()
	inbox := s.nc.NewRespInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("jetstream: direct get: %w", err)
	}
	defer sub.Unsubscribe()
	if err := s.nc.PublishRequest("$JS.API.DIRECT.GET."+s.opts.Stream, inbox, body); err != nil {
		return nil, fmt.Errorf("jetstream: direct get: %w", err)
	}
	var out []*rawMsg
	for {
		m, err := sub.NextMsgWithContext(rctx)
		if err != nil {
			return nil, fmt.Errorf("jetstream: direct get: %w", err)
		}
		if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
			return nil, fmt.Errorf("jetstream: direct get: %w", nats.ErrNoResponders)
		}
		rm, err := parseDirect(m)
		switch {
		case errors.Is(err, errNoMsg):
			return out, nil
		case err != nil:
			return nil, err
		case rm == nil:
			return out, nil
		}
		out = append(out, rm)
	}
}

// storedMsg is a message in a message get answer.
type storedMsg struct {
	Subject string    `json:"subject"`
	Seq     uint64    `json:"seq"`
	Header  []byte    `json:"hdrs,omitempty"`
	Data    []byte    `json:"data,omitempty"`
	Time    time.Time `json:"time"`
}

// leaderGet sends a message get, which only the stream leader answers:
// it sees every acknowledged write. It returns errNoMsg when there is no
// such message.
func (s *Store) leaderGet(ctx context.Context, req getRequest) (*rawMsg, error) {
	body, _ := json.Marshal(req)
	rctx, cancel := s.requestCtx(ctx)
	defer cancel()
	resp, err := s.nc.RequestWithContext(rctx, "$JS.API.STREAM.MSG.GET."+s.opts.Stream, body)
	if err != nil {
		return nil, fmt.Errorf("jetstream: message get: %w", err)
	}
	var r struct {
		Message *storedMsg `json:"message"`
		Error   *apiError  `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return nil, fmt.Errorf("jetstream: message get: bad answer: %w", err)
	}
	if r.Error != nil {
		if r.Error.Code == 404 || r.Error.ErrCode == errCodeNoMessage {
			return nil, errNoMsg
		}
		return nil, fmt.Errorf("jetstream: message get: %w", r.Error)
	}
	if r.Message == nil {
		return nil, errNoMsg
	}
	return &rawMsg{subject: r.Message.Subject, seq: r.Message.Seq, data: r.Message.Data}, nil
}

// get reads one message. It asks any replica first; a replicated
// stream's "not found" is confirmed by the leader, because a follower
// may not have applied the latest writes yet. With fresh set, it asks
// the leader only.
func (s *Store) get(ctx context.Context, req getRequest, fresh bool) (*rawMsg, error) {
	if !fresh {
		m, err := s.directGet(ctx, req)
		if err == nil || !errors.Is(err, errNoMsg) || s.replicas == 1 {
			return m, err
		}
	}
	return s.leaderGet(ctx, req)
}

// lookupIndex returns the index entry on subj and its stream sequence.
func (s *Store) lookupIndex(ctx context.Context, subj string, fresh bool) (indexEntry, uint64, error) {
	m, err := s.get(ctx, getRequest{LastFor: subj}, fresh)
	if err != nil {
		return indexEntry{}, 0, err
	}
	var e indexEntry
	if err := json.Unmarshal(m.data, &e); err != nil {
		return indexEntry{}, 0, fmt.Errorf("jetstream: index %s: %w", subj, err)
	}
	return e, m.seq, nil
}

// eventAt reads the event stored at stream sequence seq.
func (s *Store) eventAt(ctx context.Context, seq uint64) (ledger.Event, error) {
	m, err := s.get(ctx, getRequest{Seq: seq}, false)
	if err != nil {
		return ledger.Event{}, err
	}
	if !strings.HasPrefix(m.subject, s.prefix+".ev.") {
		return ledger.Event{}, fmt.Errorf("jetstream: stream message %d is %s, not an event", seq, m.subject)
	}
	ev, err := decodeEvent(m)
	if err == nil {
		s.rememberPos(ev.GroupID, ev.Seq, seq)
	}
	return ev, err
}

// eventByIndex follows the index message on subj to its event.
func (s *Store) eventByIndex(ctx context.Context, subj string, fresh bool) (ledger.Event, error) {
	e, seq, err := s.lookupIndex(ctx, subj, fresh)
	if err != nil {
		return ledger.Event{}, err
	}
	if e.Back == 0 || e.Back >= seq {
		return ledger.Event{}, fmt.Errorf("jetstream: index %s: bad back pointer %d at %d", subj, e.Back, seq)
	}
	ev, err := s.eventAt(ctx, seq-e.Back)
	if err != nil {
		return ledger.Event{}, fmt.Errorf("jetstream: index %s: %w", subj, err)
	}
	if ev.ID != e.ID {
		return ledger.Event{}, fmt.Errorf("jetstream: index %s points to event %s at %d, want %s", subj, ev.ID, seq-e.Back, e.ID)
	}
	return ev, nil
}
