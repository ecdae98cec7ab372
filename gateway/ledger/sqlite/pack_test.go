package sqlite

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

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
	db, err := sql.Open("sqlite", dsn(path, "_pragma=journal_mode(WAL)"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{schema, "PRAGMA user_version = 2",
		`INSERT INTO events (id, group_id, seq, ts, kind, scope_key, by_, data, v)
			VALUES ('01J9J3DCZ5P8Q2R4S6T8V0W1X0', 'g', 1, '2026-01-13T10:00:00.000Z', 'chat.message', '', 'bench', '` + strings.ReplaceAll(eventData, "'", "''") + `', 1)`,
		`INSERT INTO groups VALUES ('g', 1)`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
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
