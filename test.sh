#!/usr/bin/env bash
# test.sh runs the whole test suite: formatting, vet, staticcheck and the
# race-enabled tests. It installs missing tools first (scripts/deps.sh).
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
export PATH="$(go env GOPATH)/bin:$PATH"

echo "== gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
echo "== go vet"
go vet ./...
echo "== staticcheck"
staticcheck ./...
echo "== go test -race"
go test -race -count=1 -timeout 12m ./...
