package sqlite

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/klauspost/compress/s2"
)

// s2MaxEncodedLen is the room pack asks of the scratch for data of n bytes.
func s2MaxEncodedLen(n int) int { return 1 + s2.MaxEncodedLen(n) }

// eventData is an envelope's event data as the relay writes it.
const eventData = `{"text":"Benchmark envelope 123456.\nPlease review the attached change and answer with a short summary.","format":"plain","priority":"normal","to":["reader"],"client_id":"msg:01M8MGT5RQ6Y0S3Q0D7A9BYZ4F","x_crosstalk":{"envelope":{"from":"BENCH","to":"READER","version":1,"user":"root","session":"2026-11-29T20Z 57d02a","thread":"01M8MGT5RQ6Y0S3Q0D7A9BYZ4E","message":"01M8MGT5RQ6Y0S3Q0D7A9BYZ4F","context":"bench-3","intent":"REQUEST","body":"Benchmark envelope 123456.\nPlease review the attached change and answer with a short summary.","sig":"ed25519:pkid=bench@x;sig=ias4i8Lva3rdJ83I6aDy-T7bYG7_OVnYf2ARO-q6OrURTALLHhd3pNzlvseLNiHiNetNozhj-vIph-TmkP1vAQ","complete":true,"line":1},"raw":"[[BENCH→READER v1]]\nuser: root\nsession: 2026-11-29T20Z 57d02a\nthread: 01M8MGT5RQ6Y0S3Q0D7A9BYZ4E\nmessage: 01M8MGT5RQ6Y0S3Q0D7A9BYZ4F\ncontext: bench-3\nintent: REQUEST\n\nbody: |\n  Benchmark envelope 123456.\n  Please review the attached change and answer with a short summary.\nsig: ed25519:pkid=bench@x;sig=ias4i8Lva3rdJ83I6aDy-T7bYG7_OVnYf2ARO-q6OrURTALLHhd3pNzlvseLNiHiNetNozhj-vIph-TmkP1vAQ\n[[END]]\n","transport":"http","source":"127.0.0.1:39590","sender":"bench","verified":true,"verification":"verified","pkid":"bench@x","idempotency_key":"sha256:4983b7322ce559db699e96e505cda21a"}}`

func TestPack(t *testing.T) {
	random := make([]byte, 4096)
	rand.Read(random)
	noise := `{"x":"` + hex.EncodeToString(random) + `"}`
	big := `{"text":"` + strings.Repeat("a line of a long body\\n", 40000) + `"}`
	over := `{"text":"` + strings.Repeat("a line of a long body\\n", maxUnpacked/22+1) + `"}`
	tests := []struct {
		name   string
		data   string
		packed bool
	}{
		{"empty", ``, false},
		{"empty object", `{}`, false},
		{"short", `{"actor_id":"sam","event_id":"01M8MGT5RQ6Y0S3Q0D7A9BYZ4F"}`, false},
		{"an envelope's event", eventData, true},
		{"does not pack", noise, false},
		{"large", big, true},
		// Data unpack would refuse (it claims more than maxUnpacked)
		// must not be packed: a row that does not read back is lost.
		{"over maxUnpacked", over, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := pack(nil, []byte(tt.data))
			b, packed := v.([]byte)
			if packed != tt.packed {
				t.Fatalf("pack() = %T, packed %v, want %v", v, packed, tt.packed)
			}
			if !packed {
				if v.(string) != tt.data {
					t.Fatalf("pack() = %q, want the data as it is", v)
				}
				b = []byte(tt.data)
			} else if b[0] != tagS2Dict1 {
				t.Fatalf("pack() begins %#x, want the tag %#x", b[0], tagS2Dict1)
			}
			got, err := unpack(b)
			if err != nil || string(got) != tt.data {
				t.Fatalf("unpack(pack()) = %.80q, %v, want the data back", got, err)
			}
			if tt.name == "an envelope's event" {
				t.Logf("%d bytes packed into %d", len(tt.data), len(b))
				if len(b) > len(tt.data)/2 {
					t.Errorf("packed into %d bytes, want at most half of %d", len(b), len(tt.data))
				}
			}
		})
	}
}

func TestUnpackDamaged(t *testing.T) {
	good := pack(nil, []byte(eventData)).([]byte)
	tests := []struct {
		name string
		v    []byte
	}{
		{"tag alone", []byte{tagS2Dict1}},
		{"truncated", good[:len(good)/2]},
		{"claims more than the bound", append([]byte{tagS2Dict1}, 0xff, 0xff, 0xff, 0xff, 0x0f)},
		{"garbage", []byte{tagS2Dict1, 0x10, 0xfe, 0xfe, 0xfe}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := unpack(tt.v); !errors.Is(err, errDamagedData) {
				t.Errorf("unpack() = %.40q, %v, want errDamagedData", got, err)
			}
		})
	}
}

// TestDict1Frozen holds dict1's bytes: every row packed with it needs
// the same dictionary to unpack. A new dictionary needs a new tag.
const dict1SHA256 = "e6fa5d0bdd3c31c34bba5ccaff320be7296d6b44895143f36ba94f603690ffda"

func TestDict1Frozen(t *testing.T) {
	if dict1 == nil {
		t.Fatal("dict1 is nil: dict1Text is not a dictionary")
	}
	sum := sha256.Sum256(dict1.Bytes())
	if got := hex.EncodeToString(sum[:]); got != dict1SHA256 {
		t.Fatalf("dict1 serialized has SHA-256 %s, want %s: it must never change (add a new tag for a new dictionary)", got, dict1SHA256)
	}
}

// TestPackedRows checks what the file holds: an envelope's event packed,
// a short one as it is, and rows a schema 2 writer stored (plain JSON)
// read as they were.
func TestPackedRows(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ledger.db")
	execFile(t, path, schema, "PRAGMA user_version = 2",
		`INSERT INTO events (id, group_id, seq, ts, kind, scope_key, by_, data, v)
			VALUES ('01J9J3DCZ5P8Q2R4S6T8V0W1X0', 'g', 1, '2026-01-13T10:00:00.000Z', 'chat.message', '', 'bench', '`+strings.ReplaceAll(eventData, "'", "''")+`', 1)`,
		`INSERT INTO groups VALUES ('g', 1)`)
	s, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatalf("Open(version 2) error = %v", err)
	}
	defer s.Close()
	res, err := s.Append(ctx, []ledger.Record{
		{Kind: "chat.message", GroupID: "g", By: "bench", Data: []byte(eventData)},
		{Kind: "chat.ack", GroupID: "g", By: "bench", Data: []byte(`{"event_id":"01J9J3DCZ5P8Q2R4S6T8V0W1X0"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.pin.QueryContext(ctx, `SELECT seq, typeof(data), substr(data, 1, 1) FROM events ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var seq int
		var typ string
		var first []byte
		if err := rows.Scan(&seq, &typ, &first); err != nil {
			t.Fatal(err)
		}
		got = append(got, typ+":"+hex.EncodeToString(first))
	}
	want := []string{"text:7b", "blob:01", "text:7b"} // as stored by schema 2; packed; short
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("stored data = %v, want %v", got, want)
	}
	for seq, data := range map[int64]string{1: eventData, 2: eventData, 3: `{"event_id":"01J9J3DCZ5P8Q2R4S6T8V0W1X0"}`} {
		evs, err := s.Range(ctx, "g", seq-1, nil, 1)
		if err != nil || len(evs) != 1 || string(evs[0].Data) != data {
			t.Errorf("Range(g, %d, 1) = %+v, %v, want the data as appended", seq-1, evs, err)
		}
	}
	if ev, err := s.Get(ctx, res[0].Event.ID); err != nil || string(ev.Data) != eventData {
		t.Errorf("Get(packed) data = %.60s, %v", ev.Data, err)
	}
	var version int
	if err := s.pin.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil || version != schemaVersion {
		t.Errorf("user_version after Open(version 2) = %d, %v, want %d", version, err, schemaVersion)
	}
}

func FuzzPack(f *testing.F) {
	f.Add([]byte(eventData))
	f.Add([]byte(`{}`))
	f.Add([]byte{tagS2Dict1, 0x10, 0xfe})
	f.Fuzz(func(t *testing.T, data []byte) {
		var scratch []byte
		v := pack(&scratch, data)
		b, packed := v.([]byte)
		if !packed {
			b = []byte(v.(string))
		}
		got, err := unpack(b)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("unpack(pack(%q)) = %q, %v", data, got, err)
		}
		// Any stored value: unpack returns data or an error, never panics.
		unpack(data)
	})
}

// BenchmarkPack packs and unpacks an envelope's event data as the writer
// and the readers do, and reports the stored size against the data's.
func BenchmarkPack(b *testing.B) {
	data := []byte(eventData)
	var scratch []byte
	b.Run("pack", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		var stored int
		for b.Loop() {
			scratch = scratch[:0]
			stored = len(pack(&scratch, data).([]byte))
		}
		b.ReportMetric(float64(stored)/float64(len(data)), "stored/data")
	})
	packed := pack(nil, data).([]byte)
	b.Run("unpack", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := unpack(packed); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestPackedScratch appends events of every kind of data in one
// transaction, as the writer does with queued appends: short data
// (text), envelopes' events (packed into Store.packed, several in one
// statement), data that does not pack (text), one event whose packed
// blob outgrows maxPackedScratch, a run that falls back to one statement
// per append (a dedupe key taken within it) and a multi-record append
// (its own savepoint, bindEvent one row at a time). Every event must read
// back byte for byte: a blob bound from the scratch must not be
// overwritten by the next one before the statement has run.
func TestPackedScratch(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer s.Close()
	noise := func(i int) []byte {
		b := make([]byte, 1024)
		rand.Read(b)
		return fmt.Appendf(nil, `{"i":%d,"x":"%s"}`, i, hex.EncodeToString(b))
	}
	envelope := func(i int) []byte {
		return []byte(strings.ReplaceAll(eventData, "123456", fmt.Sprintf("%06d", i)))
	}
	huge := func(i int) []byte {
		return fmt.Appendf(nil, `{"i":%d,"text":"%s"}`, i, strings.Repeat(fmt.Sprintf("line %d of a long body\\n", i), maxPackedScratch/16))
	}
	type rec struct {
		data []byte
		key  string
		dup  int // 1 + the index of the record whose key it repeats
	}
	var recs []rec
	for i := range 40 {
		r := rec{key: fmt.Sprint("k", i)}
		switch {
		case i == 21:
			r.data = huge(i)
		case i%4 == 0:
			r.data = fmt.Appendf(nil, `{"i":%d}`, i)
		case i%4 == 2:
			r.data = noise(i)
		default:
			r.data = envelope(i)
		}
		if i == 9 { // k3 is op 3's, in the same run of 16: the run goes one at a time
			r.key, r.dup = "k3", 1+3
		}
		recs = append(recs, r)
	}
	if len(pack(nil, recs[21].data).([]byte)) >= maxPackedScratch || s2MaxEncodedLen(len(recs[21].data)) <= maxPackedScratch {
		t.Fatalf("record 21 should pack small, but need more than maxPackedScratch of room")
	}
	// The writer goroutine waits on an empty queue: the test runs its
	// transaction, as TestHeldAppends does.
	bt := s.begin()
	var ops []*op
	multi := make([]ledger.Result, 2)
	for i, r := range recs {
		o := &op{ctx: ctx, done: make(chan error, 1), rec: ledger.Record{
			Kind: "chat.message", GroupID: fmt.Sprint("g", i%3), DedupeKey: r.key, Data: r.data}}
		if i == 30 { // a multi-record append: ops 16-29 go first, in runs of 8, 4 and 2
			o.fn = func(w *wtx) error {
				for j := range multi {
					var err error
					if multi[j], err = w.append(ledger.Record{Kind: "chat.message", GroupID: "m", Data: envelope(100 + j)}); err != nil {
						return err
					}
				}
				return nil
			}
		}
		ops = append(ops, o)
		bt.run(o)
	}
	c, ok := bt.commit()
	if !ok {
		t.Fatalf("commit: %v", bt.err)
	}
	s.finish(c)
	if len(s.packed) != 0 || cap(s.packed) > maxPackedScratch {
		t.Errorf("Store.packed has len %d, cap %d after the transaction, want 0 and at most %d", len(s.packed), cap(s.packed), maxPackedScratch)
	}

	want := map[string][]byte{} // event id → data
	for i, o := range ops {
		if err := <-o.done; err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
		if o.fn != nil {
			for j, res := range multi {
				want[res.Event.ID] = envelope(100 + j)
			}
			continue
		}
		if d := recs[i].dup; d > 0 {
			if !o.res.Duplicate || o.res.Event.ID != ops[d-1].res.Event.ID {
				t.Errorf("op %d: %+v, want a duplicate of op %d", i, o.res, d-1)
			}
			continue
		}
		want[o.res.Event.ID] = recs[i].data
	}
	log, err := s.Log(ctx, 0, 1000)
	if err != nil {
		t.Fatalf("Log() error = %v", err)
	}
	if len(log) != len(want) {
		t.Errorf("Log() holds %d events, want %d", len(log), len(want))
	}
	for _, l := range log {
		if !bytes.Equal(l.Event.Data, want[l.Event.ID]) {
			t.Errorf("Log(): event %s (pos %d) data = %.60q… (%d bytes), want %.60q… (%d bytes)", l.Event.ID, l.Pos, l.Event.Data, len(l.Event.Data), want[l.Event.ID], len(want[l.Event.ID]))
		}
		if ev, err := s.Get(ctx, l.Event.ID); err != nil || !bytes.Equal(ev.Data, want[l.Event.ID]) {
			t.Errorf("Get(%s) data = %.60q…, %v, want it as appended", l.Event.ID, ev.Data, err)
		}
	}
	var packed int
	if err := s.pin.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE typeof(data) = 'blob'`).Scan(&packed); err != nil || packed < 20 {
		t.Errorf("%d rows packed, %v; want at least 20", packed, err)
	}
}

// TestDamagedRowError damages a packed row behind the store's back and
// checks that every read of it fails with errDamagedData, naming the
// event, its group and seq, and for the log its position, so that an
// operator can find the row; the rows around it still read.
func TestDamagedRowError(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var res []ledger.Result
	for range 3 {
		r, err := s.Append(ctx, []ledger.Record{{Kind: "chat.message", GroupID: "g", By: "bench", Data: []byte(eventData)}})
		if err != nil {
			t.Fatal(err)
		}
		res = append(res, r[0])
	}
	bad := res[1].Event
	execFile(t, path, `UPDATE events SET data = x'01fe01fe01fe' WHERE id = '`+bad.ID+`'`)
	pos := fmt.Sprintf("position %d", res[1].Pos)
	where := fmt.Sprintf(`event %s (group "g", seq 2)`, bad.ID)
	var followErr error
	for _, err := range s.FollowLog(ctx, res[0].Pos) {
		followErr = err
		break
	}
	tests := []struct {
		name string
		err  error
		want []string
	}{
		{"Log", func() error { _, err := s.Log(ctx, 0, 10); return err }(), []string{where, pos}},
		{"LogBefore", func() error { _, err := s.LogBefore(ctx, 0, 10); return err }(), []string{where, pos}},
		{"FollowLog", followErr, []string{where, pos}},
		{"Range", func() error { _, err := s.Range(ctx, "g", 0, nil, 0); return err }(), []string{where}},
		{"Get", func() error { _, err := s.Get(ctx, bad.ID); return err }(), []string{where}},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, errDamagedData) {
			t.Errorf("%s error = %v, want errDamagedData", tt.name, tt.err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(tt.err.Error(), w) {
				t.Errorf("%s error = %q, want it to name %q", tt.name, tt.err, w)
			}
		}
		if strings.Contains(tt.err.Error(), "sqlite: event data") {
			t.Errorf("%s error = %q, want the package's prefix once, not again before the damage", tt.name, tt.err)
		}
	}
	for _, r := range []ledger.Result{res[0], res[2]} {
		if ev, err := s.Get(ctx, r.Event.ID); err != nil || string(ev.Data) != eventData {
			t.Errorf("Get(%s) beside the damaged row = %.40q, %v", r.Event.ID, ev.Data, err)
		}
	}
}
