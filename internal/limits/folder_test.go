package limits

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/transports"
	"github.com/crosstalk-go/crosstalk/transports/folder"
)

// TestFolderLosesNothing runs the relay's watched folder: an envelope
// appended to a file while the relay records it, and a file whose name
// is 255 bytes long, are both recorded, and every file leaves the inbox
// for processed/.
func TestFolderLosesNothing(t *testing.T) {
	r := start(t, config{})
	dir := t.TempDir()
	path := filepath.Join(dir, "chat.crosstalk")
	second := envelopes(t, 1, nil)
	relayHandler := r.relay.Handler()
	var once sync.Once
	h := func(ctx context.Context, in transports.Inbound) ([]byte, error) {
		reply, err := relayHandler(ctx, in)
		if in.Source == path {
			// The writer appends while the first envelope is recorded.
			once.Do(func() {
				f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					t.Errorf("appending: %v", err)
					return
				}
				f.WriteString(second)
				f.Close()
			})
		}
		return reply, err
	}
	long := strings.Repeat("n", 255-len(".crosstalk")) + ".crosstalk"
	for _, name := range []string{"chat.crosstalk", long} {
		tmp := filepath.Join(dir, ".drop.tmp")
		if err := os.WriteFile(tmp, []byte(envelopes(t, 1, nil)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- folder.New(dir, &folder.Options{Settle: 50 * time.Millisecond, Rescan: 100 * time.Millisecond}).Receive(ctx, h)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Receive() = %v", err)
		}
	}()
	left := func() []string {
		des, _ := os.ReadDir(dir)
		var out []string
		for _, de := range des {
			if !de.IsDir() && !strings.HasPrefix(de.Name(), ".") {
				out = append(out, de.Name())
			}
		}
		return out
	}
	eventually(t, "three envelopes recorded and the inbox empty", func() bool { return r.count() == 3 && len(left()) == 0 })
	processed, err := os.ReadDir(filepath.Join(dir, folder.ProcessedDir))
	if err != nil || len(processed) != 2 {
		t.Errorf("processed/ = %v, %v; want the two files", processed, err)
	}
}

// TestFolderTooManyEnvelopes drops a file with more envelopes than one
// intake may hold: nothing of it is recorded, and it moves to failed/ with
// the reason beside it instead of being offered again forever.
func TestFolderTooManyEnvelopes(t *testing.T) {
	r := start(t, config{relay: gateway.Options{MaxEnvelopes: 3}})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".drop.tmp"), []byte(envelopes(t, 4, nil)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, ".drop.tmp"), filepath.Join(dir, "batch.crosstalk")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- folder.New(dir, &folder.Options{Settle: 50 * time.Millisecond, Rescan: 100 * time.Millisecond}).Receive(ctx, r.relay.Handler())
	}()
	defer func() {
		cancel()
		<-done
	}()
	reason := filepath.Join(dir, folder.FailedDir, "batch.crosstalk"+folder.ErrorSuffix)
	eventually(t, "the file and its reason in failed/", func() bool {
		_, err := os.Stat(reason)
		return err == nil
	})
	if b, _ := os.ReadFile(reason); !strings.Contains(string(b), "too many envelopes") {
		t.Errorf("failed/batch.crosstalk.error = %q, want the envelope bound as the reason", b)
	}
	if n := r.count(); n != 0 {
		t.Errorf("the ledger holds %d events, want 0", n)
	}
}
