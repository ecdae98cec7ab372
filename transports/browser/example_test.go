package browser_test

import (
	"context"
	"fmt"

	"github.com/crosstalk-go/crosstalk/transports/browser"
)

// Check is what the extension's background runs on each block of a chat
// page that holds an [[END]]: the envelopes found, each with its status.
func ExampleCheck() {
	page := "Claude said:\n```\n[[CLAUDE→CHATGPT v1]]\nintent: REQUEST\nbody: |\n  Is the deploy blocked?\n[[END]]\n```\n" +
		"and a broken one:\n[[CLAUDE→CHATGPT v1]]\nintent: REQUEST\nintent: ACK\nbody: |\n  x\n[[END]]\n"
	res, err := browser.Check(context.Background(), page, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range res.Envelopes {
		fmt.Println(f.Index, f.Status, f.From, f.To)
	}
	// Output:
	// 0 unsigned CLAUDE CHATGPT
	// 1 error
}

// ParseJSON prints what `crosstalk parse --json` prints.
func ExampleParseJSON() {
	out, _ := browser.ParseJSON("[[A→B v1]]\nintent: ACK\nbody: |\n  ok\n[[END]]\n", false)
	fmt.Print(string(out))
	// Output:
	// {"from":"A","to":"B","version":1,"intent":"ACK","body":"ok","complete":true,"line":1}
}
