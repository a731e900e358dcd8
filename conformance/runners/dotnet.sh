#!/usr/bin/env bash
# Launcher of the .NET conformance runner (clients/dotnet/tests/Ruvio.Conformance); see conformance/README.md,
# section 7. Run from the repository root with CONFORMANCE_DIR, RUVIO_ADDR, RUVIO_BIN and CONFORMANCE_RESULTS set.
# Builds the runner (restoring from the machine's configured NuGet feed), then runs it.
set -euo pipefail
: "${CONFORMANCE_DIR:?}" "${RUVIO_ADDR:?}" "${RUVIO_BIN:?}" "${CONFORMANCE_RESULTS:?}"
command -v dotnet >/dev/null || { echo "conformance/runners/dotnet.sh: no dotnet on PATH (the .NET 10 SDK is needed)" >&2; exit 1; }
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1
proj=clients/dotnet/tests/Ruvio.Conformance/Ruvio.Conformance.csproj
dotnet build "$proj" -c Release -v quiet -nologo >&2
exec dotnet "clients/dotnet/tests/Ruvio.Conformance/bin/Release/net10.0/Ruvio.Conformance.dll"
