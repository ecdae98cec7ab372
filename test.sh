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
go test -race -count=1 -timeout 12m ./...
