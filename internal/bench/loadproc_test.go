package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/signing"
)

// asLoadProcess makes this test binary a load process (ServeLoad) when
// started by TestIngestLoadProcess.
const asLoadProcess = "CROSSTALK_BENCH_TEST_LOAD_PROCESS"

func TestMain(m *testing.M) {
	if os.Getenv(asLoadProcess) == "1" {
		if err := ServeLoad(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestIngestLoadProcess runs a short Ingest with its clients in a load
// process (this test binary, started again) and checks that every
// measurement did work, that the result says where the clients ran, and
// that the CPU per envelope was measured.
func TestIngestLoadProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a short load measurement")
	}
	t.Setenv(asLoadProcess, "1")
	res, err := Ingest(t.Context(), IngestOptions{Clients: 4, Duration: time.Second, LoadCommand: []string{os.Args[0]}})
	if err != nil {
		t.Fatalf("Ingest() = %v", err)
	}
	checkIngest(t, res)
	if res.ClientsInProcess {
		t.Error("ClientsInProcess = true with a load process")
	}
	var out strings.Builder
	res.Print(&out)
	if !strings.Contains(out.String(), "in a load process of their own") {
		t.Errorf("Print() = %q, want it to say where the clients ran", out.String())
	}
}

// TestLoadProcessErrors checks that a load process that is not one, or
// that fails a command, is an error naming what went wrong, not a hang.
func TestLoadProcessErrors(t *testing.T) {
	key := testKey(t)
	if _, err := startLoad(t.Context(), []string{"/bin/true"}, key); err == nil || !strings.Contains(err.Error(), "load process") {
		t.Errorf("startLoad(/bin/true) = %v, want an error about the load process", err)
	}
	if _, err := startLoad(t.Context(), nil, key); err == nil {
		t.Error("startLoad(no command) = nil error")
	}
	t.Setenv(asLoadProcess, "1")
	p, err := startLoad(t.Context(), []string{os.Args[0]}, key)
	if err != nil {
		t.Fatalf("startLoad() = %v", err)
	}
	defer p.close()
	if _, err := p.call(loadReq{Op: "bogus"}); err == nil || !strings.Contains(err.Error(), `unknown command "bogus"`) {
		t.Errorf("call(bogus) = %v, want the load process's refusal", err)
	}
	m := &meter{}
	if err := p.drive("http://127.0.0.1:1/crosstalk/receive", 1, 200*time.Millisecond, false, m); err != nil {
		t.Fatalf("drive(nothing listening) = %v, want the failures counted", err)
	}
	if m.errors == 0 || m.count != 0 {
		t.Errorf("drive(nothing listening) counted %d done, %d errors; want only errors", m.count, m.errors)
	}
}

// testKey is a fresh bench signing key.
func testKey(t *testing.T) *signing.PrivateKey {
	t.Helper()
	key, err := signing.GenerateKey(signing.Ed25519, benchKeyID)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// TestIngestStreams checks --streams: the streams open on the relay, read
// its envelopes' deliveries (all to the streams' agent) in the load
// process and in this one, never more than one each per envelope, and the
// report says so; a count out of range is refused.
func TestIngestStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a short load measurement")
	}
	t.Setenv(asLoadProcess, "1")
	for _, tc := range []struct {
		name string
		load []string
	}{{"load process", []string{os.Args[0]}}, {"in process", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Ingest(t.Context(), IngestOptions{Clients: 4, Duration: time.Second, LoadCommand: tc.load, Streams: 3})
			if err != nil {
				t.Fatalf("Ingest() = %v", err)
			}
			if res.Streams != 3 || res.RelayEvents == 0 || res.StreamDeliveries == 0 || res.StreamDeliveries > 3*res.RelayEvents {
				t.Errorf("Streams %d, RelayEvents %d, StreamDeliveries %d: want 3 streams reading up to one delivery per event each",
					res.Streams, res.RelayEvents, res.StreamDeliveries)
			}
			var out strings.Builder
			res.Print(&out)
			if !strings.Contains(out.String(), "streams: 3 open on the relay") {
				t.Errorf("Print() = %q, want the streams' line", out.String())
			}
		})
	}
	for _, n := range []int{-1, MaxStreams + 1} {
		if _, err := Ingest(t.Context(), IngestOptions{Clients: 1, Duration: time.Second, Streams: n}); err == nil {
			t.Errorf("Ingest(Streams %d) = nil error", n)
		}
	}
}

// TestSourceEnsure checks that ensure signs only what the stock lacks of
// n envelopes not yet handed out, also after next signed some on the fly,
// and that next never hands out an envelope twice.
func TestSourceEnsure(t *testing.T) {
	s := &source{key: testKey(t), groups: allGroups}
	seen := map[string]bool{}
	for _, c := range []struct{ take, ensure, signed int }{
		{0, 5, 5}, // an empty stock gets all five
		{0, 5, 0}, // five unused are there
		{3, 5, 3}, // three handed out: three more
		{5, 2, 2}, // all five handed out: two
		{4, 1, 3}, // two handed out from the stock, two signed on the fly: their places and one
		{1, 0, 0}, // the one is handed out
		{0, 1, 1},
	} {
		for range c.take {
			b, err := s.next()
			if err != nil {
				t.Fatal(err)
			}
			if seen[string(b)] {
				t.Fatal("next() handed out an envelope twice")
			}
			seen[string(b)] = true
		}
		if n, err := s.ensure(c.ensure); err != nil || n != c.signed {
			t.Errorf("after taking %d, ensure(%d) = %d, %v; want %d signed", c.take, c.ensure, n, err, c.signed)
		}
	}
}
