#!/usr/bin/env bash
# test.sh runs the whole test suite: formatting, go.mod tidiness, vet,
# cross-builds, staticcheck and the race-enabled tests. It installs missing
# tools first (scripts/deps.sh).
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
export PATH="$(go env GOPATH)/bin:$PATH"

echo "== gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
echo "== go mod tidy -diff"
go mod tidy -diff
echo "== go vet"
go vet ./...
echo "== cross-builds"
# Every package builds, and every test compiles (go vet type-checks the
# tests), on the platforms we ship for; OS-specific code and test helpers
# carry build tags.
for target in linux/amd64 linux/arm64 darwin/arm64 windows/amd64 freebsd/amd64; do
  echo "   $target"
  GOOS=${target%/*} GOARCH=${target#*/} go build ./...
done
for target in darwin/arm64 windows/amd64; do
  GOOS=${target%/*} GOARCH=${target#*/} go vet ./...
done
echo "== staticcheck"
staticcheck ./...
echo "== go test -race"
# SQLite (modernc.org/sqlite/lib) and the C library under it
# (modernc.org/libc) are C translated to Go. Compiled with -race, every
# load and store of theirs calls into the race runtime, which skips those
# outside Go's heap and data, and SQLite's state is C memory that libc
# maps itself: the tests that open SQLite spent most of their CPU there
# (4-5x). They are compiled without instrumentation; all else (our
# packages, the standard library with database/sql, the driver package
# modernc.org/sqlite) is instrumented as before. What is no longer
# checked is a race on libc's and SQLite's own Go variables, a defect of
# the translation, not of ours.
go test -race -count=1 -timeout 12m \
  -gcflags=modernc.org/sqlite/lib=-race=false -gcflags=modernc.org/libc/...=-race=false ./...
