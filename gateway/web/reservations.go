package web

import (
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/reserve"
)

// reservationView is one live reservation as the page shows it.
type reservationView struct {
	reserve.Reservation
	// Class is how the reservation overlaps the queried path.
	Class reserve.Class
	// Left is the time until it lapses, rounded for reading.
	Left time.Duration
	// Liveness and LastSeen are its holder's (package liveness).
	Liveness attention.Liveness
	LastSeen time.Time
}

type reservationsData struct {
	Enabled bool
	// Path is the "who is touching this" query, Canonical its canonical
	// form, PathError why it was refused.
	Path, Canonical, PathError string
	Live                       []reservationView
	Takeovers                  []reserve.Takeover
	StaleAfter                 time.Duration
	pageLinks
}

// reservationKey orders the page: scope, then id; "after" cursors name it.
func reservationKey(r reserve.Reservation) string { return r.Scope + "\n" + r.ID }

// reservations is GET /ui/reservations[?path=P][&after=KEY]: who holds
// which paths (BeadBoard §5), since when, until when, their holders'
// liveness (§4.3), the latest takeovers (§4.4), and a "who is touching
// this" form for one path. pageItems reservations a page, by scope
// (docs/web.md "Pagination").
func (s *Server) reservations(w http.ResponseWriter, r *http.Request, c *call) {
	data := reservationsData{Enabled: s.resv != nil, StaleAfter: s.relay.StaleAfter()}
	if s.resv == nil {
		s.render(w, r, c, http.StatusOK, "reservations", "Reservations", data)
		return
	}
	ctx := r.Context()
	if err := s.relay.SyncLiveness(ctx); err != nil {
		s.internal(w, r, c, err)
		return
	}
	q := r.URL.Query()
	data.Path = strings.TrimSpace(q.Get("path"))
	status := http.StatusOK
	if data.Path != "" {
		canon, err := reserve.Canonical(data.Path)
		if err != nil {
			data.PathError, data.Path, status = err.Error(), "", http.StatusBadRequest
		}
		data.Canonical = canon
	}
	all, err := s.resv.List(ctx, data.Canonical)
	if err != nil {
		s.internal(w, r, c, err)
		return
	}
	sort.Slice(all, func(i, j int) bool { return reservationKey(all[i]) < reservationKey(all[j]) })
	after := q.Get("after")
	start := sort.Search(len(all), func(i int) bool { return after == "" || reservationKey(all[i]) > after })
	base := "/ui/reservations"
	params := url.Values{}
	if data.Canonical != "" {
		params.Set("path", data.Canonical)
	}
	pageURL := func(after string) string {
		v := url.Values{}
		for k, vs := range params {
			v[k] = vs
		}
		if after != "" {
			v.Set("after", after)
		}
		if len(v) == 0 {
			return base
		}
		return base + "?" + v.Encode()
	}
	if start > 0 {
		prev := ""
		if start > pageItems {
			prev = reservationKey(all[start-pageItems-1])
		}
		data.Newer = pageURL(prev)
	}
	end := min(len(all), start+pageItems)
	now := s.relay.Now()
	for _, h := range s.relay.WithLiveness(all[start:end]) {
		v := reservationView{Reservation: h.Reservation, Left: h.ExpiresAt.Sub(now).Round(time.Second),
			Liveness: h.HolderLiveness, LastSeen: h.HolderLastSeen}
		if data.Canonical != "" {
			v.Class = reserve.Classify(data.Canonical, h.Scope)
		}
		data.Live = append(data.Live, v)
	}
	if end < len(all) {
		data.Older = pageURL(reservationKey(all[end-1]))
	}
	if data.Path == "" {
		tk, err := s.resv.Takeovers(ctx)
		if err != nil {
			s.internal(w, r, c, err)
			return
		}
		data.Takeovers = tk[:min(len(tk), 20)]
	}
	s.render(w, r, c, status, "reservations", "Reservations", data)
}
