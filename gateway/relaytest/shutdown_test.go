package relaytest

import (
	"context"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestGracefulShutdown sends `crosstalk relay` SIGTERM while clients post
// envelopes as fast as it answers: it must drain the requests in flight,
// close the ledger and exit 0, and every envelope that got a 200 —
// including those answered after the signal — must be in the ledger once,
// as the event its answer named.
func TestGracefulShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds crosstalk and runs it as a child process")
	}
	bin := crosstalkBinary(t)
	config, dataDir := loadConfig(t, `shutdown_timeout = "20s"`)
	c := startChild(t, bin, config, dataDir)
	l := newLoad()
	l.url.Store(&c.url)
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	var wg sync.WaitGroup
	for w := range crashClients {
		wg.Go(func() { l.run(ctx, w) })
	}
	deadline := time.Now().Add(30 * time.Second)
	for l.acks.Load() < crashAcksPerRun && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if l.acks.Load() < crashAcksPerRun {
		t.Fatalf("%d acknowledgements in 30 s, want %d; relay log:\n%s", l.acks.Load(), crashAcksPerRun, c.logs)
	}
	atSignal := l.acks.Load()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c.wait(t); err != nil {
		t.Fatalf("relay after SIGTERM under load: %v, want exit 0; log:\n%s", err, c.logs)
	}
	stopLoad()
	wg.Wait()
	stopped := regexp.MustCompile(`msg="stopped: requests drained, ledger closed" took=(\S+)`).FindStringSubmatch(c.logs.String())
	if stopped == nil {
		t.Errorf("relay log lacks the clean stop:\n%s", c.logs)
	} else {
		t.Logf("shutdown under load took %s", stopped[1])
	}

	acked := l.snapshot()
	r := startChild(t, bin, config, dataDir)
	view := readLedger(t, l.client, r.url)
	checkAcked(t, view, acked, "after SIGTERM")
	t.Logf("%d envelopes sent, %d acknowledged (%d of them after SIGTERM), %d unanswered (refused once the listener closed)", l.sent, len(acked), int64(len(acked))-atSignal, len(l.failed))
	r.cmd.Process.Signal(syscall.SIGTERM)
	if err := r.wait(t); err != nil {
		t.Errorf("idle relay after SIGTERM: %v, want exit 0", err)
	}
}
