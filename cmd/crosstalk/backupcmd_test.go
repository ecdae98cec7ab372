package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/api"
)

// startTestRelay starts `crosstalk relay` in-process on dataDir, on a
// free loopback port, without the folder transport or a rate limit; mod
// changes the config further.
func startTestRelay(t *testing.T, dataDir string, mod func(*Config)) *runningRelay {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir, cfg.Listen, cfg.TrustFile = dataDir, "127.0.0.1:0", filepath.Join(dataDir, "known_keys")
	cfg.Folder.Disabled = true
	cfg.RateLimit = -1
	if mod != nil {
		mod(&cfg)
	}
	r, err := startRelay(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// postEnvelope posts text and returns its result when the relay answered
// 200 with one.
func postEnvelope(url, text string) (api.Result, bool) {
	req, _ := http.NewRequest("POST", url+"/crosstalk/receive", strings.NewReader(text))
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return api.Result{}, false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out struct{ Results []api.Result }
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &out) != nil || len(out.Results) != 1 {
		return api.Result{}, false
	}
	return out.Results[0], true
}

// TestLedgerBackup backs up the ledger of a relay under load with
// `crosstalk ledger backup`, then starts a relay on the copy: every
// envelope acknowledged before the backup began is there as the event its
// answer named, sending one again is a duplicate, and the restored relay
// records new envelopes.
func TestLedgerBackup(t *testing.T) {
	dir := t.TempDir()
	live := startTestRelay(t, filepath.Join(dir, "live"), nil)
	var (
		wg    sync.WaitGroup
		stop  atomic.Bool
		mu    sync.Mutex
		acked []api.Result
		texts = map[string]string{}
	)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				e := envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, fmt.Sprintf("writer %d, envelope %d", w, i))
				e.Context = fmt.Sprintf("g%d", i%3)
				b, _ := envelope.Marshal(e)
				if res, ok := postEnvelope(live.url, string(b)); ok {
					mu.Lock()
					acked = append(acked, res)
					texts[res.Message] = string(b)
					mu.Unlock()
				}
			}
		})
	}
	for { // until the load is under way
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 100 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	before := append([]api.Result(nil), acked...)
	mu.Unlock()
	dest := filepath.Join(dir, "backup.db")
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"ledger", "backup", "--data", filepath.Join(dir, "live"), dest}, strings.NewReader(""), &stdout, &stderr)
	stop.Store(true)
	wg.Wait()
	if code != exitOK {
		t.Fatalf("ledger backup = exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "backed up") {
		t.Errorf("ledger backup printed %q", stdout.String())
	}
	if err := live.shutdown(); err != nil {
		t.Fatal(err)
	}
	if code := run(t.Context(), []string{"ledger", "backup", "--data", filepath.Join(dir, "live"), dest}, strings.NewReader(""), &stdout, &stderr); code != exitFailure {
		t.Errorf("backup over an existing file = exit %d, want %d", code, exitFailure)
	}

	// Restore: the copy becomes the ledger of a new relay.
	restored := filepath.Join(dir, "restored")
	if err := os.MkdirAll(restored, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dest, filepath.Join(restored, "ledger.db")); err != nil {
		t.Fatal(err)
	}
	r := startTestRelay(t, restored, nil)
	defer r.shutdown()
	for _, res := range before {
		ev, err := r.store.Get(t.Context(), res.EventID)
		if err != nil || ev.GroupID != res.GroupID || ev.Seq != res.Seq {
			t.Fatalf("acknowledged %s (event %s, %s/%d) in the restored ledger: %+v, %v", res.Message, res.EventID, res.GroupID, res.Seq, ev, err)
		}
	}
	if res, ok := postEnvelope(r.url, texts[before[0].Message]); !ok || !res.Duplicate || res.EventID != before[0].EventID {
		t.Errorf("sending an acknowledged envelope again to the restored relay = %+v, %v; want a duplicate of %s", res, ok, before[0].EventID)
	}
	e := envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, "after the restore")
	b, _ := envelope.Marshal(e)
	if res, ok := postEnvelope(r.url, string(b)); !ok || res.Duplicate {
		t.Errorf("new envelope on the restored relay = %+v, %v", res, ok)
	}
	t.Logf("%d acknowledged before the backup, %d in all", len(before), len(acked))
}
