#!/usr/bin/env bash
# Builds examples/Example.java in a fresh Maven project that depends on the installed io.ruvio:ruvio-client
# (run `mvn install` in clients/java first) and runs it against a fresh ruvio ($RUVIO_BIN) on a free port.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${RUVIO_BIN:?RUVIO_BIN must point at a ruvio binary}"
version="$(sed -n 's:.*<version>\(.*\)</version>.*:\1:p' "$here/../pom.xml" | head -1)"
work="$(mktemp -d)"
server_pid=""
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/app/src/main/java" "$work/data"
cp "$here/Example.java" "$work/app/src/main/java/"
cat > "$work/app/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId><artifactId>uses-ruvio</artifactId><version>1</version>
  <properties><maven.compiler.release>17</maven.compiler.release><project.build.sourceEncoding>UTF-8</project.build.sourceEncoding></properties>
  <dependencies>
    <dependency><groupId>io.ruvio</groupId><artifactId>ruvio-client</artifactId><version>$version</version></dependency>
  </dependencies>
  <build><plugins>
    <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-compiler-plugin</artifactId><version>3.13.0</version></plugin>
    <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-resources-plugin</artifactId><version>3.3.1</version></plugin>
    <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-dependency-plugin</artifactId><version>3.6.1</version></plugin>
  </plugins></build>
</project>
POM
(cd "$work/app" && mvn -B -q compile dependency:build-classpath -Dmdep.outputFile=cp.txt)
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$RUVIO_BIN" --port "$port" --dir "$work/data" >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 200); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.05
done
out="$(java -cp "$work/app/target/classes:$(cat "$work/app/cp.txt")" Example "$port")"
echo "$out"
grep -q "released true" <<<"$out"
grep -q "semaphore slot" <<<"$out"
grep -q "fenced write with token .*: true" <<<"$out"
echo "fresh project: the installed artifact compiles and runs the snippet"
