package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
)

func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "ledger")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := sqlite.Open(ctx, filepath.Join(dir, "ledger.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	msg := ledger.Record{
		Kind:      "chat.message",
		GroupID:   "release",
		By:        "claude",
		Data:      json.RawMessage(`{"text":"Please review the checklist.","to":["chatgpt"]}`),
		DedupeKey: "01J9Z3QK5N8W2YV6T4R7B1C0DE", // the envelope's message id
	}
	// The second append of the same message is a duplicate: no new event.
	for range 2 {
		res, err := s.Append(ctx, []ledger.Record{msg})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("seq %d duplicate %v\n", res[0].Event.Seq, res[0].Duplicate)
	}

	evs, err := s.Range(ctx, "release", 0, []string{"chat.message"}, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range evs {
		fmt.Println(ev.Seq, ev.Kind, ev.By, string(ev.Data))
	}
	// Output:
	// seq 1 duplicate false
	// seq 1 duplicate true
	// 1 chat.message claude {"text":"Please review the checklist.","to":["chatgpt"]}
}
