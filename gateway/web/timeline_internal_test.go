package web

import (
	"fmt"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
)

// TestLiveTimelineBounded checks that the timeline of a page stream — a
// tab left open on a busy group for months — remembers a bounded number
// of events, while a reply still finds a recent parent.
func TestLiveTimelineBounded(t *testing.T) {
	st := memory.New(nil)
	defer st.Close()
	relay := gateway.New(st, nil)
	const n = 3 * liveTimelineEvents
	var text strings.Builder
	parent := ""
	for i := range n {
		e := envelope.New("CLAUDE", "CHATGPT", "REQUEST", fmt.Sprintf("message %d", i))
		e.Context, e.Parent = "busy", parent
		parent = e.Message
		b, err := envelope.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		text.Write(b)
		text.WriteString("\n")
		if i%500 == 499 || i == n-1 {
			if _, err := relay.Ingest(t.Context(), gateway.Intake{Transport: "test", Data: strings.NewReader(text.String())}); err != nil {
				t.Fatal(err)
			}
			text.Reset()
		}
	}
	evs, err := st.Range(t.Context(), "busy", 0, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	tl := newLiveTimeline()
	for _, ev := range evs {
		it, show := tl.add(ev)
		if show && it.Card && it.Parent != "" && it.ParentSeq == 0 {
			t.Fatalf("#%d: its parent, the message before it, was not found", ev.Seq)
		}
	}
	for name, size := range map[string]int{"msgSeq": len(tl.msgSeq), "msgFrom": len(tl.msgFrom), "msgDepth": len(tl.msgDepth), "evSeq": len(tl.evSeq), "evThread": len(tl.evThread)} {
		if size > liveTimelineEvents {
			t.Errorf("after %d events the live timeline's %s holds %d, want at most %d", len(evs), name, size, liveTimelineEvents)
		}
	}
}
