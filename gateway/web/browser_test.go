package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/signing"
)

// browserDir holds the Playwright script and its package.json; its
// node_modules is installed by scripts/deps.sh (npm ci).
const browserDir = "testdata/browser"

// browserResult is what browser.mjs prints.
type browserResult struct {
	Checks []struct {
		Name   string `json:"name"`
		OK     bool   `json:"ok"`
		Detail string `json:"detail"`
	} `json:"checks"`
	Clipboard struct {
		Canonical string `json:"canonical"`
		Fenced    string `json:"fenced"`
		Item      string `json:"item"`
	} `json:"clipboard"`
	Seconds float64 `json:"seconds"`
}

// browserTools returns node and chromium, or why they are missing.
func browserTools() (node, chromium string, err error) {
	node, err = exec.LookPath("node")
	if err != nil {
		return "", "", fmt.Errorf("node is not installed")
	}
	chromium = os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		return "", "", fmt.Errorf("chromium is not installed at %s", chromium)
	}
	if _, err := os.Stat(filepath.Join(browserDir, "node_modules", "playwright-core", "package.json")); err != nil {
		return "", "", fmt.Errorf("playwright-core is not installed in %s", browserDir)
	}
	return node, chromium, nil
}

// TestBrowser runs the web inbox in headless Chromium (Debian's), driven
// by Playwright, against an in-process relay: paste → preview → send →
// thread view; live envelopes over SSE; copy and copy fenced; an agent's
// ack; a body with <script> and <img onerror> shown as text; cross-site
// POSTs refused; re-pinning a key. Screenshots go to testdata/screenshots.
// It fails, not skips, when CI=true and the tools are missing.
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test in -short mode")
	}
	node, chromium, err := browserTools()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("browser test cannot run: %v (scripts/deps.sh installs chromium and runs npm ci in %s)", err, browserDir)
		}
		t.Skipf("browser test skipped: %v (run scripts/deps.sh)", err)
	}
	h := newHarness(t, nil)

	// The ledger the browser finds.
	ack := envText(t, "CHATGPT", "CLAUDE", envelope.IntentHandoff, "ops", "take over the deploy, please")
	h.ingest(ack)
	h.ingest(envText(t, "CHATGPT", "CLAUDE", envelope.IntentRequest, "xss", xssBody))
	k1, _ := signing.GenerateKey(signing.Ed25519, "claude@example.com")
	k2, _ := signing.GenerateKey(signing.Ed25519, "claude@example.com")
	signed := func(k *signing.PrivateKey, body string) string {
		b, err := signing.Sign([]byte(envText(t, "CLAUDE", "CHATGPT", envelope.IntentRequest, "keys", body)), k, &signing.SignOptions{Announce: true})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	h.ingest(signed(k1, "Signed with my first key: pinned on first use."))
	h.ingest(signed(k2, "Signed with a new key for the same key id: refused until re-pinned."))

	// What the browser pastes and what arrives while it watches.
	first := envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, "paste: the first body")
	first.Context = "pasted"
	fb, _ := envelope.Marshal(first)
	second := envText(t, "CHATGPT", "GEMINI", envelope.IntentRequest, "pasted", "paste: the second body")
	pasteText := "Claude said:\n\n```\n" + string(fb) + "```\n\nthen ChatGPT, quoted:\n> " +
		strings.ReplaceAll(strings.TrimSuffix(second, "\n"), "\n", "\n> ") + "\n\nand a broken one:\n[[CLAUDE→GEMINI v1]]\nintent: REQUEST\nbody: |\n  never ended\n"
	errLine := strings.Count(pasteText[:strings.Index(pasteText, "[[CLAUDE→GEMINI")], "\n") + 1
	reply := envelope.NewReply(first, envelope.IntentRespond, "live: the reply body")
	rb, _ := envelope.Marshal(reply)
	attack := envText(t, "CLAUDE", "CHATGPT", envelope.IntentRequest, "attack", "a cross-site post")
	seed := map[string]any{
		"pasteText": pasteText, "pasteErrorLine": errLine, "pasteFirstBody": first.Body, "pasteGroup": "pasted",
		"liveReply": string(rb), "liveReplyBody": reply.Body,
		"liveOtherThread": envText(t, "GEMINI", "CLAUDE", envelope.IntentBroadcast, "pasted", "live: another thread"), "liveOtherBody": "live: another thread",
		"liveGroup": envText(t, "GEMINI", "CHATGPT", envelope.IntentRequest, "pasted", "live: the group body"), "liveGroupBody": "live: the group body",
		"composeBody":      "Please run:\n```sh\nmake test\n```",
		"ackBody":          "take over the deploy",
		"xssLive":          envText(t, "GEMINI", "CLAUDE", envelope.IntentRequest, "xss", xssBody),
		"attackText":       attack,
		"agentLive":        envText(t, "GEMINI", "CLAUDE", envelope.IntentEscalate, "ops", "live: an escalation for claude"),
		"agentLiveBody":    "live: an escalation for claude",
		"signedAfterRepin": signed(k2, "Signed with the re-pinned key: verified."),
	}
	seedJSON, _ := json.Marshal(seed)

	// Another origin whose page posts a form to the relay.
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>attacker</title><form id="f" method="post" action="%s/ui/paste">`+
			`<input type="hidden" name="op" value="send"><textarea name="text">%s</textarea></form>`+
			`<script>document.getElementById('f').submit()</script>`, h.srv.URL, html.EscapeString(attack))
	}))
	defer attacker.Close()

	shots, err := filepath.Abs(filepath.Join("testdata", "screenshots"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "browser.mjs")
	cmd.Dir = browserDir
	cmd.Env = append(os.Environ(), "RELAY_URL="+h.srv.URL, "ATTACKER_URL="+attacker.URL, "CHROMIUM="+chromium,
		"USER_DATA_DIR="+t.TempDir(), "SCREENSHOTS="+shots, "SEED="+string(seedJSON))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("node browser.mjs = %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
	}
	var res browserResult
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); err != nil {
		t.Fatalf("browser.mjs printed %q: %v\nstderr:\n%s", stdout.String(), err, stderr.String())
	}
	t.Logf("browser run: %.1fs in Chromium, %.1fs in all; screenshots in %s", res.Seconds, time.Since(start).Seconds(), shots)
	if len(res.Checks) < 20 {
		t.Errorf("only %d checks ran", len(res.Checks))
	}
	for _, c := range res.Checks {
		t.Run(c.Name, func(t *testing.T) {
			if !c.OK {
				t.Error(c.Detail)
			}
		})
	}

	// The ledger agrees with what the browser saw.
	if evs := h.events("attack"); len(evs) != 0 {
		t.Errorf("the refused cross-site posts recorded %d events", len(evs))
	}
	web := 0
	for _, ev := range h.events("pasted") {
		if d, err := gateway.ParseData(ev); err == nil && d.X != nil && d.X.Transport == "web" {
			web++
		}
	}
	if web != 2 {
		t.Errorf("envelopes with transport web = %d, want 2", web)
	}
	acked := false
	for _, ev := range h.events("ops") {
		acked = acked || ev.Kind == gateway.KindAck && ev.By == "claude"
	}
	if !acked {
		t.Errorf("no chat.ack by claude in ops")
	}
	if e, _, _ := h.trust.Lookup("claude@example.com"); e.Key == nil || !e.Key.Equal(k2.Public()) {
		t.Errorf("the key was not re-pinned to the changed key")
	}
	t.Run("clipboard is canonical", func(t *testing.T) {
		env, err := envelope.Unmarshal([]byte(res.Clipboard.Canonical))
		if err != nil {
			t.Fatalf("the copied envelope does not parse: %v\n%s", err, res.Clipboard.Canonical)
		}
		canon, _ := envelope.Marshal(env)
		if string(canon) != res.Clipboard.Canonical {
			t.Errorf("copied = %q, want canonical %q", res.Clipboard.Canonical, canon)
		}
		var buf bytes.Buffer
		w := envelope.NewWriter(&buf)
		w.Fence = true
		w.Write(env)
		if buf.String() != res.Clipboard.Fenced {
			t.Errorf("copied fenced = %q, want %q", res.Clipboard.Fenced, buf.String())
		}
		if _, err := envelope.Unmarshal([]byte(res.Clipboard.Item)); err != nil {
			t.Errorf("the envelope copied from the thread view does not parse: %v", err)
		}
	})
}
