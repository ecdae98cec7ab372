#!/usr/bin/env bash
# deps.sh installs what the test suite needs and is not already here:
# Go tools via `go install` and, on Debian as root, the packages for the
# real-server tests. It is idempotent and quick when everything is present.
set -euo pipefail

gobin="$(go env GOPATH)/bin"
export PATH="$gobin:$PATH"
if ! command -v staticcheck >/dev/null 2>&1; then
  echo "deps: installing staticcheck"
  go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
fi

# Debian packages for the real-server tests (transports).
pkgs=()
need() { command -v "$1" >/dev/null 2>&1 || pkgs+=("$2"); }
# clipboard: the tests start their own Xvfb and use xclip (transports/clipboard)
need Xvfb xvfb; need xclip xclip; need xsel xsel; need xauth xauth
# web, extension: the browser tests drive Debian's headless Chromium
# (gateway/web, transports/browser)
need chromium chromium
# extension: the same scenarios in Firefox, over Marionette (transports/browser)
need firefox-esr firefox-esr
# mail: the tests start their own Dovecot (IMAP, LMTP, submission) and Postfix
# on free loopback ports (transports/mail/mailtest)
need /usr/sbin/dovecot dovecot-imapd; need /usr/lib/dovecot/lmtp dovecot-lmtpd
need /usr/lib/dovecot/submission dovecot-submissiond; need /usr/sbin/postfix postfix
# MCP, A2A and web: the TypeScript MCP SDK client, the A2A JS SDK client and
# Playwright run on Node.js.
need node nodejs; need npm npm
# Their postinst scripts would start the system Dovecot (143/993 on every
# interface) and Postfix (25): forbid service starts for this install only,
# unless the machine has its own policy (shared/recipes/test-servers.md §0).
if [[ " ${pkgs[*]-} " =~ \ (dovecot-|postfix) ]] && [ "$(id -u)" = 0 ] && [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi

if [ ${#pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "deps: installing ${pkgs[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
  else
    echo "deps: missing ${pkgs[*]}: install them (Debian: apt-get install ${pkgs[*]})" >&2
  fi
fi

# The MCP server's test drives it with the official TypeScript MCP SDK
# client (gateway/mcpserver/testdata/mcpclient), installed from its lock file.
mcpclient="$(dirname "$0")/../gateway/mcpserver/testdata/mcpclient"
if [ ! -d "$mcpclient/node_modules/@modelcontextprotocol/sdk" ] && command -v npm >/dev/null 2>&1; then
  echo "deps: npm ci in $mcpclient"
  (cd "$mcpclient" && npm ci --no-audit --no-fund --loglevel=error)
fi

# The A2A bridge's test drives it with the A2A JS SDK client
# (gateway/a2a/testdata/a2aclient), installed from its lock file.
a2aclient="$(dirname "$0")/../gateway/a2a/testdata/a2aclient"
if [ ! -f "$a2aclient/node_modules/@a2a-js/sdk/package.json" ] && command -v npm >/dev/null 2>&1; then
  echo "deps: npm ci in $a2aclient"
  (cd "$a2aclient" && npm ci --no-audit --no-fund --loglevel=error)
fi

# web and the browser extension: Playwright (playwright-core, from npm)
# drives Chromium in gateway/web's and transports/browser's browser tests;
# install the locked version when it is missing.
for dir in gateway/web/testdata/browser transports/browser/testdata/browser; do
  tests="$(dirname "$0")/../$dir"
  if [ -f "$tests/package-lock.json" ] && [ ! -f "$tests/node_modules/playwright-core/package.json" ]; then
    if command -v npm >/dev/null 2>&1; then
      echo "deps: npm ci in $dir"
      (cd "$tests" && npm ci --no-audit --no-fund)
    else
      echo "deps: npm missing: the browser tests in $dir need node and npm" >&2
    fi
  fi
done
