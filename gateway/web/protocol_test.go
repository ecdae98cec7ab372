package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
)

func metaBlock(ns string, kv ...string) func(*envelope.Envelope) {
	return func(e *envelope.Envelope) {
		m := envelope.Meta{Namespace: ns}
		for i := 0; i+1 < len(kv); i += 2 {
			m.Fields = append(m.Fields, envelope.Field{Key: kv[i], Value: kv[i+1]})
		}
		e.Meta = append(e.Meta, m)
	}
}

// TestHandoffsPage: open HANDOFFs and BLOCKEDs are listed with their
// BeadBoard §6.3 labels and payload, escaped, until the addressee acks a
// handoff or resolves a blocker; the addressee's page labels and settles
// them; the group page shows them too.
func TestHandoffsPage(t *testing.T) {
	h := newHarness(t, nil)
	ho := h.ingest(envText(t, "CHATGPT", "CLAUDE", envelope.IntentHandoff, "ops", "over to you",
		metaBlock("handoff", "Subject", "<script>alert(1)</script>", "Summary", "half done", "Next-Action", "finish it")))[0].Event
	bl := h.ingest(envText(t, "CLAUDE", "GEMINI", envelope.IntentRequest, "ops", "stuck",
		metaBlock("blocked", "Subject", "db creds", "Blocker", "no credentials", "Requested-Action", "share them", "Urgency", "high")))[0].Event
	_, body := h.get("/ui/handoffs")
	mustContain(t, "handoffs page", body, "Passed to", "Needs input", "&lt;script&gt;alert(1)&lt;/script&gt;", "finish it", "no credentials",
		"<bdi>chatgpt</bdi>", "/ui/events/"+ho.ID, "/ui/events/"+bl.ID, "not yet")
	if strings.Contains(body, "<script>alert") {
		t.Error("the handoffs page shows a subject unescaped")
	}
	// Pages go by event id: after the first item, only the second; after
	// an id past every item, nothing (not the first page again).
	first, second := min(ho.ID, bl.ID), max(ho.ID, bl.ID)
	if _, body = h.get("/ui/handoffs?after=" + first); strings.Contains(body, "/ui/events/"+first) || !strings.Contains(body, "/ui/events/"+second) {
		t.Errorf("the page after %s should list %s only:\n%s", first, second, body)
	}
	if _, body = h.get("/ui/handoffs?after=ZZZZZZZZZZZZZZZZZZZZZZZZZZ"); strings.Contains(body, "/ui/events/") {
		t.Errorf("the page after an id past every item lists items:\n%s", body)
	}
	_, body = h.get("/ui/agents/claude")
	mustContain(t, "claude's page", body, `<span class="badge attn">Passed to</span>`, `value="ack" class="primary">Accept</button>`) // BeadBoard §6.3 "Accepted"
	_, body = h.get("/ui/groups/ops")
	mustContain(t, "group page", body, "<strong>Passed to</strong> <bdi>CLAUDE</bdi>", "<strong>Needs input</strong> <bdi>GEMINI</bdi>", "<dt>next action</dt><dd><bdi>finish it</bdi></dd>")

	// The addressee acks the handoff and accepts the blocker.
	for _, a := range []struct{ agent, event string }{{"claude", ho.ID}, {"gemini", bl.ID}} {
		if res, body := h.post("/ui/agents/"+a.agent+"/act", url.Values{"action": {"ack"}, "group": {"ops"}, "event": {a.event}}); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s ack = %d\n%s", a.agent, res.StatusCode, body)
		}
	}
	_, body = h.get("/ui/handoffs")
	if strings.Contains(body, "/ui/events/"+ho.ID) || !strings.Contains(body, "/ui/events/"+bl.ID) || !strings.Contains(body, "<bdi>gemini</bdi></td>") {
		t.Errorf("after the acks the page should list only the accepted blocker:\n%s", body)
	}
	_, body = h.get("/ui/agents/claude")
	mustContain(t, "claude's page after its ack", body, `<span class="badge plain">accepted</span>`)
	if _, err := h.relay.Act(t.Context(), gateway.ActionRequest{Action: gateway.ActionResolve, Group: "ops", EventID: bl.ID, Actor: "gemini", Note: "shared"}); err != nil {
		t.Fatal(err)
	}
	_, body = h.get("/ui/handoffs")
	mustContain(t, "handoffs page after the resolve", body, "Nothing is waiting.")
}

// TestProvenanceShown: a forwarded message says where it came from and
// links the source; the link leads to the source's thread, and a source
// this relay does not hold says it is unavailable (CCCS §9.1).
func TestProvenanceShown(t *testing.T) {
	h := newHarness(t, nil)
	src := h.ingest(envText(t, "CHATGPT", "CLAUDE", envelope.IntentRequest, "alpha", "review the checklist"))[0]
	h.ingest(envText(t, "CLAUDE", "ALL", envelope.IntentBroadcast, "beta", "[Summarized] checklist",
		metaBlock("provenance", "Src-Group-Id", "alpha", "Src-Event-Id", src.Event.ID, "Summarized", "yes")))
	h.ingest(envText(t, "CLAUDE", "ALL", envelope.IntentBroadcast, "beta", "from afar",
		metaBlock("provenance", "Src-Group-Id", "<b>far</b>", "Src-Event-Id", "gone-1")))
	_, body := h.get("/ui/groups/beta")
	mustContain(t, "group page", body, `Summary of a message from group <bdi class="clip" title="alpha">alpha</bdi>`, `<a href="/ui/events/`+src.Event.ID+`">open source message</a>`,
		`Forwarded from group <bdi class="clip" title="&lt;b&gt;far&lt;/b&gt;">&lt;b&gt;far&lt;/b&gt;</bdi>`)
	res, _ := h.do(h.client, http.MethodGet, "/ui/events/"+src.Event.ID, nil)
	if want := "/ui/groups/alpha/threads/" + src.Envelope.Thread + "#e1"; res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != want {
		t.Errorf("source link = %d → %q, want 303 → %q", res.StatusCode, res.Header.Get("Location"), want)
	}
	code, body := h.get("/ui/events/gone-1")
	if code != http.StatusNotFound || !strings.Contains(body, "source unavailable") {
		t.Errorf("missing source = %d, want 404 saying source unavailable", code)
	}
}

// TestHandoffsPaged: the list is cut at 100 rows with an "older" link to
// the rest, and each open handoff is on exactly one page.
func TestHandoffsPaged(t *testing.T) {
	h := newHarness(t, nil)
	var ids []string
	for range 101 {
		ev := h.ingest(envText(t, "CHATGPT", "CLAUDE", envelope.IntentHandoff, "ops", "x",
			metaBlock("handoff", "Subject", "s", "Summary", "m", "Next-Action", "n")))[0].Event
		ids = append(ids, ev.ID)
	}
	_, first := h.get("/ui/handoffs")
	older := between(t, first, `<a rel="next" href="`, `"`)
	_, second := h.get(strings.ReplaceAll(older, "&amp;", "&"))
	for i, id := range ids {
		n := strings.Count(first, "/ui/events/"+id+`"`) + strings.Count(second, "/ui/events/"+id+`"`)
		if n != 1 {
			t.Errorf("handoff %d appears %d times over the two pages, want once", i, n)
		}
	}
	mustContain(t, "second page", second, `<a rel="prev" href="/ui/handoffs">`)
}
