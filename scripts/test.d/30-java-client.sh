# The Java client: built with javac alone (no Maven), its example compiled
# against the jar, and its tests run against the real agent. Needs a JDK 17+:
# installed here when missing (Debian's openjdk-17-jdk-headless), as
# scripts/test installs redis-server.
set -euo pipefail
if ! command -v javac >/dev/null || ! javac -version 2>&1 | grep -Eq 'javac (1[7-9]|[2-9][0-9])'; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing openjdk-17-jdk-headless (the Java client's tests need javac 17)"
    export DEBIAN_FRONTEND=noninteractive
    # scripts/test runs its steps two at a time: one installs at a time.
    flock /tmp/lock-agent-test-apt.lock sh -c 'apt-get update -qq && apt-get install -y -qq openjdk-17-jdk-headless >/dev/null'
  else
    echo "javac 17 is not installed: sudo apt-get install -y openjdk-17-jdk-headless" >&2
    exit 1
  fi
fi
clients/java/test.sh
# The jar alone, as a Java user builds it: build.sh with the JDK and the
# system's tools only (Go lives in /usr/local/go/bin, off this PATH).
jdk=$(dirname "$(readlink -f "$(command -v javac)")")
env -i HOME="$HOME" PATH="$jdk:/usr/bin:/bin" clients/java/build.sh
