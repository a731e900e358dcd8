"""The Python runner for Ruvio's cross-language conformance corpus (conformance/README.md).

    python tests/conformance_runner.py        (env: CONFORMANCE_DIR, RUVIO_ADDR, RUVIO_BIN, CONFORMANCE_RESULTS)

Wire vectors go through the client's own encoder and decoder (``ruvio._resp``; the decoder in its typed mode, which
keeps the RESP types its natural Python values fold together). Scenario steps marked ``typed`` go through the
client's typed lock methods (``lease``, ``renew``, ``release``, ``semaphore``, ``ifgt``, ``lock_info``), the others
through ``execute_command``; guard cases use the client's lock helper (``Ruvio.lock``). Exits 0 when it ran,
whatever the cases' results; non-zero when the runner itself broke.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import sys
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ruvio  # noqa: E402
from ruvio._resp import NEED_MORE, Parser, PushMessage, Typed, encode_command  # noqa: E402
from ruvio.exceptions import InvalidResponse, ResponseError  # noqa: E402
from servers import Server, start_ruvio  # noqa: E402

LANG = "python"
RUN_ID = secrets.token_hex(6)


class StepFailed(Exception):
    pass


# --- the value model ------------------------------------------------------------------------------------------
def _bytes_model(kind: str, data: bytes) -> Dict[str, Any]:
    try:
        return {"type": kind, "value": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"type": kind, "hex": data.hex()}


def typed_to_model(v: Typed) -> Dict[str, Any]:
    k = v.kind
    if k == "nil":
        return {"type": "nil"}
    if k == "simple":
        return {"type": "simple", "value": v.value}
    if k == "error":
        return {"type": "error", "text": v.value, "code": v.value.split(" ", 1)[0]}
    if k in ("integer", "bignumber"):
        return {"type": k, "value": str(v.value)}
    if k == "bulk":
        return _bytes_model("bulk", v.value)
    if k in ("array", "set", "push"):
        return {"type": k, "items": [typed_to_model(x) for x in v.value]}
    if k == "map":
        return {"type": "map", "entries": [[typed_to_model(a), typed_to_model(b)] for a, b in v.value]}
    if k == "double":
        return {"type": "double", "value": v.value}
    if k == "boolean":
        return {"type": "boolean", "value": v.value}
    if k == "verbatim":
        fmt, data = v.value
        m = _bytes_model("verbatim", data)
        m["format"] = fmt
        return m
    raise AssertionError(f"unknown typed kind {k}")


def natural_to_model(v: Any) -> Dict[str, Any]:
    """The client's natural reply values (execute_command) back to the model."""
    if isinstance(v, ResponseError):
        return {"type": "error", "text": str(v), "code": v.code}
    if v is None:
        return {"type": "nil"}
    if isinstance(v, bool):
        return {"type": "boolean", "value": v}
    if isinstance(v, int):
        return {"type": "integer", "value": str(v)}
    if isinstance(v, float):
        return {"type": "double", "value": v}
    if isinstance(v, str):
        return {"type": "simple", "value": v}
    if isinstance(v, (bytes, bytearray)):
        return _bytes_model("bulk", bytes(v))
    if isinstance(v, PushMessage):
        return {"type": "push", "items": [natural_to_model(x) for x in v]}
    if isinstance(v, list):
        return {"type": "array", "items": [natural_to_model(x) for x in v]}
    if isinstance(v, dict):
        return {"type": "map", "entries": [[natural_to_model(a), natural_to_model(b)] for a, b in v.items()]}
    if isinstance(v, (set, frozenset)):
        return {"type": "set", "items": [natural_to_model(x) for x in v]}
    if isinstance(v, tuple):
        return {"type": "array", "items": [natural_to_model(x) for x in v]}
    raise AssertionError(f"no model for {v!r}")


def model_equal(got: Any, want: Any) -> bool:
    if isinstance(want, dict) and isinstance(got, dict):
        if got.get("type") != want.get("type"):
            return False
        if want["type"] == "double":
            g = float(got["value"])
            w = want["value"]
            wf = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}.get(w, None) if isinstance(w, str) else None
            wf = float(w) if wf is None and w not in ("nan",) else wf
            if isinstance(wf, float) and math.isnan(wf):
                return math.isnan(g)
            return g == wf
        if want["type"] == "error":
            return got.get("text") == want.get("text") and ("code" not in want or got.get("code") == want["code"])
        keys = set(want) - {"description"}
        for k in keys:
            if k not in got:
                if k == "hex" and "value" in got:
                    if got["value"].encode("utf-8").hex() != want["hex"]:
                        return False
                    continue
                if k == "value" and "hex" in got:
                    return False
                return False
            if not model_equal(got[k], want[k]):
                return False
        return True
    if isinstance(want, list) and isinstance(got, list):
        return len(want) == len(got) and all(model_equal(g, w) for g, w in zip(got, want))
    return bool(got == want)


# --- wire vectors ---------------------------------------------------------------------------------------------
def run_decode(case: Dict[str, Any]) -> Optional[str]:
    p = Parser(typed=True)
    p.feed(bytes.fromhex(case["hex"]))
    try:
        v = p.get()
    except InvalidResponse as e:
        if case.get("invalid"):
            return None
        return f"decoder reported a protocol error: {e}"
    if case.get("invalid"):
        return f"expected a protocol error, decoded {v!r}"
    if case.get("incomplete"):
        return None if v is NEED_MORE else f"expected 'need more', decoded {v!r}"
    if v is NEED_MORE:
        return "decoder asked for more bytes"
    if p.has_data():
        return "decoder did not consume all bytes"
    got = typed_to_model(v)
    if not model_equal(got, case["expect"]):
        return f"decoded {json.dumps(got)}, expected {json.dumps(case['expect'])}"
    return None


def run_encode(case: Dict[str, Any]) -> Optional[str]:
    args = [bytes.fromhex(a["hex"]) if isinstance(a, dict) else a for a in case["args"]]
    got = encode_command(args)
    if got.hex() != case["hex"]:
        return f"encoded {got!r}, expected {bytes.fromhex(case['hex'])!r}"
    return None


# --- scenarios and guards -------------------------------------------------------------------------------------
class Run:
    def __init__(self, case_id: str, protocol: int, host: str, port: int, server: Optional[Server] = None,
                 guard: bool = False) -> None:
        # Guard cases run once (RESP2) and their prefix has no protocol suffix.
        self.prefix = f"cf:{RUN_ID}:{LANG}:{case_id}:" if guard else f"cf:{RUN_ID}:{LANG}:{case_id}@resp{protocol}:"
        self.protocol = protocol
        self.host, self.port = host, port
        self.server = server
        self.saved: Dict[str, str] = {}
        self.conns: Dict[str, ruvio.Ruvio] = {}
        self.pending: Dict[str, Tuple["Future[Tuple[Any, float]]", float]] = {}
        self.pool = ThreadPoolExecutor(max_workers=8)
        self.guards: Dict[str, Tuple[ruvio.HeldLock, float, int]] = {}
        self.guard_client: Optional[ruvio.Ruvio] = None

    def close(self) -> None:
        for held, _, _ in self.guards.values():
            held.stop_renewing()
        for c in self.conns.values():
            c.close()
        if self.guard_client is not None:
            self.guard_client.close()
        self.pool.shutdown(wait=False)

    def sub(self, s: str) -> str:
        s = s.replace("{p}", self.prefix)
        while "{tok:" in s:
            i = s.index("{tok:")
            j = s.index("}", i)
            s = s[:i] + self.saved[s[i + 5 : j]] + s[j + 1 :]
        return s

    def conn(self, name: str) -> ruvio.Ruvio:
        if name not in self.conns:
            self.conns[name] = ruvio.Ruvio(self.host, self.port, protocol=self.protocol, max_connections=1,
                                           command_timeout=60.0)
        return self.conns[name]

    # one command -> ("typed"/"raw", reply or LockInfo or error)
    def call(self, step: Dict[str, Any]) -> Any:
        args = [self.sub(a) for a in step["args"]]
        c = self.conn(step.get("conn", "a"))
        try:
            if step.get("typed"):
                return typed_call(c, args)
            return natural_to_model(c.execute_command(*args))
        except ResponseError as e:
            return {"type": "error", "text": str(e), "code": e.code}

    def check(self, got: Any, expect: Dict[str, Any]) -> Optional[str]:
        return match(got, expect, self.saved)

    def save(self, step: Dict[str, Any], got: Any) -> None:
        if "save" in step:
            if not (isinstance(got, dict) and got.get("type") == "integer"):
                raise StepFailed(f"cannot save {got!r}: not an integer")
            self.saved[step["save"]] = got["value"]

    def step(self, i: int, step: Dict[str, Any]) -> None:
        do = step["do"]
        if do == "command":
            if "async" in step:
                sent = time.monotonic()

                def work(s: Dict[str, Any] = step) -> Tuple[Any, float]:
                    try:
                        r = self.call(s)
                    except ruvio.ConnectionError as e:
                        # The server closed the connection (CLIENT KILL): the `dropped` matcher expects this.
                        r = {"type": "dropped", "conn": s.get("conn", "a"), "detail": str(e)}
                    return r, time.monotonic()

                self.pending[step["async"]] = (self.pool.submit(work), sent)
                return
            until = step.get("until_ms")
            deadline = time.monotonic() + int(until) / 1000.0 if until else 0.0
            while True:
                got = self.call(step)
                why = self.check(got, step["expect"])
                if why is None or not until or time.monotonic() > deadline:
                    break
                time.sleep(0.02)
            if why is not None:
                raise StepFailed(why)
            self.save(step, got)
        elif do == "await":
            fut, sent = self.pending.pop(step["id"])
            got, arrived = fut.result(timeout=30)
            if "min_elapsed_ms" in step and (arrived - sent) * 1000 < int(step["min_elapsed_ms"]):
                raise StepFailed(f"reply came after {(arrived - sent) * 1000:.0f} ms, before "
                                 f"{step['min_elapsed_ms']} ms")
            if isinstance(got, dict) and got.get("type") == "dropped":
                gone = self.conns.pop(got["conn"], None)  # that connection is gone: the runner drops it
                if gone is not None:
                    gone.close()
            why = self.check(got, step["expect"])
            if why is not None:
                raise StepFailed(why)
            self.save(step, got)
        elif do == "sleep":
            end = time.monotonic() + int(step["ms"]) / 1000.0
            while time.monotonic() < end:
                time.sleep(max(0.0, end - time.monotonic()))
        elif do == "close":
            c = self.conns.pop(step["conn"], None)
            if c is not None:
                c.close()
        elif do == "acquire":
            if self.guard_client is None:
                self.guard_client = ruvio.Ruvio(self.host, self.port, protocol=self.protocol)
            ttl = int(step["ttl_ms"])
            cap = int(step["max_hold_ms"]) if "max_hold_ms" in step else None
            sent = time.monotonic()
            held = self.guard_client.lock(self.sub(step["key"]), ttl, max_hold_ms=cap).acquire()
            if held is None:
                raise StepFailed("the lock helper did not acquire the lock")
            self.guards[step["guard"]] = (held, sent, ttl)
            if "save" in step:
                self.saved[step["save"]] = str(held.token)
        elif do == "expect_held":
            held, _, _ = self.guards[step["guard"]]
            if held.is_lost():
                raise StepFailed(f"the helper reported loss ({held.loss_reason})")
        elif do == "expect_lost":
            held, sent, ttl = self.guards[step["guard"]]
            if not held.wait_lost(int(step["within_ms"]) / 1000.0):
                raise StepFailed(f"no loss signal within {step['within_ms']} ms")
            if step.get("before_deadline"):
                assert held.lost_at is not None
                late = (held.lost_at - (sent + ttl / 1000.0)) * 1000
                if late >= 0:
                    raise StepFailed(f"loss signalled {late:.0f} ms after sent + ttl")
        elif do == "release":
            held, _, _ = self.guards[step["guard"]]
            try:
                ok = held.release()
            except Exception as e:  # the contract: release never raises
                raise StepFailed(f"release raised {e!r}") from None
            why = self.check({"type": "integer", "value": "1" if ok else "0"}, step["expect"])
            if why is not None:
                raise StepFailed(why)
        elif do == "sigstop":
            assert self.server is not None, "sigstop needs a case with its own server"
            self.server.sigstop()
        elif do == "sigcont":
            assert self.server is not None, "sigcont needs a case with its own server"
            self.server.sigcont()
        else:
            raise StepFailed(f"unknown step {do!r}")


def typed_call(c: ruvio.Ruvio, args: List[str]) -> Any:
    name = args[0].upper()
    a = args[1:]

    def opt(at: int, word: str) -> Optional[int]:
        if len(a) > at + 1 and a[at].upper() == word:
            return int(a[at + 1])
        return None

    result: Any
    if name == "LEASE":
        result = c.lease(a[0], int(a[1]), opt(2, "WAIT"))
    elif name == "SEMAPHORE":
        result = c.semaphore(a[0], int(a[1]), int(a[2]), opt(3, "WAIT"))
    elif name == "RENEW":
        result = c.renew(a[0], int(a[1]), int(a[2]))
    elif name == "RELEASE":
        result = c.release(a[0], int(a[1]))
    elif name == "IFGT":
        result = c.ifgt(a[0], int(a[1]), a[2], opt(3, "PX"))
    elif name == "LOCKINFO":
        result = c.lock_info(a[0])
    else:
        raise StepFailed(f"no typed method for {name}")
    if result is None:
        return {"type": "nil"}
    if isinstance(result, bool):
        return {"type": "integer", "value": "1" if result else "0"}
    if isinstance(result, int):
        return {"type": "integer", "value": str(result)}
    if isinstance(result, ruvio.LockInfo):
        return result
    raise StepFailed(f"unexpected typed result {result!r}")


def _int_of(got: Any) -> Optional[int]:
    if isinstance(got, dict) and got.get("type") == "integer":
        return int(got["value"])
    return None


def _text(m: Any) -> Optional[str]:
    if isinstance(m, dict) and m.get("type") in ("bulk", "simple", "verbatim") and "value" in m:
        return str(m["value"])
    return None


def _fields(m: Any) -> Optional[List[Tuple[Any, Any]]]:
    if isinstance(m, dict) and m.get("type") == "map":
        return [(a, b) for a, b in m["entries"]]
    if isinstance(m, dict) and m.get("type") == "array" and len(m["items"]) % 2 == 0:
        it = iter(m["items"])
        return list(zip(it, it))
    return None


def match_lockinfo(got: Any, e: Dict[str, Any], saved: Dict[str, str]) -> Optional[str]:
    if isinstance(got, ruvio.LockInfo):
        kind, limit, waiters = got.kind, got.limit, got.waiters
        holders = [(h.token, h.remaining_ms) for h in got.holders]
    else:
        f = _fields(got)
        if f is None:
            return f"not a LOCKINFO reply: {json.dumps(got)}"
        names = [_text(k) for k, _ in f]
        if names != ["kind", "limit", "holders", "waiters"]:
            return f"LOCKINFO fields {names}"
        kind = _text(f[0][1])  # type: ignore[assignment]
        limit, waiters = _int_of(f[1][1]), _int_of(f[3][1])  # type: ignore[assignment]
        holders = []
        hs = f[2][1]
        if not (isinstance(hs, dict) and hs.get("type") == "array"):
            return f"holders is not an array: {json.dumps(hs)}"
        for h in hs["items"]:
            hf = _fields(h)
            if hf is None or [_text(k) for k, _ in hf] != ["token", "remaining_ms"]:
                return f"holder shape {json.dumps(h)}"
            holders.append((_int_of(hf[0][1]), _int_of(hf[1][1])))
    if kind != e["kind"] or limit != int(e["limit"]) or waiters != int(e["waiters"]):
        return f"lockinfo kind={kind} limit={limit} waiters={waiters}, expected {e['kind']}/{e['limit']}/{e['waiters']}"
    if len(holders) != len(e["holders"]):
        return f"{len(holders)} holders, expected {len(e['holders'])}: {holders}"
    for (tok, rem), want in zip(holders, e["holders"]):
        if tok is None or tok != int(saved[want["token"]]):
            return f"holder token {tok}, expected {want['token']}={saved.get(want['token'])}"
        lo, hi = int(want.get("remaining_ms_min", "-9223372036854775808")), int(want.get("remaining_ms_max", "9223372036854775807"))
        if rem is None or not lo <= rem <= hi:
            return f"holder remaining_ms {rem} not in [{lo}, {hi}]"
    return None


def match(got: Any, e: Dict[str, Any], saved: Dict[str, str]) -> Optional[str]:
    m = e["match"]
    shown = got if isinstance(got, ruvio.LockInfo) else json.dumps(got)
    if m == "lockinfo":
        return match_lockinfo(got, e, saved)
    if isinstance(got, ruvio.LockInfo):
        return f"got a LockInfo, expected {m}"
    n = _int_of(got)
    ok: bool
    if m == "int":
        ok = n is not None and n == int(e["value"])
    elif m == "int_between":
        ok = n is not None and int(e["min"]) <= n <= int(e["max"])
    elif m == "nil":
        ok = got.get("type") == "nil"
    elif m == "token":
        ok = n is not None and n > 0
    elif m == "token_gt":
        ok = n is not None and n > int(saved[e["than"]])
    elif m == "token_eq":
        ok = n is not None and n == int(saved[e["name"]])
    elif m == "simple":
        ok = got.get("type") == "simple" and got.get("value") == e["value"]
    elif m == "bulk":
        ok = got.get("type") == "bulk" and got.get("value") == e["value"]
    elif m == "error":
        ok = got.get("type") == "error" and got.get("text") == e["text"]
    elif m == "value":
        ok = model_equal(got, e["value"])
    elif m == "any":
        ok = got.get("type") not in ("error", "dropped")
    elif m == "dropped":
        ok = got.get("type") == "dropped"
    else:
        return f"unknown matcher {m!r}"
    return None if ok else f"got {shown}, expected {json.dumps(e)}"


def run_case(case: Dict[str, Any], protocol: int, host: str, port: int, own: bool, guard: bool = False) -> Optional[str]:
    server = start_ruvio() if own else None
    run = Run(case["id"], protocol, "127.0.0.1" if server else host, server.port if server else port, server, guard)
    try:
        for i, step in enumerate(case["steps"]):
            try:
                run.step(i, step)
            except StepFailed as e:
                return f"step {i} ({step['do']}): {e}"
            except Exception as e:
                return f"step {i} ({step['do']}): {type(e).__name__}: {e}"
        return None
    finally:
        run.close()
        if server is not None:
            server.stop()


def main() -> int:
    corpus = Path(os.environ["CONFORMANCE_DIR"])
    results_path = os.environ["CONFORMANCE_RESULTS"]
    addr = os.environ.get("RUVIO_ADDR", "127.0.0.1:6379")
    host, _, port_s = addr.rpartition(":")
    port = int(port_s)
    lines: List[Dict[str, str]] = []

    def report(case_id: str, why: Optional[str]) -> None:
        lines.append({"case": case_id, "result": "pass" if why is None else "fail", "detail": why or ""})
        print(f"{'pass' if why is None else 'FAIL'} {case_id}{'' if why is None else ': ' + why}", flush=True)

    for path in sorted((corpus / "wire").glob("*.json")):
        doc = json.loads(path.read_text())
        fn: Callable[[Dict[str, Any]], Optional[str]] = run_decode if doc["format"] == "wire-decode" else run_encode
        for case in doc["cases"]:
            try:
                report(case["id"], fn(case))
            except Exception as e:
                report(case["id"], f"{type(e).__name__}: {e}")
    for path in sorted((corpus / "scenarios").glob("*.json")):
        for case in json.loads(path.read_text())["cases"]:
            for proto in case.get("protocols", ["2"]):
                report(f"{case['id']}@resp{proto}", run_case(case, int(proto), host, port, False))
    for path in sorted((corpus / "guard").glob("*.json")):
        for case in json.loads(path.read_text())["cases"]:
            report(case["id"], run_case(case, 2, host, port, case.get("server") == "own", guard=True))
    with open(results_path, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    failed = sum(1 for x in lines if x["result"] != "pass")
    print(f"python conformance runner: {len(lines)} cases, {failed} failed", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        sys.exit(2)
