#!/usr/bin/env bash
# Tests scripts/conformance.sh itself, so that it cannot pass vacuously.
#
#   RUVIO_BIN=/abs/path/to/ruvio bash conformance/selftest.sh
#
# 1. Fake launchers (a few lines of Python, no client): one that passes every case must make the script exit 0;
#    one that fails a case, one that leaves a case out, one that reports a case the corpus does not have, and one
#    that exits non-zero must each make it exit non-zero and show why.
# 2. The real Rust runner fed a copy of the corpus with deliberately wrong expectations (a scenario step, a wire
#    vector, a guard step): the script must exit non-zero and show FAIL for exactly those cases, pass for the rest.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
[ -n "${RUVIO_BIN:-}" ] || { echo "conformance/selftest.sh: RUVIO_BIN is not set" >&2; exit 2; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/ruvio-conformance-selftest.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
failures=0
check() { # name, expected exit (0 or nonzero), grep pattern that must appear in the output
  local name="$1" want="$2" pattern="$3" rc=0
  shift 3
  env "$@" bash scripts/conformance.sh >"$WORK/$name.out" 2>&1 || rc=$?
  if { [ "$want" = 0 ] && [ "$rc" != 0 ]; } || { [ "$want" != 0 ] && [ "$rc" = 0 ]; }; then
    echo "selftest FAIL: $name: scripts/conformance.sh exited $rc (expected ${want/nonzero/non-zero})"
    tail -n 30 "$WORK/$name.out"
    failures=$((failures + 1))
  elif ! grep -qE -- "$pattern" "$WORK/$name.out"; then
    echo "selftest FAIL: $name: the output does not show /$pattern/"
    tail -n 30 "$WORK/$name.out"
    failures=$((failures + 1))
  else
    echo "selftest ok: $name (exit $rc)"
  fi
}

# ---- 1. fake launchers ----
mkdir -p "$WORK/fake"
cat >"$WORK/fake/fake.sh" <<'EOF'
#!/usr/bin/env bash
set -euo pipefail
[ "${FAKE_MODE}" = crash ] && { echo "fake runner: broken on purpose" >&2; exit 3; }
python3 - <<'PY'
import glob, json, os
d, mode = os.environ["CONFORMANCE_DIR"], os.environ["FAKE_MODE"]
ids = []
for sub in ("wire", "scenarios", "guard"):
    for p in sorted(glob.glob(os.path.join(d, sub, "*.json"))):
        for c in json.load(open(p))["cases"]:
            ids += [f'{c["id"]}@resp{x}' for x in c.get("protocols", ["2"])] if sub == "scenarios" else [c["id"]]
with open(os.environ["CONFORMANCE_RESULTS"], "w") as out:
    for i, case in enumerate(ids):
        if mode == "missing" and i == 3:
            continue
        result = "fail" if mode == "fail" and i == 5 else "pass"
        out.write(json.dumps({"case": case, "result": result, "detail": "wrong on purpose" if result == "fail" else ""}) + "\n")
    if mode == "unknown":
        out.write(json.dumps({"case": "scenario/no/such-case@resp2", "result": "pass"}) + "\n")
PY
EOF
check fake-all-pass 0 'fake: [0-9]+ pass, 0 FAIL, 0 missing' CONFORMANCE_RUNNERS="$WORK/fake" FAKE_MODE=pass
check fake-one-fail nonzero 'FAIL +$|wrong on purpose' CONFORMANCE_RUNNERS="$WORK/fake" FAKE_MODE=fail
check fake-one-missing nonzero ' missing *$' CONFORMANCE_RUNNERS="$WORK/fake" FAKE_MODE=missing
check fake-unknown-case nonzero "reported 'scenario/no/such-case@resp2'" CONFORMANCE_RUNNERS="$WORK/fake" FAKE_MODE=unknown
check fake-launcher-crash nonzero 'launcher failed' CONFORMANCE_RUNNERS="$WORK/fake" FAKE_MODE=crash

# ---- 2. the Rust runner on a corpus copy with wrong expectations ----
cp -r "$REPO/conformance" "$WORK/corpus"
python3 - "$WORK/corpus" <<'PY'
import json, sys
d = sys.argv[1]
def edit(path, case_id, fn):
    data = json.load(open(path))
    case = next(c for c in data["cases"] if c["id"] == case_id)
    fn(case)
    json.dump(data, open(path, "w"), indent=1)
# RELEASE twice answers 1 then 0: claim 1 twice.
edit(f"{d}/scenarios/release.json", "scenario/release/twice", lambda c: c["steps"][2]["expect"].update(value="1"))
# A null bulk string is nil: claim an empty bulk string.
edit(f"{d}/wire/decode.json", "wire/resp2/nil-bulk", lambda c: c.update(expect={"type": "bulk", "value": ""}))
# A broken lock's guard release answers 0: claim 1.
edit(f"{d}/guard/guard.json", "guard/broken-lock-reported", lambda c: [s for s in c["steps"] if s["do"] == "release"][0]["expect"].update(value="1"))
PY
check rust-wrong-corpus nonzero 'rust: [0-9]+ pass, 4 FAIL, 0 missing' CONFORMANCE_DIR="$WORK/corpus" CONFORMANCE_ONLY=rust
for row in 'scenario/release/twice@resp2 +FAIL' 'scenario/release/twice@resp3 +FAIL' 'wire/resp2/nil-bulk +FAIL' \
  'guard/broken-lock-reported +FAIL' 'scenario/release/stale-worker@resp2 +pass'; do
  if ! grep -qE "^$row" "$WORK/rust-wrong-corpus.out"; then
    echo "selftest FAIL: rust-wrong-corpus: no row /$row/"
    failures=$((failures + 1))
  fi
done

if [ "$failures" != 0 ]; then
  echo "conformance selftest: $failures check(s) failed"
  exit 1
fi
echo "conformance selftest: scripts/conformance.sh passes a clean run and fails every broken one"
