package a2a_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/internal/nodetest"
)

// jsTask is a task as client.mjs prints it.
type jsTask struct {
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	State     string `json:"state"`
	Status    string `json:"status"`
	Artifacts []struct {
		Name string `json:"name"`
		Text string `json:"text"`
	} `json:"artifacts"`
	Crosstalk map[string]any `json:"crosstalk"`
	Error     string         `json:"error"`
}

// TestJSClient: the A2A JS SDK client (@a2a-js/sdk 1.x) talks to the
// bridge of a real relay as the token principal chatgpt — card, blocking
// SendMessage, GetTask, SendStreamingMessage over SSE, CancelTask, an
// unknown task — while claude answers through the relay's API
// (testdata/a2aclient/client.mjs).
func TestJSClient(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("testdata", "a2aclient"))
	if err != nil {
		t.Fatal(err)
	}
	node := nodetest.Node(t, dir, "@a2a-js/sdk")
	r := startRelay(t, nil)

	// claude answers the blocking send, and the stream with an ACK first.
	agentCtx := play(t, func(ctx context.Context) error {
		_, env, err := r.awaitEnvelope(ctx, "js-send", "chatgpt", "claude", 0)
		if err != nil {
			return err
		}
		if err := r.reply(ctx, "tok-claude", gateway.SendRequest{To: "CHATGPT", Intent: envelope.IntentRespond, Context: "js-send", Parent: env.Message, Body: "Not blocked: ship it."}); err != nil {
			return err
		}
		_, env, err = r.awaitEnvelope(ctx, "js-stream", "chatgpt", "claude", 0)
		if err != nil {
			return err
		}
		if err := r.reply(ctx, "tok-claude", gateway.SendRequest{To: "CHATGPT", Intent: envelope.IntentAck, Context: "js-stream", Parent: env.Message, Body: "on it"}); err != nil {
			return err
		}
		return r.reply(ctx, "tok-claude", gateway.SendRequest{To: "CHATGPT", Intent: envelope.IntentRespond, Context: "js-stream", Parent: env.Message, Body: "Deployed."})
	})

	ctx, cancel := context.WithTimeout(agentCtx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "A2A_URL="+r.URL+"/a2a/claude/", "A2A_TOKEN=tok-chatgpt")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs = %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	steps := map[string]json.RawMessage{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var s struct {
			Step string `json:"step"`
		}
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("client.mjs printed %q: %v", sc.Text(), err)
		}
		steps[s.Step] = append(json.RawMessage(nil), sc.Bytes()...)
	}
	decode := func(step string, v any) {
		t.Helper()
		raw, ok := steps[step]
		if !ok {
			t.Fatalf("client.mjs printed no %q step; stdout:\n%s\nstderr:\n%s", step, out, stderr.String())
		}
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatalf("step %s: %v", step, err)
		}
	}

	var card struct {
		Name       string   `json:"name"`
		Streaming  bool     `json:"streaming"`
		Interfaces []string `json:"interfaces"`
	}
	decode("card", &card)
	if card.Name != "claude" || !card.Streaming || fmt.Sprint(card.Interfaces) != "["+r.URL+"/a2a/claude]" {
		t.Errorf("card = %+v, want claude, streaming, at %s/a2a/claude", card, r.URL)
	}

	var sent, got jsTask
	decode("send", &sent)
	if sent.Error != "" || sent.State != "TASK_STATE_COMPLETED" || sent.Status != "Not blocked: ship it." || len(sent.Artifacts) != 1 || sent.Artifacts[0].Text != "Not blocked: ship it." {
		t.Errorf("send = %+v, want completed with claude's reply as status and artifact", sent)
	}
	_, env, err := r.awaitEnvelope(t.Context(), "js-send", "chatgpt", "claude", 0)
	if err != nil {
		t.Fatal(err)
	}
	if env.Body != "Is the deploy blocked?" || sent.Crosstalk["message"] != env.Message {
		t.Errorf("envelope %s %q, task metadata %v: want the message's text, its id in the task", env.Message, env.Body, sent.Crosstalk)
	}
	decode("get", &got)
	if got.ID != sent.ID || got.State != "TASK_STATE_COMPLETED" {
		t.Errorf("get = %+v, want task %s completed", got, sent.ID)
	}

	var stream struct {
		Events []string `json:"events"`
		Error  string   `json:"error"`
	}
	decode("stream", &stream)
	want := []string{"task:TASK_STATE_SUBMITTED", "status:TASK_STATE_WORKING", "status:TASK_STATE_WORKING:on it", "artifact:Deployed.", "status:TASK_STATE_COMPLETED:Deployed."}
	if fmt.Sprint(stream.Events) != fmt.Sprint(want) || stream.Error != "" {
		t.Errorf("stream = %q (error %q), want %q", stream.Events, stream.Error, want)
	}

	var canceled struct{ Before, After, Error string }
	decode("cancel", &canceled)
	if canceled.Error != "" || canceled.After != "TASK_STATE_CANCELED" || strings.Contains(canceled.Before, "CANCELED") {
		t.Errorf("cancel = %+v, want an open task, then canceled", canceled)
	}
	first, sentCancel, err := r.awaitEnvelope(t.Context(), "js-cancel", "chatgpt", "claude", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, closed, err := r.awaitEnvelope(t.Context(), "js-cancel", "chatgpt", "claude", first.Seq); err != nil || closed.Intent != envelope.IntentClose || closed.Parent != sentCancel.Message {
		t.Errorf("after the cancel: %+v, %v; want a CLOSE answering %s", closed, err, sentCancel.Message)
	}

	var notFound jsTask
	decode("notfound", &notFound)
	if notFound.Error == "" {
		t.Errorf("notfound = %+v, want an error", notFound)
	}
}
