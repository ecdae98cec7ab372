package main

import (
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/gateway/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPHelpNamesEveryTool: `crosstalk mcp --help` lists the tools the
// server offers; it named 10 of 20 (no chat.owe, chat.handoff, scope.*,
// agent.heartbeat, …).
func TestMCPHelpNamesEveryTool(t *testing.T) {
	ctx := t.Context()
	srv, err := mcpserver.New(mcpserver.Options{Agent: "claude", Backend: &c2a.Remote{URL: "http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	if _, err := srv.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, _ := runCLI(t, "", "mcp", "--help")
	help := strings.Join(strings.Fields(stdout+stderr), " ")
	for _, tool := range tools.Tools {
		if !strings.Contains(help, tool.Name) {
			t.Errorf("crosstalk mcp --help does not name the tool %s", tool.Name)
		}
	}
	if len(tools.Tools) < 20 {
		t.Errorf("the server lists %d tools; want the 20 of docs/agents.md", len(tools.Tools))
	}
}
