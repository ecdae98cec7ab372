package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
)

// TestPagedReads walks the keyset pages of the events, deliveries and
// agents endpoints over a few hundred events and checks that each page
// keeps to its limit and that the pages together give everything once.
func TestPagedReads(t *testing.T) {
	h := newHarness(t, nil)
	const n = 300
	for i := range n {
		h.post(env("CHATGPT", "CLAUDE", "REQUEST", "g", fmt.Sprintf("q%d", i)))
	}
	h.post(env("CHATGPT", "BOB", "REQUEST", "other", "for bob"))

	// Events, newest first by before_seq.
	var seqs []int64
	for before, pages := int64(0), 0; ; pages++ {
		var out struct {
			Events []struct {
				Seq int64 `json:"seq"`
			} `json:"events"`
			Prev int64 `json:"prev_seq"`
		}
		h.json("GET", fmt.Sprintf("/v1/groups/g/events?before_seq=%d&limit=70", before), "", http.StatusOK, &out)
		if len(out.Events) > 70 || pages > 10 {
			t.Fatalf("before_seq=%d: %d events on page %d", before, len(out.Events), pages)
		}
		var page []int64
		for _, e := range out.Events {
			page = append(page, e.Seq)
		}
		seqs = append(page, seqs...)
		if out.Prev == 0 {
			break
		}
		before = out.Prev
	}
	for i, seq := range seqs { // each seq exactly once, in order
		if seq != int64(i+1) {
			t.Fatalf("events by before_seq pages: seq %d at index %d (of %d), want 1..%d once each", seq, i, len(seqs), n)
		}
	}
	if len(seqs) != n {
		t.Errorf("events by before_seq pages = %d seqs, want %d", len(seqs), n)
	}

	// Deliveries, newest first by before_pos.
	var got []string
	for before, pages := int64(0), 0; ; pages++ {
		var out struct {
			Deliveries []gateway.Delivery `json:"deliveries"`
			Older      int64              `json:"older_pos"`
			Newer      int64              `json:"newer_pos"`
		}
		h.json("GET", fmt.Sprintf("/v1/agents/claude/deliveries?before_pos=%d&limit=40", before), "", http.StatusOK, &out)
		if len(out.Deliveries) > 40 || pages > 20 {
			t.Fatalf("before_pos=%d: %d deliveries on page %d", before, len(out.Deliveries), pages)
		}
		for _, d := range out.Deliveries {
			got = append(got, d.Content)
		}
		if before > 0 && out.Newer == 0 {
			t.Errorf("before_pos=%d: no newer_pos", before)
		}
		if out.Older == 0 {
			break
		}
		before = out.Older
	}
	// Each of claude's requests exactly once, and the message to bob too
	// (claude is the relay's local user here); pages come newest first,
	// each oldest first.
	want := []string{"for bob"}
	for i := range n {
		want = append(want, fmt.Sprintf("q%d", i))
	}
	slices.Sort(want)
	got = slices.Sorted(slices.Values(got))
	if !slices.Equal(got, want) {
		t.Errorf("deliveries by before_pos pages = %d %q…, want %d %q…", len(got), got[:min(len(got), 4)], len(want), want[:4])
	}
	if code, _ := h.do("GET", "/v1/agents/claude/deliveries?before_pos=1&after_pos=2", ""); code != http.StatusBadRequest {
		t.Errorf("before_pos and after_pos = %d, want 400", code)
	}

	// Agents: bob has mail, no liveness and no book entry.
	a := api.New(h.relay, nil)
	a.MountAgents(nil)
	srv := httptest.NewServer(a)
	defer srv.Close()
	defer a.Close()
	var ids []string
	for after, pages := "", 0; ; pages++ {
		var out struct {
			Agents []gateway.AgentStatus `json:"agents"`
			Next   string                `json:"next"`
		}
		res, err := srv.Client().Get(srv.URL + "/v1/agents?limit=2&after=" + url.QueryEscape(after))
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/agents = %v, %v", res, err)
		}
		err = json.NewDecoder(res.Body).Decode(&out)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Agents) > 2 || pages > 10 {
			t.Fatalf("after=%q: %d agents on page %d", after, len(out.Agents), pages)
		}
		for _, a := range out.Agents {
			ids = append(ids, a.ID)
		}
		if out.Next == "" {
			break
		}
		after = out.Next
	}
	if !slices.Contains(ids, "bob") || !slices.Contains(ids, "claude") || !slices.IsSorted(ids) {
		t.Errorf("agents = %v, want every actor (bob, claude, …) in id order", ids)
	}
}

// TestEventsBeforeBeyondEnd: a before_seq past the group's end is the
// group's end — the newest page, as before_seq=0 — not an empty page whose
// prev_seq sends the client through 10 000 empty seqs a page (each read
// of the store a query) before it reaches the first event.
func TestEventsBeforeBeyondEnd(t *testing.T) {
	h := newHarness(t, nil)
	for i := range 3 {
		h.post(env("CHATGPT", "CLAUDE", "REQUEST", "g", fmt.Sprintf("q%d", i)))
	}
	for _, before := range []string{"4", "1000", "9223372036854775807"} {
		var out struct {
			Events []struct {
				Seq int64 `json:"seq"`
			} `json:"events"`
			Prev int64 `json:"prev_seq"`
		}
		h.json("GET", "/v1/groups/g/events?limit=1&before_seq="+before, "", http.StatusOK, &out)
		if len(out.Events) != 1 || out.Events[0].Seq != 3 || out.Prev != 3 {
			t.Errorf("before_seq=%s&limit=1 = %+v, want seq 3 and prev_seq 3", before, out)
		}
	}
}
