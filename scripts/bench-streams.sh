#!/usr/bin/env bash
# bench-streams.sh measures issue 12's "Done when": a `crosstalk relay
# --config` with two token principals (chatgpt writes, claude reads), a
# ledger of EVENTS events over GROUPS
# groups, and STREAMS of claude's agent streams (GET
# /v1/agents/claude/stream, from the start of the ledger) open at once. While the streams replay and then
# sit live, it samples /healthz's latency and the relay's RSS every
# half-second for SECONDS, and prints the worst and median of each, the
# peak RSS (VmHWM) and how many deliveries the streams received.
#
#   scripts/bench-streams.sh                 # 200000 events, 200 groups, 50 streams, 60 s
#   EVENTS=20000 STREAMS=10 SECONDS_=20 scripts/bench-streams.sh
#
# The ledger is filled through the real intake: POST /crosstalk/receive,
# 1000 envelopes per request (the max_envelopes bound). Everything lives in
# a temporary directory that is removed at the end. Results are recorded in
# docs/performance.md ("Agent streams over a large ledger").
set -euo pipefail

EVENTS=${EVENTS:-200000}
GROUPS_=${GROUPS_:-200}
STREAMS=${STREAMS:-50}
SECONDS_=${SECONDS_:-60}
PORT=${PORT:-17931}

root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
relay_pid=""
curls=()
cleanup() {
  [ ${#curls[@]} -gt 0 ] && kill "${curls[@]}" 2>/dev/null || true
  [ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null && wait "$relay_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

echo "building crosstalk" >&2
(cd "$root" && go build -o "$tmp/crosstalk" ./cmd/crosstalk)

sender=sender-token-0123456789abcdef
reader=reader-token-0123456789abcdef
cat >"$tmp/relay.toml" <<EOF
listen = "127.0.0.1:$PORT"
data_dir = "$tmp/data"
trust_file = "$tmp/known_keys"
log_level = "warn"
rate_limit = 100000
rate_burst = 100000
max_streams = $((STREAMS + 10))
stream_limit = $STREAMS

[folder]
disabled = true

[[tokens]]
token = "$sender"
principal = "chatgpt"

[[tokens]]
token = "$reader"
principal = "claude"

[[agents]]
id = "claude"
names = ["CLAUDE"]

[[agents]]
id = "chatgpt"
names = ["CHATGPT"]
EOF

"$tmp/crosstalk" relay --config "$tmp/relay.toml" 2>"$tmp/relay.log" &
relay_pid=$!
url="http://127.0.0.1:$PORT"
for _ in $(seq 100); do
  curl -fsS "$url/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done

echo "filling the ledger: $EVENTS events in $GROUPS_ groups" >&2
start=$(date +%s.%N)
batch=1000
for ((b = 0; b * batch < EVENTS; b++)); do
  awk -v b="$b" -v n="$batch" -v g="$GROUPS_" 'BEGIN {
    for (i = 0; i < n; i++) {
      k = b * n + i
      printf "[[CHATGPT→CLAUDE v1]]\ncontext: proj-%d\nintent: REQUEST\n\nbody: |\n  question %d: please review part %d of the plan\n[[END]]\n", k % g, k, k
    }
  }' >"$tmp/batch.txt"
  code=$(curl -sS -o "$tmp/answer" -w '%{http_code}' -H "Authorization: Bearer $sender" \
    -H 'Accept: application/json' --data-binary @"$tmp/batch.txt" "$url/crosstalk/receive")
  if [ "$code" != 200 ]; then
    echo "POST batch $b: HTTP $code: $(head -c 300 "$tmp/answer")" >&2
    exit 1
  fi
done
fill=$(echo "$(date +%s.%N) - $start" | bc)
rss_filled=$(awk '/VmRSS/ {print $2}' "/proc/$relay_pid/status")
echo "filled in ${fill}s; relay RSS ${rss_filled} kB" >&2

# The same sampling without streams: the machine's own latency, to compare.
: >"$tmp/baseline"
for _ in $(seq 20); do
  curl -sS -o /dev/null -w '%{time_total}\n' --max-time 10 "$url/healthz" >>"$tmp/baseline" || echo 10 >>"$tmp/baseline"
  sleep 0.25
done

echo "opening $STREAMS agent streams" >&2
for ((s = 0; s < STREAMS; s++)); do
  curl -sS -N -H "Authorization: Bearer $reader" "$url/v1/agents/claude/stream" 2>/dev/null \
    > >(grep -c '^event: delivery' >"$tmp/stream-$s.count") &
  curls+=($!)
done

echo "sampling /healthz and RSS every 0.5 s for ${SECONDS_}s" >&2
: >"$tmp/samples"
end=$(($(date +%s) + SECONDS_))
while [ "$(date +%s)" -lt "$end" ]; do
  t=$(curl -sS -o /dev/null -w '%{time_total}' --max-time 10 "$url/healthz" || echo 10)
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$relay_pid/status")
  echo "$t $rss" >>"$tmp/samples"
  sleep 0.5
done
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$relay_pid/status")
open=$(ss -tn state established "( sport = :$PORT )" 2>/dev/null | tail -n +2 | wc -l)

kill "${curls[@]}" 2>/dev/null || true
wait "${curls[@]}" 2>/dev/null || true
curls=()
for ((s = 0; s < STREAMS; s++)); do # the counters write when curl ends
  for _ in $(seq 50); do [ -s "$tmp/stream-$s.count" ] && break; sleep 0.1; done
done
delivered=$(cat "$tmp"/stream-*.count | awk '{s += $1} END {print s + 0}')

sort -n "$tmp/baseline" | awk '{ t[NR] = $1 } END { printf "/healthz without streams: %d samples, median %.1f ms, max %.1f ms\n", NR, t[int((NR + 1) / 2)] * 1000, t[NR] * 1000 }'
awk '{ r[NR] = $2 } END { printf "relay RSS every 10 s (MB):"; for (i = 1; i <= NR; i += 20) printf " %.0f", r[i] / 1024; printf " %.0f\n", r[NR] / 1024 }' "$tmp/samples"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
sort -n -k1 "$tmp/samples" | awk -v hwm="$hwm" -v open="$open" -v delivered="$delivered" \
  -v events="$EVENTS" -v groups="$GROUPS_" -v streams="$STREAMS" -v fill="$fill" '
  { t[NR] = $1; r[NR] = $2; if ($2 > rmax) rmax = $2 }
  END {
    n = NR
    p95 = int(n * 0.95)
    if (p95 < 1) p95 = 1
    printf "ledger: %d events in %d groups (filled in %.1f s)\n", events, groups, fill
    printf "streams: %d opened, %d connections established at the end, %d deliveries received\n", streams, open, delivered
    printf "/healthz: %d samples, median %.1f ms, p95 %.1f ms, max %.1f ms\n", n, t[int((n + 1) / 2)] * 1000, t[p95] * 1000, t[n] * 1000
    printf "relay RSS: max sampled %.0f MB, peak (VmHWM) %.0f MB\n", rmax / 1024, hwm / 1024
  }'
