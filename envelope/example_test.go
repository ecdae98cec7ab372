package envelope_test

import (
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
