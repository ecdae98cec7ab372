package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/internal/sse"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// liveItem is the data of one "item" event of a page stream: the item
// rendered by the same template as the page (so escaped the same way), and
// what the script needs to place it.
type liveItem struct {
	Seq    int64  `json:"seq"`
	Thread string `json:"thread"`
	HTML   string `json:"html"`
}

// stream is GET /ui/groups/{group}/stream: the group's items after
// since_seq (or Last-Event-ID, which a reconnecting EventSource sends), then
// live, as Server-Sent Events with id = seq and heartbeat comments. Events
// the pages do not show are skipped.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, c *call) {
	g := r.PathValue("group")
	since, err := strconv.ParseInt(r.URL.Query().Get("since_seq"), 10, 64)
	if err != nil || since < 0 {
		since = 0
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "Last-Event-ID must be a seq", http.StatusBadRequest)
			return
		}
		since = n
	}
	ctx, done, ok := api.OpenStream(w, r)
	if !ok {
		return
	}
	defer done()
	out, ok := sse.Start(w)
	if !ok {
		return
	}

	t := newLiveTimeline()
	// From contextEvents before since, so that replies find recent
	// parents without reading the whole group; only items after since
	// are sent.
	sse.Pump(ctx, out, s.heartbeat, s.relay.Store().Follow(ctx, g, max(0, since-contextEvents)),
		func(ev ledger.Event) error {
			it, show := t.add(ev)
			if !show || ev.Seq <= since {
				return nil
			}
			b, err := s.renderItem(it)
			if err != nil {
				s.log.Error("rendering a live item", "err", err)
				return err
			}
			return out.Event(strconv.FormatInt(it.Seq, 10), "item", b)
		},
		func(error) { out.JSON("", "error", "the relay's ledger is unavailable") },
		nil)
}

// renderItem renders one item with the pages' item template, as the JSON
// data of a stream event.
func (s *Server) renderItem(it item) ([]byte, error) {
	var buf bytes.Buffer
	if err := s.pages["group"].ExecuteTemplate(&buf, "item", it); err != nil {
		return nil, err
	}
	return json.Marshal(liveItem{Seq: it.Seq, Thread: it.Thread, HTML: buf.String()})
}

// changePoll is how often a changes stream looks at the ledger's groups.
const changePoll = time.Second

// version is a short digest of every group's last seq: it changes exactly
// when something was appended anywhere.
func (s *Server) version(ctx context.Context) (string, error) {
	gs, err := s.relay.Groups(ctx)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, g := range gs {
		fmt.Fprintf(h, "%s\x00%d\x00", g.ID, g.LastSeq)
	}
	return hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// changes is GET /ui/changes?v=VERSION: Server-Sent Events with one
// "changed" event (id = the new version) whenever the ledger no longer
// matches VERSION — the version a page was rendered with, or the
// Last-Event-ID of a reconnect. The groups and agent pages refresh their
// content on it: their counts and queues are computed over whole groups,
// so they are re-rendered rather than patched.
func (s *Server) changes(w http.ResponseWriter, r *http.Request, c *call) {
	known := r.URL.Query().Get("v")
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		known = last
	}
	ctx, done, ok := api.OpenStream(w, r)
	if !ok {
		return
	}
	defer done()
	out, ok := sse.Start(w)
	if !ok {
		return
	}
	poll := time.NewTicker(changePoll)
	defer poll.Stop()
	beat := time.NewTicker(s.heartbeat)
	defer beat.Stop()
	check := func() bool {
		v, err := s.version(ctx)
		if err != nil || v == known {
			return err == nil || ctx.Err() != nil
		}
		known = v
		return out.JSON(v, "changed", map[string]string{"v": v}) == nil
	}
	if !check() {
		return
	}
	for {
		select {
		case <-poll.C:
			if !check() {
				return
			}
		case <-beat.C:
			if out.Comment("heartbeat") != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}
