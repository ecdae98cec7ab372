package ledger

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// exportPage is how many events Export reads per Range call, and
// importBatch how many lines Import hands to ImportEvents at once.
const (
	exportPage  = 1000
	importBatch = 4096
)

// MaxLineSize is the longest export line Import accepts.
const MaxLineSize = 16 << 20

// line is one export line: a CCCS event plus the dedupe key extension.
type line struct {
	Event
	DedupeKey string `json:"x_dedupe_key,omitempty"`
}

// Export writes every event of s to w as JSON Lines, one CCCS event per
// line, in (group_id, seq) order. Each group is exported up to the last
// seq it had when Export listed the groups, so the output is a consistent
// prefix of every group even while appends continue.
func Export(ctx context.Context, s Store, w io.Writer) error {
	groups, err := s.Groups(ctx)
	if err != nil {
		return fmt.Errorf("ledger: export: %w", err)
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for _, g := range groups {
		for since := int64(0); since < g.LastSeq; {
			// Seqs are dense, so this limit stops at LastSeq.
			evs, err := s.Range(ctx, g.ID, since, nil, int(min(exportPage, g.LastSeq-since)))
			if err != nil {
				return fmt.Errorf("ledger: export group %q: %w", g.ID, err)
			}
			if len(evs) == 0 {
				return fmt.Errorf("ledger: export group %q: events after seq %d missing (last seq %d)", g.ID, since, g.LastSeq)
			}
			for _, ev := range evs {
				if err := enc.Encode(line{Event: ev, DedupeKey: ev.DedupeKey}); err != nil {
					return fmt.Errorf("ledger: export: %w", err)
				}
				since = ev.Seq
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("ledger: export: %w", err)
	}
	return nil
}

// Import reads JSON Lines as written by Export and stores each event in s
// with its id, ts and seq preserved (Store.ImportEvents). Blank lines are
// skipped. Events already present unchanged are skipped, so an import can
// be repeated or resumed. It returns how many events it stored or skipped;
// on a bad line it stops with an error naming the line, and the events
// before that line are stored.
//
// Lines are decoded on a goroutine of their own while the previous batch is
// being stored, in batches of importBatch events; the store validates each
// event (ImportEvents), and its refusal is reported with the event's line.
// After a refusal, Import returns once that goroutine has finished the line
// it was reading, so r is not read after Import returns.
func Import(ctx context.Context, s Store, r io.Reader) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	batches := make(chan importChunk, 1)
	go decodeLines(ctx, r, batches)
	defer func() {
		cancel()
		for range batches { // wait for decodeLines to stop reading r
		}
	}()
	done := 0
	for c := range batches {
		if len(c.evs) > 0 {
			k, err := s.ImportEvents(ctx, c.evs)
			done += k
			if err != nil {
				if k < len(c.lines) {
					return done, fmt.Errorf("ledger: import: line %d: %w", c.lines[k], err)
				}
				return done, fmt.Errorf("ledger: import: %w", err)
			}
		}
		if c.err != nil {
			return done, c.err
		}
	}
	return done, ctx.Err()
}

// importChunk is a batch of decoded events and the input line of each;
// err, in the last chunk, is why decoding stopped before the end.
type importChunk struct {
	evs   []Event
	lines []int
	err   error
}

// decodeLines decodes r's lines into chunks of importBatch events sent on
// out, which it closes at the end of r, after a bad line (its chunk
// carries the error), or when ctx ends.
func decodeLines(ctx context.Context, r io.Reader, out chan<- importChunk) {
	defer close(out)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineSize)
	var (
		c importChunk
		n int
	)
	send := func() bool {
		select {
		case out <- c:
			c = importChunk{}
			return true
		case <-ctx.Done():
			return false
		}
	}
	for sc.Scan() {
		if ctx.Err() != nil {
			return
		}
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var l line
		if err := json.Unmarshal(b, &l); err != nil {
			c.err = fmt.Errorf("ledger: import: line %d: %w", n, err)
			send()
			return
		}
		ev := l.Event
		ev.DedupeKey = l.DedupeKey
		ev.Compact = compactJSON(ev.Data)
		c.evs = append(c.evs, ev)
		c.lines = append(c.lines, n)
		if len(c.evs) == importBatch && !send() {
			return
		}
	}
	switch err := sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		c.err = fmt.Errorf("ledger: import: line %d: longer than %d bytes", n+1, MaxLineSize)
	case err != nil:
		c.err = fmt.Errorf("ledger: import: after line %d: %w", n, err)
	}
	if len(c.evs) > 0 || c.err != nil {
		send()
	}
}

// compactJSON reports whether b, valid JSON (json.Unmarshal checked the
// line it came from), is an object without whitespace outside its strings:
// then NormalizeData would return it unchanged. Export writes such data,
// so an import is spared a second scan of it with the JSON scanner.
func compactJSON(b []byte) bool {
	if len(b) == 0 || b[0] != '{' {
		return false
	}
	in, esc := false, false
	for _, c := range b {
		switch {
		case esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}
