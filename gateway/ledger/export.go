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
	importBatch = 500
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
func Import(ctx context.Context, s Store, r io.Reader) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineSize)
	var (
		done  int
		batch []Event
		lines []int // input line of each batch element
		n     int
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		k, err := s.ImportEvents(ctx, batch)
		done += k
		if err != nil {
			if k < len(lines) {
				return fmt.Errorf("ledger: import: line %d: %w", lines[k], err)
			}
			return fmt.Errorf("ledger: import: %w", err)
		}
		batch, lines = batch[:0], lines[:0]
		return nil
	}
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var l line
		if err := json.Unmarshal(b, &l); err != nil {
			if ferr := flush(); ferr != nil {
				return done, ferr
			}
			return done, fmt.Errorf("ledger: import: line %d: %w", n, err)
		}
		ev := l.Event
		ev.DedupeKey = l.DedupeKey
		if err := ev.Validate(); err != nil {
			if ferr := flush(); ferr != nil {
				return done, ferr
			}
			return done, fmt.Errorf("ledger: import: line %d: %w", n, err)
		}
		batch = append(batch, ev)
		lines = append(lines, n)
		if len(batch) == importBatch {
			if err := flush(); err != nil {
				return done, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		if ferr := flush(); ferr != nil {
			return done, ferr
		}
		if errors.Is(err, bufio.ErrTooLong) {
			return done, fmt.Errorf("ledger: import: line %d: longer than %d bytes", n+1, MaxLineSize)
		}
		return done, fmt.Errorf("ledger: import: after line %d: %w", n, err)
	}
	if err := flush(); err != nil {
		return done, err
	}
	return done, nil
}
