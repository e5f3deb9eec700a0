#!/usr/bin/env bash
# Builds the Java client (build/lockagent.jar) with javac alone, compiles the
# example against the jar, and runs the client's tests against the real agent
# (built from this repository: -dev, and over redis-servers it starts on free
# ports). Needs a JDK 17+, Go and redis-server. LOCK_AGENT_BINARY: an agent
# binary to use instead of building one. JAVA_TEST=REGEX: only those tests.
set -euo pipefail
cd "$(dirname "$0")"
build=build
rm -rf "$build"
mkdir -p "$build/classes" "$build/test-classes" "$build/examples"

./build.sh >/dev/null   # build/lockagent.jar, with the JDK alone
# The example is compiled against the jar alone, as a user would.
javac --release 17 -Werror -cp "$build/lockagent.jar" -d "$build/examples" examples/*.java
# So is the README's snippet (the java block of "## From Java"), so that it stays one that works.
mkdir -p "$build/readme"
awk '/^## From Java/ {on=1} on && /^```java/ {copy=1; next} copy && /^```/ {exit} copy' ../../README.md >"$build/readme/Quickstart.java"
grep -q 'class Quickstart' "$build/readme/Quickstart.java" || { echo "no java snippet under '## From Java' in README.md" >&2; exit 1; }
javac --release 17 -Werror -cp "$build/lockagent.jar" -d "$build/readme" "$build/readme/Quickstart.java"
# The tests are in the client's package (they reach its connection for WHO and HOLDS).
javac --release 17 -Xlint:all,-serial -Werror -cp "$build/classes" -d "$build/test-classes" $(find src/test/java -name '*.java')

binary=${LOCK_AGENT_BINARY:-}
if [ -z "$binary" ]; then
  binary="$build/lock-agent"
  (cd ../.. && go build -o "clients/java/$binary" ./cmd/lock-agent)
fi
java -ea -cp "$build/classes:$build/test-classes" \
  -Dlockagent.binary="$(realpath "$binary")" \
  -Dlockagent.jar="$(realpath "$build/lockagent.jar")" \
  -Dlockagent.examples="$(realpath "$build/examples")" \
  -Dlockagent.readme="$(realpath "$build/readme")" \
  -Dtest="${JAVA_TEST:-.*}" \
  io.lockagent.TestRunner \
  io.lockagent.ValuesTest io.lockagent.ArgumentsTest io.lockagent.ClientTest io.lockagent.KindsTest \
  io.lockagent.ElectionTest io.lockagent.LossTest io.lockagent.ExampleTest io.lockagent.RedissonContractTest
