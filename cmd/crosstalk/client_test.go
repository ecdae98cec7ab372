package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// TestInboxJSONFlag runs `crosstalk inbox` against an in-process relay:
// the human form ends with the agent's liveness, --json and --json=true
// print JSON only, and --json=false is the human form (the flag package
// parses it, no command looks at the arguments itself).
func TestInboxJSONFlag(t *testing.T) {
	r := testrelay.Start(t, nil)
	r.Send(t, "CLAUDE", "CHATGPT", envelope.IntentRequest, "Is the deploy blocked?", "deploy", "")
	for _, tc := range []struct {
		flag string
		json bool
	}{{"", false}, {"--json=false", false}, {"--json", true}, {"--json=true", true}} {
		args := []string{"inbox", "--agent", "chatgpt", "--relay", r.URL}
		if tc.flag != "" {
			args = append(args, tc.flag)
		}
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); code != exitOK {
			t.Fatalf("run(%q) = %d; stderr: %s", args, code, stderr.String())
		}
		out := stdout.String()
		if tc.json {
			var v map[string]any
			if err := json.Unmarshal(stdout.Bytes(), &v); err != nil || strings.Contains(out, "liveness:") {
				t.Errorf("run(%q) = %q, want JSON alone (%v)", args, out, err)
			}
			continue
		}
		if !strings.Contains(out, "must_respond") || !strings.Contains(out, "liveness: chatgpt is ") {
			t.Errorf("run(%q) = %q, want the table and the liveness line", args, out)
		}
	}
}
