package mail

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/transports"
	"github.com/crosstalk-go/crosstalk/transports/mail/mailtest"
)

// recorder is a Handler that records what it gets.
type recorder struct {
	mu    sync.Mutex
	got   []transports.Inbound
	at    []time.Time
	ch    chan struct{}
	fail  func(in transports.Inbound) error
	reply func(in transports.Inbound) []byte
}

func newRecorder() *recorder { return &recorder{ch: make(chan struct{}, 1000)} }

func (r *recorder) handle(ctx context.Context, in transports.Inbound) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		if err := r.fail(in); err != nil {
			return nil, err
		}
	}
	r.got = append(r.got, in)
	r.at = append(r.at, time.Now())
	r.ch <- struct{}{}
	if r.reply != nil {
		return r.reply(in), nil
	}
	return nil, nil
}

func (r *recorder) snapshot() ([]transports.Inbound, []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got), slices.Clone(r.at)
}

// wait waits until n calls were recorded or d passed.
func (r *recorder) wait(t *testing.T, n int, d time.Duration) []transports.Inbound {
	t.Helper()
	deadline := time.After(d)
	for {
		got, _ := r.snapshot()
		if len(got) >= n {
			return got
		}
		select {
		case <-r.ch:
		case <-deadline:
			t.Fatalf("handler called %d times within %v, want %d", len(got), d, n)
		}
	}
}

// run runs rc.Receive until the test ends (or stop is called) and checks
// that it returns nil promptly after the cancel.
func run(t *testing.T, rc *Receiver, h transports.Handler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rc.Receive(ctx, h) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Receive = %v after cancel, want nil", err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("Receive did not return within 10s of cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// testEnvelope returns an envelope text and its message id.
func testEnvelope(t testing.TB, body string) ([]byte, string) {
	t.Helper()
	e := envelope.New("TESTER", "RELAY", envelope.IntentRequest, body)
	e.Context = "mail tests"
	b, err := envelope.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b, e.Message
}

func messageIDsOf(t *testing.T, ins []transports.Inbound) []string {
	t.Helper()
	var ids []string
	for _, in := range ins {
		for _, e := range readAll(t, in.Data) {
			ids = append(ids, e.Message)
		}
	}
	return ids
}

var uidRE = regexp.MustCompile(`;UID=(\d+)`)

func uidOf(t *testing.T, in transports.Inbound) int {
	t.Helper()
	m := uidRE.FindStringSubmatch(in.Source)
	if m == nil {
		t.Fatalf("Source %q has no UID", in.Source)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func deliver(t *testing.T, s *mailtest.Stack, user string, raw []byte) {
	t.Helper()
	if err := s.Deliver(context.Background(), "sender@example.test", mailtest.Address(user), raw); err != nil {
		t.Fatal(err)
	}
}

// waitFlags waits until every mail in user's mailbox carries the
// processed keyword and \Seen.
func waitFlags(t *testing.T, s *mailtest.Stack, user, mailbox string, n int) []mailtest.Message {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		msgs, err := s.Messages(user, mailbox)
		if err != nil {
			t.Fatal(err)
		}
		ok := len(msgs) == n
		for _, m := range msgs {
			ok = ok && m.HasFlag(DefaultProcessedKeyword) && m.HasFlag(imap.FlagSeen)
		}
		if ok {
			return msgs
		}
		if time.Now().After(deadline) {
			for _, m := range msgs {
				t.Logf("uid %d flags %v", m.UID, m.Flags)
			}
			t.Fatalf("%d mails in %s, want %d, all with %s and \\Seen", len(msgs), mailbox, n, DefaultProcessedKeyword)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestIdleLatency measures how long a delivered mail takes to reach the
// Handler under IDLE. Polling is set to 30 s, so only IDLE can be that
// fast. Dovecot batches change notifications for 0.5 s.
func TestIdleLatency(t *testing.T) {
	s := realStack(t)
	user := s.NewUser()
	rec := newRecorder()
	rc := receiver(t, s, user, filepath.Join(t.TempDir(), "state"), nil, func(o *Options) { o.PollInterval = 30 * time.Second })
	run(t, rc, rec.handle)
	text, _ := testEnvelope(t, "warm-up")
	deliver(t, s, user, plainMail("x@example.test", mailtest.Address(user), "warm-up", text))
	rec.wait(t, 1, 5*time.Second)
	time.Sleep(200 * time.Millisecond) // back in IDLE
	var lat []time.Duration
	for i := 0; i < 3; i++ {
		text, _ := testEnvelope(t, "latency")
		t0 := time.Now()
		deliver(t, s, user, plainMail("x@example.test", mailtest.Address(user), "latency", text))
		rec.wait(t, 2+i, 5*time.Second)
		_, at := rec.snapshot()
		lat = append(lat, at[len(at)-1].Sub(t0))
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("IDLE latency, LMTP delivery → Handler: %v", lat)
	for _, l := range lat {
		if l > 3*time.Second {
			t.Errorf("latency %v, want < 3s (IDLE)", l)
		}
	}
}

// TestPollingFallback: without IDLE (disabled, hidden by the server, or
// refused by it) mail still arrives, by polling.
func TestPollingFallback(t *testing.T) {
	s := realStack(t)
	for _, tc := range []struct {
		name    string
		disable bool
		proxy   string
	}{
		{"DisableIdle", true, ""},
		{"ServerWithoutIdle", false, "hide"},
		{"ServerRefusesIdle", false, "refuse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user := s.NewUser()
			rec := newRecorder()
			rc := receiver(t, s, user, filepath.Join(t.TempDir(), "state"), nil, func(o *Options) {
				o.PollInterval = 300 * time.Millisecond
				o.DisableIdle = tc.disable
			})
			if tc.proxy != "" {
				rc.srv.Addr = newIMAPProxy(t, s.IMAPAddr, tc.proxy).Addr
				rc.srv.Security = SecurityNone // the proxy reads the plaintext
			}
			run(t, rc, rec.handle)
			time.Sleep(500 * time.Millisecond) // past the first scan
			text, id := testEnvelope(t, "polled")
			t0 := time.Now()
			deliver(t, s, user, plainMail("x@example.test", mailtest.Address(user), "poll", text))
			got := rec.wait(t, 1, 5*time.Second)
			t.Logf("polling latency %v", time.Since(t0))
			if ids := messageIDsOf(t, got); len(ids) != 1 || ids[0] != id {
				t.Errorf("received %v, want [%s]", ids, id)
			}
		})
	}
}

// rfc822Size is the size item of a FETCH response.
var rfc822Size = regexp.MustCompile(`RFC822\.SIZE [0-9]+`)

// imapProxy is a plaintext IMAP proxy to a real server that can hide IDLE
// from the capabilities (answering BAD to it: mode "hide"), advertise it
// but refuse it (mode "refuse"), understate every mail's RFC822.SIZE as
// 100 bytes (mode "small-size"), or pass everything (mode ""); Drop cuts
// every connection, as a network failure would.
type imapProxy struct {
	Addr  string
	mu    sync.Mutex
	conns []net.Conn
}

func (p *imapProxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func newIMAPProxy(t *testing.T, target, mode string) *imapProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &imapProxy{Addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); p.Drop(); wg.Wait() })
	idleCmd := regexp.MustCompile(`(?i)^(\S+) IDLE\r?\n$`)
	go func() {
		for {
			cc, err := ln.Accept()
			if err != nil {
				return
			}
			sc, err := net.Dial("tcp", target)
			if err != nil {
				cc.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, cc, sc)
			p.mu.Unlock()
			wg.Add(2)
			var wmu sync.Mutex
			write := func(s string) { wmu.Lock(); io.WriteString(cc, s); wmu.Unlock() }
			closeBoth := func() { cc.Close(); sc.Close() }
			go func() { // server → client
				defer wg.Done()
				defer closeBoth()
				br := bufio.NewReader(sc)
				for {
					line, err := br.ReadString('\n')
					if mode == "hide" && strings.Contains(line, "CAPABILITY") {
						line = strings.Replace(line, " IDLE", "", 1)
					}
					if mode == "small-size" {
						line = rfc822Size.ReplaceAllString(line, "RFC822.SIZE 100")
					}
					if line != "" {
						write(line)
					}
					if err != nil {
						return
					}
				}
			}()
			go func() { // client → server
				defer wg.Done()
				defer closeBoth()
				br := bufio.NewReader(cc)
				for {
					line, err := br.ReadString('\n')
					if m := idleCmd.FindStringSubmatch(line); m != nil && mode != "" {
						if mode == "small-size" {
							io.WriteString(sc, line)
							continue
						}
						if mode == "hide" {
							write(m[1] + " BAD Unknown command\r\n")
						} else {
							write(m[1] + " NO [UNAVAILABLE] IDLE refused by the test proxy\r\n")
						}
						continue
					}
					if line != "" {
						io.WriteString(sc, line)
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

// TestReconnect: a connection lost mid-IDLE is re-established and the
// mail that arrived meanwhile is handed over; Receive never returns.
func TestReconnect(t *testing.T) {
	s := realStack(t)
	user := s.NewUser()
	p := newIMAPProxy(t, s.IMAPAddr, "")
	rc := receiver(t, s, user, filepath.Join(t.TempDir(), "state"), nil, nil)
	rc.srv.Addr, rc.srv.Security = p.Addr, SecurityNone
	rec := newRecorder()
	run(t, rc, rec.handle)
	t1, id1 := testEnvelope(t, "before")
	deliver(t, s, user, plainMail("x@example.test", mailtest.Address(user), "1", t1))
	rec.wait(t, 1, 5*time.Second)
	// Dropped before the flag is stored, the mail would be offered again
	// (at least once; the relay de-duplicates); here the drop comes after.
	waitFlags(t, s, user, "", 1)
	p.Drop()
	t2, id2 := testEnvelope(t, "after")
	deliver(t, s, user, plainMail("x@example.test", mailtest.Address(user), "2", t2))
	got := messageIDsOf(t, rec.wait(t, 2, 10*time.Second))
	if !slices.Equal(got, []string{id1, id2}) {
		t.Errorf("received %v, want [%s %s]", got, id1, id2)
	}
}

// TestUIDOrder: mail is handed over in UID (arrival) order.
func TestUIDOrder(t *testing.T) {
	s := realStack(t)
	user := s.NewUser()
	var want []string
	for i := 0; i < 5; i++ {
		text, id := testEnvelope(t, "order "+strconv.Itoa(i))
		want = append(want, id)
		deliver(t, s, user, plainMail("x@example.test", mailtest.Address(user), "order", text))
	}
	rec := newRecorder()
	rc := receiver(t, s, user, filepath.Join(t.TempDir(), "state"), nil, nil)
	rc.srv.Security = SecurityStartTLS // the default: STARTTLS because the greeting offers it
	run(t, rc, rec.handle)
	got := messageIDsOf(t, rec.wait(t, 5, 5*time.Second))
	if !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

// TestHandlerFailureKeepsOrder: a mail the Handler fails on is offered
// again, and the mail after it waits.
func TestHandlerFailureKeepsOrder(t *testing.T) {
	s := realStack(t)
	user := s.NewUser()
	first, id1 := testEnvelope(t, "first")
	second, id2 := testEnvelope(t, "second")
	deliver(t, s, user, plainMail("x@example.test", mailtest.Address(user), "1", first))
	deliver(t, s, user, plainMail("x@example.test", mailtest.Address(user), "2", second))
	rec := newRecorder()
	fails := 2
	rec.fail = func(in transports.Inbound) error {
		if fails > 0 {
			fails--
			return errors.New("ledger unavailable")
		}
		return nil
	}
	run(t, receiver(t, s, user, filepath.Join(t.TempDir(), "state"), nil, nil), rec.handle)
	got := messageIDsOf(t, rec.wait(t, 2, 10*time.Second))
	if !slices.Equal(got, []string{id1, id2}) {
		t.Errorf("received %v, want [%s %s]", got, id1, id2)
	}
	waitFlags(t, s, user, "", 2)
}

// TestHandlerRefusesWhole: a mail the Handler refuses for good (the
// relay's ErrTooManyEnvelopes: more envelopes than it takes from one
// intake) was offered again for ever, and, order being kept, every later
// mail waited behind it: one mail of a thousand small envelopes stopped
// the relay's mail intake. It is now marked processed, the Handler gets a
// notice naming it instead (so the relay records it), and later mail goes
// on.
func TestHandlerRefusesWhole(t *testing.T) {
	s := realStack(t)
	user := s.NewUser()
	poison, _ := testEnvelope(t, "poison")
	good, id2 := testEnvelope(t, "good")
	deliver(t, s, user, plainMail("x@example.test", mailtest.Address(user), "too many", poison))
	deliver(t, s, user, plainMail("x@example.test", mailtest.Address(user), "fine", good))
	rec := newRecorder()
	rec.fail = func(in transports.Inbound) error {
		if bytes.Contains(in.Data, []byte("poison")) {
			return fmt.Errorf("%w: too many envelopes", transports.ErrPermanent)
		}
		return nil
	}
	run(t, receiver(t, s, user, filepath.Join(t.TempDir(), "state"), nil, nil), rec.handle)
	got := rec.wait(t, 2, 10*time.Second)
	d := string(got[0].Data)
	for _, want := range []string{"refused whole", "too many envelopes", "Subject: too many", "From: x@example.test"} {
		if !strings.Contains(d, want) {
			t.Errorf("notice = %q, want it to contain %q", d, want)
		}
	}
	if len(readAll(t, got[0].Data)) != 0 {
		t.Errorf("notice holds an envelope: %q", d)
	}
	if ids := messageIDsOf(t, got[1:]); !slices.Equal(ids, []string{id2}) {
		t.Errorf("then received %v, want [%s]", ids, id2)
	}
	waitFlags(t, s, user, "", 2)
}

// TestRestart: the state file and the keyword keep processed mail from
// being offered again across restarts; nothing new is skipped.
func TestRestart(t *testing.T) {
	s := realStack(t)
	user := s.NewUser()
	state := filepath.Join(t.TempDir(), "state.json")
	put := func() string {
		text, id := testEnvelope(t, "restart")
		deliver(t, s, user, plainMail("x@example.test", mailtest.Address(user), "restart", text))
		return id
	}
	put()
	put()
	rec := newRecorder()
	stop := run(t, receiver(t, s, user, state, nil, nil), rec.handle)
	rec.wait(t, 2, 5*time.Second)
	stop()

	var st state2
	readJSON(t, state, &st)
	if st.LastUID != 2 || st.UIDValidity == 0 || len(st.MessageIDs) != 2 {
		t.Errorf("state = %+v, want last_uid 2, a uidvalidity and 2 message ids", st)
	}

	// Restart: nothing old again; the new mail once.
	c := put()
	rec2 := newRecorder()
	stop = run(t, receiver(t, s, user, state, nil, nil), rec2.handle)
	rec2.wait(t, 1, 5*time.Second)
	time.Sleep(time.Second)
	stop()
	if got, _ := rec2.snapshot(); !slices.Equal(messageIDsOf(t, got), []string{c}) {
		t.Errorf("after restart received %v, want only [%s]", messageIDsOf(t, got), c)
	}

	// A lost state file: the keyword still guards every processed mail.
	if err := os.Remove(state); err != nil {
		t.Fatal(err)
	}
	rec3 := newRecorder()
	stop = run(t, receiver(t, s, user, state, nil, nil), rec3.handle)
	time.Sleep(1500 * time.Millisecond)
	stop()
	if got, _ := rec3.snapshot(); len(got) != 0 {
		t.Errorf("without state file received %v again, want nothing", messageIDsOf(t, got))
	}
	waitFlags(t, s, user, "", 3)
}

// state2 reads a state file in tests.
type state2 struct {
	UIDValidity uint32   `json:"uidvalidity"`
	LastUID     uint32   `json:"last_uid"`
	MessageIDs  []string `json:"message_ids"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestUIDValidityChange recreates the watched mailbox (a new UIDVALIDITY)
// and restores its mail without flags, as a restore from backup would:
// nothing is offered again (remembered Message-IDs), new mail is.
func TestUIDValidityChange(t *testing.T) {
	s := realStack(t)
	user := s.NewUser()
	state := filepath.Join(t.TempDir(), "state.json")
	c, err := s.Dial(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	appendMail := func(raw []byte) {
		t.Helper()
		cmd := c.Append("Work", int64(len(raw)), nil)
		cmd.Write(raw)
		cmd.Close()
		if _, err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Create("Work", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	t1, id1 := testEnvelope(t, "one")
	t2, id2 := testEnvelope(t, "two")
	m1 := plainMail("x@example.test", mailtest.Address(user), "one", t1)
	m2 := plainMail("x@example.test", mailtest.Address(user), "two", t2)
	appendMail(m1)
	appendMail(m2)
	rec := newRecorder()
	mod := func(o *Options) { o.Mailbox = "Work" }
	stop := run(t, receiver(t, s, user, state, nil, mod), rec.handle)
	if got := messageIDsOf(t, rec.wait(t, 2, 5*time.Second)); !slices.Equal(got, []string{id1, id2}) {
		t.Fatalf("received %v, want [%s %s]", got, id1, id2)
	}
	stop()
	var before state2
	readJSON(t, state, &before)

	if err := c.Delete("Work").Wait(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // Dovecot's UIDVALIDITY is a timestamp
	if err := c.Create("Work", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	appendMail(m1)
	appendMail(m2)
	t3, id3 := testEnvelope(t, "three")
	appendMail(plainMail("x@example.test", mailtest.Address(user), "three", t3))

	rec2 := newRecorder()
	stop = run(t, receiver(t, s, user, state, nil, mod), rec2.handle)
	rec2.wait(t, 1, 5*time.Second)
	time.Sleep(time.Second)
	stop()
	if got, _ := rec2.snapshot(); !slices.Equal(messageIDsOf(t, got), []string{id3}) {
		t.Errorf("after the UIDVALIDITY change received %v, want only [%s]", messageIDsOf(t, got), id3)
	}
	var after state2
	readJSON(t, state, &after)
	if after.UIDValidity == before.UIDValidity || after.LastUID != 3 {
		t.Errorf("state after = %+v, before = %+v: want a new uidvalidity and last_uid 3", after, before)
	}
	waitFlags(t, s, user, "Work", 3)
}

// TestVectorsRealServer delivers every mail vector into Dovecot and checks
// what the Receiver hands over: multipart, quoted-printable, base64,
// charsets, quoted replies, split envelopes, mail without envelope.
func TestVectorsRealServer(t *testing.T) {
	s := realStack(t)
	user := s.NewUser()
	names := mailVectors(t)
	vecs := map[int]mailVector{}
	for i, name := range names {
		raw, v := loadVector(t, name)
		deliver(t, s, user, raw)
		vecs[i+1] = v // LMTP deliveries one by one: UIDs 1, 2, …
	}
	total := 0
	for _, v := range vecs {
		total += len(v.Texts)
	}
	rec := newRecorder()
	run(t, receiver(t, s, user, filepath.Join(t.TempDir(), "state"), submission(t, s, user, nil), nil), rec.handle)
	got := rec.wait(t, total, 10*time.Second)
	byUID := map[int][]transports.Inbound{}
	for _, in := range got {
		byUID[uidOf(t, in)] = append(byUID[uidOf(t, in)], in)
	}
	uids := make([]int, 0, len(vecs))
	for uid := range vecs {
		uids = append(uids, uid)
	}
	sort.Ints(uids)
	for _, uid := range uids {
		t.Run(names[uid-1], func(t *testing.T) {
			v := vecs[uid]
			var texts [][]byte
			for _, in := range byUID[uid] {
				texts = append(texts, in.Data)
				if in.CanReply != v.CanReply {
					t.Errorf("CanReply = %v, want %v", in.CanReply, v.CanReply)
				}
				if in.Transport != "mail" || !strings.Contains(in.Source, "@fixture.example.test>") {
					t.Errorf("Transport, Source = %q, %q", in.Transport, in.Source)
				}
			}
			checkTexts(t, v, texts)
		})
	}
	waitFlags(t, s, user, "", len(vecs))
}

// TestOversized: mail above MaxMessageSize is not fetched; the Handler
// gets a short notice naming it, and the mail is marked.
func TestOversized(t *testing.T) {
	s := realStack(t)
	user := s.NewUser()
	text, _ := testEnvelope(t, strings.Repeat("big ", 10000))
	raw := plainMail("x@example.test", mailtest.Address(user), "too big", text)
	deliver(t, s, user, raw)
	rec := newRecorder()
	run(t, receiver(t, s, user, filepath.Join(t.TempDir(), "state"), nil, func(o *Options) { o.MaxMessageSize = 16 << 10 }), rec.handle)
	got := rec.wait(t, 1, 5*time.Second)
	d := string(got[0].Data)
	for _, want := range []string{"E-TOO-LARGE", "16384-byte limit", "Subject: too big", "From: x@example.test"} {
		if !strings.Contains(d, want) {
			t.Errorf("notice = %q, want it to contain %q", d, want)
		}
	}
	if len(readAll(t, got[0].Data)) != 0 {
		t.Errorf("notice holds an envelope: %q", d)
	}
	waitFlags(t, s, user, "", 1)
}

// TestOversizedBodyDespiteSize: a server whose RFC822.SIZE says a mail is
// small but whose BODY[] literal is larger (a broken or hostile server,
// or a man in the middle of a plaintext connection) made the Receiver
// read the whole literal into memory, whatever MaxMessageSize said, and
// hand all of it over. At most MaxMessageSize of it is read now, and the
// mail is handed over as too large.
func TestOversizedBodyDespiteSize(t *testing.T) {
	s := realStack(t)
	user := s.NewUser()
	text, _ := testEnvelope(t, strings.Repeat("big ", 50000))
	deliver(t, s, user, plainMail("x@example.test", mailtest.Address(user), "lied about", text))
	p := newIMAPProxy(t, s.IMAPAddr, "small-size")
	const limit = 16 << 10
	rc := receiver(t, s, user, filepath.Join(t.TempDir(), "state"), nil, func(o *Options) { o.MaxMessageSize = limit })
	rc.srv.Addr, rc.srv.Security = p.Addr, SecurityNone
	rec := newRecorder()
	run(t, rc, rec.handle)
	got := rec.wait(t, 1, 10*time.Second)
	if n := len(got[0].Data); n > limit {
		t.Errorf("handed over %d bytes of a mail whose literal is above the %d-byte limit", n, limit)
	}
	d := string(got[0].Data)
	for _, want := range []string{"E-TOO-LARGE", "Subject: lied about"} {
		if !strings.Contains(d, want) {
			t.Errorf("notice = %.200q, want it to contain %q", d, want)
		}
	}
	waitFlags(t, s, user, "", 1)
}

// countingWriter counts the bytes written to it.
type countingWriter struct {
	mu sync.Mutex
	n  int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n += int64(len(p))
	return len(p), nil
}

func (w *countingWriter) count() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// TestOversizedHeader: a mail above MaxMessageSize that is nearly all
// header (4 MiB of header fields) is not fetched either. The header was
// fetched whole to find Message-ID, From and Subject, so the limit did not
// bound what a hostile mail made the Receiver read into memory. The
// notice still names the mail by the fields it could read.
func TestOversizedHeader(t *testing.T) {
	s := realStack(t)
	user := s.NewUser()
	text, _ := testEnvelope(t, "under a huge header")
	raw := plainMail("x@example.test", mailtest.Address(user), "huge header", text)
	filler := bytes.Repeat([]byte("X-Filler: "+strings.Repeat("f", 88)+"\r\n"), 4<<20/100)
	raw = bytes.Replace(raw, []byte("MIME-Version:"), append(filler, "MIME-Version:"...), 1)
	deliver(t, s, user, raw)
	rec := newRecorder()
	var traffic countingWriter
	const limit = 64 << 10
	run(t, receiver(t, s, user, filepath.Join(t.TempDir(), "state"), nil, func(o *Options) {
		o.MaxMessageSize = limit
		o.DebugWriter = &traffic
	}), rec.handle)
	got := rec.wait(t, 1, 10*time.Second)
	d := string(got[0].Data)
	for _, want := range []string{"E-TOO-LARGE", "Subject: huge header", "From: x@example.test"} {
		if !strings.Contains(d, want) {
			t.Errorf("notice = %q, want it to contain %q", d, want)
		}
	}
	waitFlags(t, s, user, "", 1)
	if n := traffic.count(); n > 4*limit {
		t.Errorf("%d bytes of IMAP traffic for a mail above the %d-byte limit, want at most %d", n, limit, 4*limit)
	}
}

// TestLongHeaderWithinLimit: a mail within MaxMessageSize whose header is
// longer than the part read first is judged on its whole header: an
// Auto-Submitted field at its end still means no reply, and its envelope
// is handed over.
func TestLongHeaderWithinLimit(t *testing.T) {
	s := realStack(t)
	user := s.NewUser()
	text, id := testEnvelope(t, "under a long header")
	raw := plainMail("x@example.test", mailtest.Address(user), "long header", text)
	filler := bytes.Repeat([]byte("X-Filler: "+strings.Repeat("f", 88)+"\r\n"), 2*maxHeaderFetch/100)
	filler = append(filler, "Auto-Submitted: auto-generated\r\n"...)
	raw = bytes.Replace(raw, []byte("MIME-Version:"), append(filler, "MIME-Version:"...), 1)
	deliver(t, s, user, raw)
	rec := newRecorder()
	run(t, receiver(t, s, user, filepath.Join(t.TempDir(), "state"), submission(t, s, user, nil), nil), rec.handle)
	got := rec.wait(t, 1, 10*time.Second)
	if ids := messageIDsOf(t, got); !slices.Equal(ids, []string{id}) {
		t.Errorf("received %v, want [%s]", ids, id)
	}
	if got[0].CanReply {
		t.Errorf("CanReply = true for Auto-Submitted mail")
	}
	waitFlags(t, s, user, "", 1)
}

// TestMoveTo: processed mail is flagged and moved.
func TestMoveTo(t *testing.T) {
	s := realStack(t)
	user := s.NewUser()
	text, id := testEnvelope(t, "move me")
	deliver(t, s, user, plainMail("x@example.test", mailtest.Address(user), "move", text))
	rec := newRecorder()
	run(t, receiver(t, s, user, filepath.Join(t.TempDir(), "state"), nil, func(o *Options) { o.MoveTo = "Crosstalk/Processed" }), rec.handle)
	if got := messageIDsOf(t, rec.wait(t, 1, 5*time.Second)); !slices.Equal(got, []string{id}) {
		t.Fatalf("received %v, want [%s]", got, id)
	}
	waitFlags(t, s, user, "Crosstalk/Processed", 1)
	if msgs, err := s.Messages(user, ""); err != nil || len(msgs) != 0 {
		t.Errorf("INBOX holds %d mails (%v), want 0", len(msgs), err)
	}
}

// TestReplyThreadAndLoop: a reply goes to the sender threaded under the
// mail, marked Auto-Submitted; when the sender is the watched mailbox
// itself, the reply arrives, is handed over without CanReply, and is not
// answered: no loop.
func TestReplyThreadAndLoop(t *testing.T) {
	s := realStack(t)
	user := s.NewUser()
	addr := mailtest.Address(user)
	text, id := testEnvelope(t, "please answer")
	raw := plainMail(addr, addr, "ask", text)
	raw = bytes.Replace(raw, []byte("Subject: ask\r\n"), []byte("Subject: ask\r\nReferences: <root@example.test>\r\n"), 1)
	deliver(t, s, user, raw)
	origID := regexp.MustCompile(`Message-ID: (<[^>]+>)`).FindSubmatch(raw)[1]

	rec := newRecorder()
	rec.reply = func(in transports.Inbound) []byte {
		e := readAll(t, in.Data)[0]
		ack := envelope.NewReply(e, envelope.IntentAck, "recorded")
		b, err := envelope.Marshal(ack)
		if err != nil {
			t.Error(err)
		}
		return b
	}
	run(t, receiver(t, s, user, filepath.Join(t.TempDir(), "state"), submission(t, s, user, nil), nil), rec.handle)
	rec.wait(t, 2, 5*time.Second)
	time.Sleep(1500 * time.Millisecond) // a loop would show up by now
	got, _ := rec.snapshot()
	if len(got) != 2 || !got[0].CanReply || got[1].CanReply {
		t.Fatalf("handler calls = %d (CanReply %v), want 2: the mail (true) and our reply (false)", len(got), canReplies(got))
	}
	ids := messageIDsOf(t, got)
	if ids[0] != id {
		t.Errorf("first = %s, want %s", ids[0], id)
	}
	msgs, err := s.Messages(user, "")
	if err != nil || len(msgs) != 2 {
		t.Fatalf("%d mails in the mailbox (%v), want 2", len(msgs), err)
	}
	reply := msgs[1].Raw
	for _, want := range []string{
		"In-Reply-To: " + string(origID),
		"References: <root@example.test> " + string(origID),
		"Auto-Submitted: auto-replied",
		"Subject: [AI Crosstalk] mail tests - ACK",
		"Message-ID: <" + ids[1] + "@example.test>",
		"To: <" + addr + ">",
	} {
		if !bytes.Contains(reply, []byte(want+"\r\n")) {
			t.Errorf("reply lacks %q:\n%s", want, reply)
		}
	}
}

func canReplies(ins []transports.Inbound) []bool {
	var b []bool
	for _, in := range ins {
		b = append(b, in.CanReply)
	}
	return b
}

// TestReceiveErrors: a refused login and an unreachable server end
// Receive with an error at once, not a hang or a silent retry loop.
func TestReceiveErrors(t *testing.T) {
	s := realStack(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		name string
		srv  Server
		want string
	}{
		{"WrongPassword", Server{Addr: s.IMAPAddr, Username: s.NewUser(), Password: "wrong"}, "login refused"},
		{"Unreachable", Server{Addr: closed, Username: "u", Password: "p"}, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := NewReceiver(tc.srv, nil, &Options{StateFile: filepath.Join(t.TempDir(), "s"), TLSConfig: s.TLSConfig(), Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			t0 := time.Now()
			err = rc.Receive(ctx, newRecorder().handle)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "mail: ") {
				t.Errorf("Receive = %v, want an error mentioning %q", err, tc.want)
			}
			if d := time.Since(t0); d > 10*time.Second {
				t.Errorf("Receive took %v to fail", d)
			}
		})
	}
}
