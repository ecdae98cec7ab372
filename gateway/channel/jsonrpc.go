package channel

import (
	"encoding/json"
	"fmt"
)

// JSON-RPC 2.0 error codes used on the channel (JSON-RPC 2.0 §5.1; -32002
// as in MCP; -32001 and -32003 are this channel's).
const (
	CodeParseError       = -32700
	CodeInvalidRequest   = -32600
	CodeMethodNotFound   = -32601
	CodeInvalidParams    = -32602
	CodeInternal         = -32603
	CodeConflict         = -32001
	CodeNotInitialized   = -32002
	CodePermissionDenied = -32003
)

// Error is a JSON-RPC error object. Data carries {"reason": …} and, where
// the relay refused an action, its CCCS error code.
type Error struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

// Error returns the JSON-RPC error code and message.
func (e *Error) Error() string {
	return fmt.Sprintf("channel: JSON-RPC error %d: %s", e.Code, e.Message)
}

var _ error = (*Error)(nil)

func rpcErr(code int, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	return &Error{Code: code, Message: msg, Data: map[string]any{"reason": msg}}
}

// Message is one JSON-RPC 2.0 message: a request (Method and ID), a
// notification (Method, no ID) or a response (ID and Result or Error).
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// IsRequest reports a request (expects a response).
func (m *Message) IsRequest() bool { return m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null" }

// IsNotification reports a notification.
func (m *Message) IsNotification() bool {
	return m.Method != "" && (len(m.ID) == 0 || string(m.ID) == "null")
}

// IsResponse reports a response.
func (m *Message) IsResponse() bool { return m.Method == "" && len(m.ID) > 0 }

// InitializeParams is what the harness sends in `initialize` (C2A
// "Initialization").
type InitializeParams struct {
	ProtocolVersion string         `json:"protocolVersion"`
	ClientInfo      map[string]any `json:"clientInfo,omitempty"`
	Capabilities    Capabilities   `json:"capabilities"`
	// Meta may carry a progressToken for the backlog replay.
	Meta map[string]any `json:"_meta,omitempty"`
}

// Capabilities are the C2A capability groups: each maps a feature to
// whether the side supports it.
type Capabilities struct {
	Delivery  map[string]bool `json:"delivery,omitempty"`
	Injection map[string]bool `json:"injection,omitempty"`
	ChatTools map[string]bool `json:"chatTools,omitempty"`
	Utilities map[string]bool `json:"utilities,omitempty"`
}

// InitializeResult is the host's answer to `initialize`.
type InitializeResult struct {
	ProtocolVersion string         `json:"protocolVersion"`
	ServerInfo      map[string]any `json:"serverInfo"`
	Agent           string         `json:"agent"`
	Capabilities    Capabilities   `json:"capabilities"`
	// Instructions are the standing C2A response rules.
	Instructions string `json:"instructions"`
	// Resume is the seq each group resumes after (the delivery cursor).
	Resume map[string]int64 `json:"resume"`
	// Limits are the channel's bounds.
	Limits Limits `json:"limits"`
}

// Limits tell the harness the channel's bounds.
type Limits struct {
	MaxMessageBytes int   `json:"maxMessageBytes"`
	MaxAttempts     int   `json:"maxAttempts"`
	AckTimeoutMs    int64 `json:"ackTimeoutMs"`
	Window          int   `json:"window"`
	HeartbeatMs     int64 `json:"heartbeatMs"`
}

// AckResult is the harness's response to `chat/deliver` (all optional):
// Accepted false asks for redelivery; Disposition records how the event
// ended (C2A "Event Disposition").
type AckResult struct {
	Accepted    *bool  `json:"accepted,omitempty"`
	Disposition string `json:"disposition,omitempty"`
	Note        string `json:"note,omitempty"`
}

// AckParams are the params of a `chat/ack` request.
type AckParams struct {
	EventID     string `json:"eventId"`
	Disposition string `json:"disposition,omitempty"`
	Note        string `json:"note,omitempty"`
}

// ActionParams are the params of `chat/react`, `chat/claim`, `chat/defer`
// and `chat/resolve`.
type ActionParams struct {
	EventID string `json:"eventId"`
	Group   string `json:"group,omitempty"`
	Signal  string `json:"signal,omitempty"` // chat/react
	Note    string `json:"note,omitempty"`   // chat/defer (required), chat/resolve
}
