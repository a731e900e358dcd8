#!/usr/bin/env bash
# The .NET client's test command: restore, build, every test project of the solution (the client's and the ASP.NET
# Core package's), then pack Ruvio.Client and check the package: README, XML docs, symbols (.snupkg), and a fresh
# project restoring it from a local folder feed runs the product post's C# snippets against a started server.
# Needs the .NET 10 SDK and RUVIO_BIN (a ruvio binary). It never skips: missing either is a failure (exit 1); the
# top-level scripts/test.sh decides whether the .NET parts run on a machine.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
fail() { echo "clients/dotnet/test.sh: FAIL: $*" >&2; exit 1; }
command -v dotnet >/dev/null || fail "dotnet is not on PATH (install the .NET 10 SDK)"
[ -n "${RUVIO_BIN:-}" ] || fail "RUVIO_BIN is not set (point it at the ruvio binary, e.g. target/release/ruvio)"
[ -x "$RUVIO_BIN" ] || fail "RUVIO_BIN=$RUVIO_BIN is not an executable file"
RUVIO_BIN="$(cd "$(dirname "$RUVIO_BIN")" && pwd)/$(basename "$RUVIO_BIN")"
export RUVIO_BIN DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1

work="$(mktemp -d "${TMPDIR:-/tmp}/ruvio-dotnet-test.XXXXXX")"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "== dotnet $(dotnet --version): restore, build"
dotnet restore Ruvio.slnx -v quiet
dotnet build Ruvio.slnx -c Release --no-restore -v quiet -nologo

echo "== dotnet test (every test project of Ruvio.slnx)"
set +e
dotnet test Ruvio.slnx -c Release --no-build --logger "console;verbosity=normal" >"$work/test.log" 2>&1
status=$?
set -e
# Test names with their result, and each failure's message (not the stack traces).
grep -vE '^\s+at |^--- End of' "$work/test.log" \
  | grep -E '^\s+(Passed|Failed|Skipped) |Error Message|^\s{3}\S|Total tests|Passed:|Failed:|Skipped:|Aborted|error' || true
[ "$status" -eq 0 ] || fail "dotnet test failed (exit $status; see above)"
if grep -qE "Failed: +[1-9]|Test Run Aborted" "$work/test.log"; then fail "dotnet test reported failures"; fi
grep -qE "Passed: +[1-9]" "$work/test.log" || fail "dotnet test reported no passed test"
if grep -E "Skipped: +[1-9]" "$work/test.log"; then fail "a test was skipped: tests here fail, they never skip"; fi

echo "== dotnet pack"
# The two packages by name: packing the whole solution made the ASP.NET Core sample (a web project, not packable)
# warn that it cannot be packed.
for project in src/Ruvio.Client src/Ruvio.AspNetCore.DistributedLock; do
  dotnet pack "$project" -c Release --no-build -o "$work/feed" -v quiet -nologo
done
nupkg="$(ls "$work"/feed/Ruvio.Client.[0-9]*.nupkg 2>/dev/null | grep -v '\.snupkg$' | head -1)"
[ -n "$nupkg" ] || fail "dotnet pack produced no Ruvio.Client.<version>.nupkg"
version="$(basename "$nupkg" .nupkg)"; version="${version#Ruvio.Client.}"
[ -f "$work/feed/Ruvio.Client.$version.snupkg" ] || fail "no symbols package Ruvio.Client.$version.snupkg"
listing="$(unzip -l "$nupkg")"
for f in README.md lib/net10.0/Ruvio.Client.dll lib/net10.0/Ruvio.Client.xml; do
  grep -q " $f\$" <<<"$listing" || fail "$nupkg lacks $f"
done
symbols="$(unzip -l "$work/feed/Ruvio.Client.$version.snupkg")"
grep -q "lib/net10.0/Ruvio.Client.pdb" <<<"$symbols" || fail "the .snupkg lacks lib/net10.0/Ruvio.Client.pdb"
echo "packed $(basename "$nupkg") (README, XML docs) and its .snupkg"
# The ASP.NET Core package (issue 32), packed the same way: its README, XML docs and symbols, and it
# depends on Ruvio.Client and the ASP.NET Core shared framework only.
aspnet="$work/feed/Ruvio.AspNetCore.DistributedLock.$version.nupkg"
[ -f "$aspnet" ] || fail "dotnet pack produced no Ruvio.AspNetCore.DistributedLock.$version.nupkg"
[ -f "$work/feed/Ruvio.AspNetCore.DistributedLock.$version.snupkg" ] || fail "no symbols package Ruvio.AspNetCore.DistributedLock.$version.snupkg"
listing="$(unzip -l "$aspnet")"
for f in README.md lib/net10.0/Ruvio.AspNetCore.DistributedLock.dll lib/net10.0/Ruvio.AspNetCore.DistributedLock.xml; do
  grep -q " $f\$" <<<"$listing" || fail "$aspnet lacks $f"
done
nuspec="$(unzip -p "$aspnet" Ruvio.AspNetCore.DistributedLock.nuspec)"
grep -q '<dependency id="Ruvio.Client" version="'"$version"'"' <<<"$nuspec" || fail "$aspnet does not depend on Ruvio.Client $version"
grep -q '<frameworkReference name="Microsoft.AspNetCore.App"' <<<"$nuspec" || fail "$aspnet lacks its Microsoft.AspNetCore.App framework reference"
[ "$(grep -c '<dependency ' <<<"$nuspec")" -eq 1 ] || fail "$aspnet depends on more than Ruvio.Client"
echo "packed $(basename "$aspnet") (README, XML docs, depends on Ruvio.Client and Microsoft.AspNetCore.App only) and its .snupkg"

echo "== a fresh project restores Ruvio.Client $version from a folder feed and runs the post's snippets"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
mkdir -p "$work/data" "$work/app"
"$RUVIO_BIN" --port "$port" --dir "$work/data" --loglevel warning >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 200); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'PING\r\n' >&3 && head -c5 <&3 | grep -q PONG) 2>/dev/null; then break; fi
  sleep 0.05
done
cat >"$work/app/NuGet.config" <<XML
<?xml version="1.0" encoding="utf-8"?>
<configuration>
  <packageSources>
    <add key="ruvio-local" value="$work/feed" />
  </packageSources>
</configuration>
XML
cat >"$work/app/SnippetApp.csproj" <<XML
<Project Sdk="Microsoft.NET.Sdk">
  <PropertyGroup>
    <OutputType>Exe</OutputType>
    <TargetFramework>net10.0</TargetFramework>
    <Nullable>enable</Nullable>
    <ImplicitUsings>enable</ImplicitUsings>
  </PropertyGroup>
  <ItemGroup>
    <PackageReference Include="Ruvio.Client" Version="$version" />
  </ItemGroup>
</Project>
XML
sed "s/@PORT@/$port/g" tests/pack/Program.cs >"$work/app/Program.cs"
# A private package folder: a Ruvio.Client of the same version cached by an earlier run must not stand in for this one.
(cd "$work/app" && NUGET_PACKAGES="$work/packages" dotnet run -c Release -v quiet) | tee "$work/app.log"
grep -q "snippets ok" "$work/app.log" || fail "the snippet app did not finish"
[ -f "$work/packages/ruvio.client/$version/ruvio.client.$version.nupkg" ] || fail "the app did not restore Ruvio.Client from the folder feed"

echo "clients/dotnet/test.sh: all passed"
