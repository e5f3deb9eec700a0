# The Node client: its node:test suite (no npm packages) against the real
# agent over real redis-servers. Installs nodejs when missing, as
# scripts/test does redis-server: with apt-get, only as root.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v node >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing nodejs (the Node client's tests)"
    export DEBIAN_FRONTEND=noninteractive
    # scripts/test runs its steps two at a time: one installs at a time.
    flock /tmp/lock-agent-test-apt.lock sh -c 'apt-get update -qq && apt-get install -y -qq nodejs >/dev/null'
  else
    echo "node is not installed: sudo apt-get install -y nodejs (Node 20 or newer)" >&2
    exit 1
  fi
fi
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
  echo "node $(node --version) is too old for the Node client's tests: they need Node 20 or newer" >&2
  exit 1
fi
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/lock-agent" ./cmd/lock-agent
cd clients/node
LOCK_AGENT_BIN="$bin/lock-agent" node --test test/*.test.js
