package envelope_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strings"

	"github.com/crosstalk-go/crosstalk/envelope"
)

func ExampleReader() {
	paste := "Sure! Here is my answer:\n\n" +
		"```\n" +
		"[[CHATGPT -> CLAUDE v1]]\n" +
		"user: kalle\n" +
		"intent: ANSWER\n" +
		"body: |\n" +
		"  The deploy is not blocked.\n" +
		"sig: none\n" +
		"[[END]]\n" +
		"```\n\nAnything else?\n"
	r := envelope.NewReader(strings.NewReader(paste))
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("line %d: %s → %s %s (was %s): %s\n", e.Line, e.From, e.To, e.Intent, e.LegacyIntent, e.Body)
	}
	// Output:
	// line 4: CHATGPT → CLAUDE RESPOND (was ANSWER): The deploy is not blocked.
}

func ExampleReader_errors() {
	paste := "[[A→B v1]]\nintent: REQUEST\nintent: REQUEST\nbody: |\n  x\n[[END]]\n"
	r := envelope.NewReader(strings.NewReader(paste))
	_, err := r.Next()
	fmt.Println(err)
	if se, ok := err.(*envelope.SyntaxError); ok {
		fmt.Println(se.Code, se.Line)
	}
	// Output:
	// envelope: line 3: duplicate field "intent" (first on line 2)
	// E-FORMAT 3
}

func ExampleMarshal() {
	e := &envelope.Envelope{
		From: "CLAUDE", To: "CHATGPT", Version: 1,
		User: "kalle", Context: "deploy", Intent: envelope.IntentRequest,
		Meta: []envelope.Meta{{Namespace: "routing", Fields: []envelope.Field{{Key: "X-Priority", Value: "high"}}}},
		Body: "Is the deploy blocked?\n\nPlease check.",
		Sig:  "none",
	}
	b, err := envelope.Marshal(e)
	if err != nil {
		log.Fatal(err)
	}
	os.Stdout.Write(b)
	// Output:
	// [[CLAUDE→CHATGPT v1]]
	// user: kalle
	// context: deploy
	// intent: REQUEST
	//
	// meta: routing
	// X-Priority: high
	//
	// body: |
	//   Is the deploy blocked?
	//
	//   Please check.
	// sig: none
	// [[END]]
}

// ExampleToV10 writes an envelope for a reader that predates v1.1: the
// intent in the v1.0 vocabulary, the ids after it, no META block.
func ExampleToV10() {
	e := envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, "Which port?")
	e.User, e.Session, e.Context = "kalle", "2025-10-09T16Z abc123", "deploy"
	e.Thread, e.Message = "01J9J3D3M6A4M3WQX8G1ZQ0S7K", "01J9J3DBC4N7P2Q3R5S7T9X1V2"
	e.Meta = []envelope.Meta{{Namespace: "routing", Fields: []envelope.Field{{Key: "X-Priority", Value: "high"}}}}
	if _, err := envelope.ToV10(e, envelope.V10Options{}); errors.Is(err, envelope.ErrNotV10) {
		fmt.Println("refused:", err)
	}
	v10, err := envelope.ToV10(e, envelope.V10Options{DropMeta: true})
	if err != nil {
		log.Fatal(err)
	}
	b, err := envelope.MarshalV10(v10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(b))
	// Output:
	// refused: envelope: not expressible in v1.0: META blocks (routing) would be lost
	// [[CLAUDE→CHATGPT v1]]
	// user: kalle
	// session: 2025-10-09T16Z abc123
	// context: deploy
	// intent: QUESTION
	// thread: 01J9J3D3M6A4M3WQX8G1ZQ0S7K
	// message: 01J9J3DBC4N7P2Q3R5S7T9X1V2
	//
	// body: |
	//   Which port?
	// sig: none
	// [[END]]
}

// A request body or a file already in memory is parsed in place: no line
// buffer, and the envelopes do not refer to the bytes afterwards.
func ExampleNewBytesReader() {
	body := []byte("[[CLAUDE→CHATGPT v1]]\nintent: REQUEST\nbody: |\n  Is the deploy blocked?\nsig: none\n[[END]]\n")
	r := envelope.NewBytesReader(body)
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s → %s %s: %q, %d source bytes\n", e.From, e.To, e.Intent, e.Body, len(e.Source()))
	}
	// Output:
	// CLAUDE → CHATGPT REQUEST: "Is the deploy blocked?", 91 source bytes
}
