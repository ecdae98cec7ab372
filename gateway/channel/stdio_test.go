package channel_test

import (
	"context"
	"io"
	"sync"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/gateway/channel"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// TestStdioHarnessThatNeverReads: `crosstalk harness` whose harness stops
// reading its standard output (a pipe nobody drains) still ends when its
// context does (SIGINT, SIGTERM). It used to wait for ever, twice over:
// the stream's Write ignored the context, and once it returned, the
// session handed the message it answered back to its reader, which had
// quit with the context (that second hang also held a WebSocket session
// whose context ended while it handled a message: a relay shutting down).
func TestStdioHarnessThatNeverReads(t *testing.T) {
	r := testrelay.Start(t, nil)
	r.Send(t, "CHATGPT", "CLAUDE", "REQUEST", "a delivery to write", "", "")
	inR, inW := io.Pipe()
	out := &stuckWriter{writing: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { inW.Close(); close(out.release) })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- channel.Serve(ctx, channel.NewStreamConn(inR, out, inR, 0),
			channel.Options{Agent: "claude", Backend: &c2a.Local{Relay: r.Relay}})
	}()
	go io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+c2a.ProtocolVersion+`"}}`+"\n")
	<-out.writing // the answer to initialize is stuck
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after the context ended = %v, want nil", err)
	}
}

// stuckWriter is standard output nobody reads: its first Write says it
// started, and no Write returns before release.
type stuckWriter struct {
	once             sync.Once
	writing, release chan struct{}
}

func (w *stuckWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.writing) })
	<-w.release
	return 0, io.ErrClosedPipe
}
