package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// Pages are keyset pages (docs/web.md "Pagination"): a page is named by
// the position it ends before (?before=N, older pages) or starts after
// (?after=N, newer pages), never by an offset, so reading any page costs
// the same however long the history.
const (
	// pageItems is how many events a group or agent page shows at most.
	pageItems = 100
	// pageBytes bounds the text (bodies, copies) a page carries; past it
	// the oldest items of the page move to the next older page. It keeps
	// every page well under 200 KB of HTML.
	pageBytes = 96 << 10
	// threadScan is how many of a group's events one thread page reads
	// at most, looking for the thread's events: without an index of
	// threads, a page of an old thread may show fewer items and an
	// "older" link.
	threadScan = 1000
	// contextEvents is how many events before a page (or a page stream)
	// are read so that replies on the page find their parents.
	contextEvents = 200
)

// cursor is a page's position: the page ends before Before, or starts
// after After; both zero is the newest page.
type cursor struct {
	Before, After int64
}

// pageCursor parses ?before= and ?after=.
func pageCursor(r *http.Request) (cursor, error) {
	var c cursor
	for name, dst := range map[string]*int64{"before": &c.Before, "after": &c.After} {
		v := r.URL.Query().Get(name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return c, fmt.Errorf("%s must be a non-negative integer, not %q", name, v)
		}
		*dst = n
	}
	if c.Before > 0 && c.After > 0 {
		return c, fmt.Errorf("give before or after, not both")
	}
	return c, nil
}

// pageLinks are the older and newer links of a page; "" when there is
// no such page.
type pageLinks struct {
	Older, Newer string
}

// link is base with the query parameter name=n.
func link(base, name string, n int64) string {
	return base + "?" + url.Values{name: {strconv.FormatInt(n, 10)}}.Encode()
}

// itemSize estimates what an item adds to a page: its text and its copy
// twice (plain and fenced), plus the markup.
func itemSize(it item) int {
	return len(it.Body) + 2*len(it.Copy) + len(it.Note) + 1024
}

// trimToBudget drops the oldest items (items are in seq order) until at
// most pageItems remain and their estimated size fits pageBytes; it
// keeps at least one.
func trimToBudget(items []item) []item {
	if len(items) > pageItems {
		items = items[len(items)-pageItems:]
	}
	total := 0
	for i := len(items) - 1; i >= 0; i-- {
		total += itemSize(items[i])
		if total > pageBytes && i < len(items)-1 {
			return items[i+1:]
		}
	}
	return items
}

// groupWindow returns the items of group's events from seq from+1 to to
// (inclusive), in seq order, with the contextEvents before them read for
// reply parents but not returned.
func (s *Server) groupWindow(ctx context.Context, group string, from, to int64) ([]item, error) {
	if to <= from {
		return nil, nil
	}
	start := max(0, from-contextEvents)
	t := newTimeline()
	var out []item
	for last := start; last < to; {
		evs, err := s.relay.Store().Range(ctx, group, last, nil, int(min(to-last, 1000)))
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			if it, ok := t.add(ev); ok && ev.Seq > from {
				out = append(out, it)
			}
		}
		last = evs[len(evs)-1].Seq
	}
	return out, nil
}

// groupLast returns the seq of group's last event, 0 for no group.
func (s *Server) groupLast(ctx context.Context, group string) (int64, error) {
	gs, err := s.relay.Groups(ctx)
	if err != nil {
		return 0, err
	}
	for _, g := range gs {
		if g.ID == group {
			return g.LastSeq, nil
		}
	}
	return 0, nil
}

// unreadCap bounds how many unread messages a page counts: it shows
// "100+" past it, and reading stops there, so a never-read group costs
// one page.
const unreadCap = 100
