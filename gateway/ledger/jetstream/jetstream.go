package jetstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// DefaultStream is the stream name used when Options.Stream is empty.
const DefaultStream = "CROSSTALK"

// MaxRecords is the largest number of records one Append call may carry:
// a batch becomes one JetStream atomic batch of at most four messages per
// record, and nats-server commits at most 1000 messages atomically.
const MaxRecords = 250

// Options configure a Store. The zero value (or nil) means the defaults.
type Options struct {
	// Conn is an existing connection to use. The Store does not close
	// it. When nil, Open dials the url it is given.
	Conn *nats.Conn
	// NATSOptions are extra options for dialing (credentials, TLS,
	// names). They are ignored when Conn is set.
	NATSOptions []nats.Option

	// Stream is the JetStream stream holding the ledger; default
	// DefaultStream. Read cursors and claims live in the KV buckets
	// <Stream>_cursors and <Stream>_claims.
	Stream string
	// Prefix is the subject prefix of the stream; default the stream
	// name in lower case. The stream owns every subject under it.
	Prefix string
	// Replicas is the replication factor of the stream and buckets when
	// Open creates them; default 1. Use 3 in production (see the package
	// documentation on durability). An existing stream keeps its own.
	Replicas int
	// DuplicateWindow is the stream's Nats-Msg-Id duplicate window when
	// Open creates it; default 2 minutes. Idempotency does not depend on
	// it: the dedupe index is permanent.
	DuplicateWindow time.Duration
	// CursorTTL makes read cursors not updated for this long disappear;
	// 0 (the default) keeps them forever.
	CursorTTL time.Duration
	// Timeout bounds each request to the server; default 10 seconds.
	// Appends retry within their context beyond it.
	Timeout time.Duration
	// Logger receives retries, conflicts and connection events; nil
	// discards them.
	Logger *slog.Logger
}

// Store is a ledger.Store on a NATS JetStream stream. Several Stores, in
// one process or many, may share one stream. The zero value is not
// usable; call Open.
type Store struct {
	opts     Options
	nc       *nats.Conn
	ownConn  bool
	js       natsjs.JetStream
	stream   natsjs.Stream
	prefix   string
	replicas int
	log      *slog.Logger
	cursors  natsjs.KeyValue
	claims   natsjs.KeyValue

	mu      sync.RWMutex // guards closed and sends on queue
	closed  bool
	queue   chan *writeReq
	closing chan struct{} // closed when Close starts ending followers
	wdone   chan struct{} // closed when the writer has exited

	posMu sync.Mutex
	pos   map[posKey]uint64 // (group, seq) → stream sequence of the event

	stats struct {
		sync.Mutex
		Stats
	}
}

// Stats are counters of a Store's writer since Open.
type Stats struct {
	// Batches is how many atomic batches were committed.
	Batches int64
	// Records is how many records and imported events were committed
	// (duplicates not counted).
	Records int64
	// Conflicts is how many batches another writer beat (compare-and-set
	// failed) and were planned again.
	Conflicts int64
	// Resends is how many batches were sent again because the outcome of
	// a send was unknown.
	Resends int64
}

// Stats returns the writer's counters.
func (s *Store) Stats() Stats {
	s.stats.Lock()
	defer s.stats.Unlock()
	return s.stats.Stats
}

// count updates the counters.
func (s *Store) count(f func(*Stats)) {
	s.stats.Lock()
	f(&s.stats.Stats)
	s.stats.Unlock()
}

var _ ledger.Store = (*Store)(nil)

// posKey names one event by group and seq.
type posKey struct {
	group string
	seq   int64
}

// maxPosCache bounds the position cache; it is cleared when full.
const maxPosCache = 1 << 18

// Open connects to the NATS server(s) at url (comma-separated for
// several, e.g. "nats://a:4222,nats://b:4222"), or uses opts.Conn, and
// opens the ledger stream and its KV buckets, creating them if missing.
// The server must run nats-server 2.12 or later with JetStream enabled.
func Open(ctx context.Context, url string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Stream == "" {
		o.Stream = DefaultStream
	}
	if o.Prefix == "" {
		o.Prefix = strings.ToLower(o.Stream)
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.DuplicateWindow <= 0 {
		o.DuplicateWindow = 2 * time.Minute
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if strings.ContainsAny(o.Prefix, "*> \t\r\n") || strings.HasPrefix(o.Prefix, ".") || strings.HasSuffix(o.Prefix, ".") {
		return nil, fmt.Errorf("jetstream: open: %w: bad subject prefix %q", ledger.ErrInvalid, o.Prefix)
	}
	s := &Store{
		opts:    o,
		prefix:  o.Prefix,
		log:     log,
		queue:   make(chan *writeReq, 1024),
		closing: make(chan struct{}),
		wdone:   make(chan struct{}),
		pos:     make(map[posKey]uint64),
	}
	if o.Conn != nil {
		s.nc = o.Conn
	} else {
		nopts := append([]nats.Option{
			nats.Name("crosstalk ledger"),
			nats.MaxReconnects(-1),
			nats.ReconnectWait(250 * time.Millisecond),
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
				log.Warn("nats disconnected", "err", err)
			}),
			nats.ReconnectHandler(func(nc *nats.Conn) {
				log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
			}),
		}, o.NATSOptions...)
		nc, err := nats.Connect(url, nopts...)
		if err != nil {
			return nil, fmt.Errorf("jetstream: connect %s: %w", url, err)
		}
		s.nc, s.ownConn = nc, true
	}
	if err := s.setup(ctx); err != nil {
		if s.ownConn {
			s.nc.Close()
		}
		return nil, err
	}
	go s.writer()
	return s, nil
}

// setup opens or creates the stream and the buckets.
func (s *Store) setup(ctx context.Context) error {
	js, err := natsjs.New(s.nc, natsjs.WithDefaultTimeout(s.opts.Timeout))
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	s.js = js
	cfg := natsjs.StreamConfig{
		Name:               s.opts.Stream,
		Description:        "crosstalk CCCS event ledger",
		Subjects:           []string{s.prefix + ".>"},
		Retention:          natsjs.LimitsPolicy,
		MaxMsgs:            -1,
		MaxBytes:           -1,
		MaxAge:             0,
		MaxMsgsPerSubject:  -1,
		MaxMsgSize:         -1,
		Discard:            natsjs.DiscardNew,
		Storage:            natsjs.FileStorage,
		Replicas:           s.opts.Replicas,
		Duplicates:         s.opts.DuplicateWindow,
		DenyDelete:         true,
		DenyPurge:          true,
		AllowDirect:        true,
		AllowAtomicPublish: true,
	}
	st, err := ensureStream(ctx, js, cfg)
	if err != nil {
		return err
	}
	got := st.CachedInfo().Config
	switch {
	case !got.AllowAtomicPublish:
		return fmt.Errorf("jetstream: stream %s: atomic publish is disabled (allow_atomic); the ledger needs it", cfg.Name)
	case !got.AllowDirect:
		return fmt.Errorf("jetstream: stream %s: direct get is disabled (allow_direct); the ledger needs it", cfg.Name)
	case !coversPrefix(got.Subjects, s.prefix):
		return fmt.Errorf("jetstream: stream %s has subjects %v, not %s.>", cfg.Name, got.Subjects, s.prefix)
	}
	if got.Replicas != s.opts.Replicas && s.opts.Replicas != 1 {
		s.log.Warn("ledger stream exists with another replica count; keeping it", "stream", cfg.Name, "replicas", got.Replicas, "wanted", s.opts.Replicas)
	}
	s.stream, s.replicas = st, got.Replicas

	if s.cursors, err = s.ensureBucket(ctx, s.opts.Stream+"_cursors", s.opts.CursorTTL, false); err != nil {
		return err
	}
	if s.claims, err = s.ensureBucket(ctx, s.opts.Stream+"_claims", 0, true); err != nil {
		return err
	}
	return nil
}

func coversPrefix(subjects []string, prefix string) bool {
	for _, sub := range subjects {
		if sub == prefix+".>" || sub == ">" {
			return true
		}
	}
	return false
}

// ensureStream returns the stream cfg.Name, creating it with cfg if it is
// missing. Several Stores may race to create it.
func ensureStream(ctx context.Context, js natsjs.JetStream, cfg natsjs.StreamConfig) (natsjs.Stream, error) {
	for attempt := 0; ; attempt++ {
		st, err := js.Stream(ctx, cfg.Name)
		if err == nil {
			return st, nil
		}
		if !errors.Is(err, natsjs.ErrStreamNotFound) {
			return nil, fmt.Errorf("jetstream: stream %s: %w", cfg.Name, err)
		}
		st, err = js.CreateStream(ctx, cfg)
		if err == nil {
			return st, nil
		}
		if !errors.Is(err, natsjs.ErrStreamNameAlreadyInUse) || attempt > 3 {
			return nil, fmt.Errorf("jetstream: create stream %s: %w", cfg.Name, err)
		}
	}
}

// ensureBucket opens the KV bucket name, creating its stream if missing.
// The bucket's stream is created by hand rather than by CreateKeyValue so
// that direct get is off: every KV read then goes to the stream leader
// and sees every acknowledged write (a follower may lag behind), which
// cursors and claims need. ttl is the bucket's MaxAge; perKeyTTL enables
// per-message TTLs (claims).
func (s *Store) ensureBucket(ctx context.Context, name string, ttl time.Duration, perKeyTTL bool) (natsjs.KeyValue, error) {
	cfg := natsjs.StreamConfig{
		Name:              "KV_" + name,
		Description:       "crosstalk ledger " + name,
		Subjects:          []string{"$KV." + name + ".>"},
		MaxMsgsPerSubject: 1,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgSize:        -1,
		MaxAge:            ttl,
		Storage:           natsjs.FileStorage,
		Replicas:          s.opts.Replicas,
		Discard:           natsjs.DiscardNew,
		AllowRollup:       true,
		DenyDelete:        true,
		AllowDirect:       false,
		Duplicates:        2 * time.Minute,
		AllowMsgTTL:       perKeyTTL,
	}
	if ttl > 0 && ttl < cfg.Duplicates {
		cfg.Duplicates = ttl
	}
	if _, err := ensureStream(ctx, s.js, cfg); err != nil {
		return nil, err
	}
	kv, err := s.js.KeyValue(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("jetstream: bucket %s: %w", name, err)
	}
	return kv, nil
}

// Conn returns the connection the Store uses.
func (s *Store) Conn() *nats.Conn { return s.nc }

// Replicas returns the replica count of the ledger stream.
func (s *Store) Replicas() int { return s.replicas }

// check returns ErrClosed if the store is closed.
func (s *Store) check(what string) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return fmt.Errorf("jetstream: %s: %w", what, ledger.ErrClosed)
	}
	return nil
}

// Close implements ledger.Store: it waits for the queued writes, ends
// every Follow with ErrClosed and closes the connection if Open dialed
// it. Calling it again is harmless.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.queue)
	s.mu.Unlock()
	<-s.wdone
	close(s.closing)
	if s.ownConn {
		s.nc.Close()
	}
	return nil
}

// rememberPos records that the group's event seq is at stream sequence
// sseq.
func (s *Store) rememberPos(group string, seq int64, sseq uint64) {
	s.posMu.Lock()
	defer s.posMu.Unlock()
	if len(s.pos) >= maxPosCache {
		clear(s.pos)
	}
	s.pos[posKey{group, seq}] = sseq
}

// knownPos returns the cached stream sequence of the group's event seq.
func (s *Store) knownPos(group string, seq int64) (uint64, bool) {
	s.posMu.Lock()
	defer s.posMu.Unlock()
	sseq, ok := s.pos[posKey{group, seq}]
	return sseq, ok
}
