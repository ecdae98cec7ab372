package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/jetstream"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
)

// LedgerOptions name a ledger backend.
type LedgerOptions struct {
	// Spec is a SQLite file, or a comma-separated list of nats:// (or
	// tls://) URLs for a NATS JetStream ledger (docs/scaling.md).
	Spec string
	// Stream and Replicas configure the JetStream stream when it is
	// created; jetstream.DefaultStream and 1 when zero.
	Stream   string
	Replicas int
	// MustExist refuses a SQLite file that does not exist yet, for
	// commands that read a ledger rather than start one.
	MustExist bool
	// Logger receives the backend's logs; nil discards them.
	Logger *slog.Logger
}

// IsJetStream reports whether spec names a NATS JetStream ledger.
func IsJetStream(spec string) bool {
	return strings.HasPrefix(spec, "nats://") || strings.HasPrefix(spec, "tls://")
}

// OpenLedger opens the ledger backend o names. A missing SQLite file with
// MustExist is an error wrapping fs.ErrNotExist.
func OpenLedger(ctx context.Context, o LedgerOptions) (ledger.Store, error) {
	if IsJetStream(o.Spec) {
		return jetstream.Open(ctx, o.Spec, &jetstream.Options{Stream: o.Stream, Replicas: o.Replicas, Logger: o.Logger})
	}
	if o.Spec == "" {
		return nil, fmt.Errorf("server: no ledger named: want a SQLite file or nats:// URLs")
	}
	if o.MustExist {
		if _, err := os.Stat(o.Spec); err != nil {
			return nil, fmt.Errorf("ledger: %w", err)
		}
	} else if err := os.MkdirAll(filepath.Dir(o.Spec), 0o700); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return sqlite.Open(ctx, o.Spec, &sqlite.Options{Logger: o.Logger})
}

// ProjectionPath is the file of the relay's projections of the ledger
// spec names (docs/scaling.md "Projections"): beside a SQLite ledger
// (ledger.db → ledger.db.projection), in dataDir for a JetStream one,
// one file per stream.
func ProjectionPath(spec, stream, dataDir string) string {
	if IsJetStream(spec) {
		if stream == "" {
			stream = jetstream.DefaultStream
		}
		return filepath.Join(dataDir, "projection-"+stream+".db")
	}
	return spec + ".projection"
}
