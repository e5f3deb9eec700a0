#!/usr/bin/env bash
# The agent's and the watchdog's tests again in a build whose mutexes check
# the lock order written at session.mu (internal/lockorder): an inversion
# anywhere they go panics with both stacks.
set -euo pipefail
cd "$(dirname "$0")/../.."
go test -race -count=1 -tags lockorder ./agent/ ./agent/locks/ ./agent/server/ ./agent/outbox/ ./renewal/ ./internal/lockorder/
