package v10peer_test

import (
	"errors"
	"testing"

	"github.com/crosstalk-go/crosstalk/internal/v10peer"
)

// TestParseAllMatchesParse: ParseAll, the v1.0 parser run on many inputs
// in one node process, answers each input exactly as Parse, a node
// process of its own running `envelope.js parse`, does: accepted
// envelopes (plain, with a BOM, CRLF, lone CR, invalid UTF-8, the
// response: form, two in a row), and refusals with their message.
func TestParseAllMatchesParse(t *testing.T) {
	peer := v10peer.Setup(t)
	env := "[[CLAUDE→CHATGPT v1]]\nuser: kalle\nsession: 2025-10-09T16Z abc123\ncontext: topic\nintent: QUESTION\n\nbody: |\n  Hello there.\n  [[END]]\n  it's \xff a \"quote\"\n\n  last line\nsig: none\n[[END]]\n"
	inputs := [][]byte{
		[]byte(env),
		[]byte("\ufeff" + env),
		[]byte("chat first\r\n" + env + env),
		[]byte("[[CHATGPT→CLAUDE v1]]\rsession: 2025-10-09T16Z abc123\rresponse: |\r  The answer is 42.\r[[END]]\r"),
		[]byte("[[CLAUDE→CHATGPT v1]]\nintent: NOTE\nbody: |\n  no session\nsig: none\n[[END]]\n"), // refused: no session
		[]byte("[[CLAUDE→CHATGPT v1]]\nsession: s1\nintent: NOTE\n[[END]]\n"),                      // refused: no body
		{},
	}
	got, err := peer.ParseAll(inputs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(inputs) {
		t.Fatalf("ParseAll(%d inputs) = %d results", len(inputs), len(got))
	}
	accepted, refused := 0, 0
	for i, in := range inputs {
		want, wantErr := peer.Parse(in)
		if got[i].Parsed != want || (got[i].Err == nil) != (wantErr == nil) || got[i].Err != nil && got[i].Err.Error() != wantErr.Error() {
			t.Errorf("input %d %q: ParseAll = %+v, %v; Parse = %+v, %v", i, in, got[i].Parsed, got[i].Err, want, wantErr)
		}
		switch {
		case wantErr == nil:
			accepted++
		case errors.Is(wantErr, v10peer.ErrRejected) && errors.Is(got[i].Err, v10peer.ErrRejected):
			refused++
		}
	}
	if accepted < 4 || refused < 2 {
		t.Errorf("%d inputs accepted, %d refused by both: want at least 4 and 2 (the inputs no longer cover both answers)", accepted, refused)
	}
}
