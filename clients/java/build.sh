#!/usr/bin/env bash
# Builds the Java client's jar, build/lockagent.jar, with the JDK alone (javac
# and jar, Java 17+): no Go, no redis-server, no Maven, no tests. test.sh
# builds it this way too, then runs the tests against a real agent.
# pom.xml gives the same jar Maven coordinates (see README.md).
set -euo pipefail
cd "$(dirname "$0")"
version=$(sed -n 's|^  <version>\(.*\)</version>$|\1|p' pom.xml)
rm -rf build/classes
mkdir -p build/classes
javac --release 17 -Xlint:all,-serial -Werror -d build/classes $(find src/main/java -name '*.java')
printf 'Implementation-Title: lockagent\nImplementation-Version: %s\nAutomatic-Module-Name: io.lockagent\n' "$version" >build/MANIFEST.MF
jar --create --file build/lockagent.jar --manifest build/MANIFEST.MF -C build/classes .
echo "clients/java/build/lockagent.jar (io.lockagent:lockagent:$version)"
