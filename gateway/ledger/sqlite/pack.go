package sqlite

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/klauspost/compress/s2"
)

// Event data is stored packed (schema 3): an S2 block encoded against a
// dictionary of the JSON the relay writes (dict1), behind one tag byte.
// An envelope's event holds the envelope three times (the body as text,
// the envelope's JSON form, its raw text) and the same ids and signature
// two or three times, so its ~1.3 KB pack into ~0.5 KB: fewer pages per
// commit, less to write to the WAL, to fsync and to checkpoint, and a
// smaller file (docs/operations.md "Upgrading", "Dependencies"). Reads
// unpack in scanEvent, so nothing above the store sees a packed value.
//
// A value whose first byte is '{' (every JSON object: what schema 2
// stored, and what short data and data that packs badly are still stored
// as) is the data itself; JSON text never begins with a control byte, so
// a tag cannot be mistaken for data.
const (
	// tagS2Dict1 begins a value packed with S2 and dict1. dict1 never
	// changes: a new dictionary gets a new tag.
	tagS2Dict1 = 0x01
	// packMin is the shortest data packed: a shorter value gains less
	// than the tag and S2's header cost.
	packMin = 96
	// maxUnpacked bounds the data a packed value may claim to hold: eight
	// times the relay's default bound of one intake. pack stores larger
	// data as it is (max_body may be set higher, and the Store takes
	// data of any size), so a larger claim is a damaged row, not an
	// allocation to make.
	maxUnpacked = 64 << 20
)

// errDamagedData is wrapped by the error of a read whose row holds a
// packed value that does not unpack.
var errDamagedData = errors.New(`event data damaged (a packed value that does not unpack); restore the ledger from a backup (docs/operations.md "Backup and restore")`)

// pack returns the value to store for data: data itself, as text, when it
// is short, longer than maxUnpacked (unpack would refuse it: the row
// would not read back), or packs to less than an eighth smaller; else
// tagS2Dict1 and the S2 block, as a blob. Data that begins with the tag
// (never JSON) is packed whatever its size, so that unpack gives back any
// data up to maxUnpacked.
//
// A blob is appended to *scratch, which the caller reuses once the value
// is bound and executed (the driver copies what it binds); nil scratch
// allocates the blob.
func pack(scratch *[]byte, data []byte) any {
	tagged := len(data) > 0 && data[0] == tagS2Dict1
	if (len(data) < packMin || len(data) > maxUnpacked) && !tagged {
		return text(data)
	}
	n := s2.MaxEncodedLen(len(data)) // ≥ 0: maxUnpacked is far below S2's bound
	var grown, buf []byte
	if scratch != nil {
		grown = slices.Grow(*scratch, 1+n) // a new array leaves the blobs bound before in the old one
		buf = grown[len(*scratch) : len(*scratch)+1+n]
	} else {
		buf = make([]byte, 1+n)
	}
	buf[0] = tagS2Dict1
	enc := dict1.Encode(buf[1:], data)
	if 1+len(enc) > len(data)-len(data)/8 && !tagged {
		return text(data)
	}
	if unsafe.SliceData(enc) != &buf[1] { // not encoded in place
		copy(buf[1:], enc)
	}
	v := buf[: 1+len(enc) : 1+len(enc)]
	if scratch != nil {
		*scratch = grown[:len(*scratch)+len(v)]
	}
	return v
}

// unpack returns the data a stored value holds. It returns v itself when
// v is not packed.
func unpack(v []byte) ([]byte, error) {
	if len(v) == 0 || v[0] != tagS2Dict1 {
		return v, nil
	}
	n, err := s2.DecodedLen(v[1:])
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %w", errDamagedData, err)
	case n > maxUnpacked:
		return nil, fmt.Errorf("%w: it claims %d bytes", errDamagedData, n)
	}
	data, err := dict1.Decode(make([]byte, n), v[1:])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errDamagedData, err)
	}
	return data, nil
}

// dict1 is tagS2Dict1's dictionary: the members of the event data the
// relay writes (gateway's EventData, an envelope's JSON form, its raw
// text), in the order it writes them, with their common values, and its
// first repeat offset at the start of an envelope's event. Every value
// packed with it must unpack with it: it must never change
// (TestDict1Frozen holds its serialized bytes). It is made with the
// offset given, not one MakeDict would search for, so that no version
// of the S2 package can make it differently.
var dict1 = s2.MakeDictManual([]byte(dict1Text), uint16(strings.Index(dict1Text, `{"text":"`)))

const dict1Text = `{"kind":"error","title":"rejected envelope (E-FORMAT)","message":"E-FORMAT: line ` +
	`","x_crosstalk":{"envelope":null,"raw":"","transport":"http","source":"127.0.0.1:","sender":"","verified":false,"verification":""}}` +
	`{"actor_id":"","event_id":"01","emoji":"","signal":"agree","target_actor_id":"","related_event_id":"01","requires_ack":true,"notify_event_id":"01",` +
	`"disposition":"","state":"delivered","expires_at":"2026-","note":"","src_group_id":"","src_event_id":"01","summarized":true}` +
	`{"text":"","format":"plain","priority":"attention","priority":"normal","to":["@all"],"to":[""],"reply_to":"01","client_id":"sha256:","client_id":"msg:01",` +
	`"obligation":{"blocks":"","default_action":"","delegate":"","deadline":"2026-","ack":true},` +
	`"protocol":{"event_type":"HANDOFF","subject":"","summary":"","next_action":"","blocker":"","requested_action":"","urgency":"","requires_ack":true},` +
	`"x_crosstalk":{"envelope":{"from":"","to":"","version":1,"user":"","session":"2026-","thread":"01","parent":"01","message":"01","context":"",` +
	`"intent":"REQUEST","intent":"RESPOND","legacy_intent":"","fields":[{"key":"","value":""}],"meta":[{"namespace":"","fields":[{"key":"","value":""}]}],` +
	`"body":"","sig":"ed25519:pkid=;sig=","complete":true,"line":1},` +
	`"raw":"[[\u2192 v1]]\nuser: \nsession: 2026-\nthread: 01\nparent: 01\nmessage: 01\ncontext: \nintent: REQUEST\n\nmeta: \n\nbody: |\n  \n\nsig: ed25519:pkid=;sig=\n[[END]]\n",` +
	`"transport":"mail","transport":"http","source":"127.0.0.1:","sender":"","principal":"","verified":true,"verification":"unsigned","verification":"unknown-key","verification":"first-use","verification":"verified",` +
	`"pkid":"","assigned_ids":true,"idempotency_key":"sha256:","warnings":[""],"route":[""]}}`
