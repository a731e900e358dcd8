"""Real server processes for the tests: ruvio (from $RUVIO_BIN), redis-server and redis-sentinel."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import List, Optional


_DIRS: List[str] = []


def _tempdir(prefix: str) -> str:
    d = tempfile.mkdtemp(prefix=prefix)
    _DIRS.append(d)
    return d


@atexit.register
def _remove_tempdirs() -> None:
    for d in _DIRS:
        shutil.rmtree(d, ignore_errors=True)


def ruvio_bin() -> str:
    path = os.environ.get("RUVIO_BIN")
    if not path:
        raise RuntimeError("RUVIO_BIN is not set: point it at the ruvio binary (e.g. target/release/ruvio)")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise RuntimeError(f"RUVIO_BIN={path!r} is not an executable file")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ping(port: int, timeout: float = 0.5, password: Optional[str] = None, tls: bool = False) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.settimeout(timeout)
            if password:
                s.sendall(b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n" % (len(password), password.encode()))
                if not s.recv(100).startswith(b"+OK"):
                    return False
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(100).startswith(b"+PONG")
    except OSError:
        return False


class Server:
    """A server process on 127.0.0.1:port with its own data folder; restartable on the same port and folder."""

    def __init__(self, argv: List[str], port: int, workdir: str, password: Optional[str] = None,
                 ready_port: Optional[int] = None) -> None:
        self.argv = argv
        self.port = port
        self.dir = workdir
        self.password = password
        self.ready_port = ready_port if ready_port is not None else port
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.log_path = os.path.join(workdir, "server.log")

    def start(self) -> "Server":
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.argv[0]} exited with {self.proc.returncode}: {self.log()}")
            if self.ready_port != self.port or ping(self.port, password=self.password):
                if self.ready_port == self.port or _port_open(self.ready_port):
                    return self
            time.sleep(0.05)
        raise RuntimeError(f"{self.argv[0]} did not answer on {self.port} within 20 s: {self.log()}")

    def log(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-2000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self) -> None:
        p, self.proc = self.proc, None
        if p is None:
            return
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGCONT)
                p.terminate()
                p.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                p.kill()
        p.wait(timeout=20)

    def kill9(self) -> None:
        p, self.proc = self.proc, None
        if p is not None:
            p.kill()
            p.wait(timeout=20)

    def restart(self) -> None:
        self.stop()
        self.start()

    def sigstop(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        # The signal is delivered asynchronously: wait until every thread is really stopped.
        deadline = time.monotonic() + 10
        task_dir = f"/proc/{self.proc.pid}/task"
        while time.monotonic() < deadline:
            states = []
            for tid in os.listdir(task_dir):
                try:
                    with open(f"{task_dir}/{tid}/stat") as f:
                        states.append(f.read().rsplit(")", 1)[1].split()[0])
                except OSError:
                    pass
            if states and all(st in ("T", "t") for st in states):
                return
            time.sleep(0.005)
        raise RuntimeError("the server did not stop after SIGSTOP")

    def sigcont(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def start_ruvio(*extra: str, port: Optional[int] = None, password: Optional[str] = None) -> Server:
    port = port or free_port()
    d = _tempdir("ruvio-py-test-")
    args = [ruvio_bin(), "--port", str(port), "--dir", os.path.join(d, "data"), "--loglevel", "warning", "--appendfsync", "always",
            *extra]
    if password:
        args += ["--requirepass", password]
    return Server(args, port, d, password=password).start()


def start_redis(*extra: str, port: Optional[int] = None) -> Server:
    exe = shutil.which("redis-server")
    if exe is None:
        raise RuntimeError("redis-server is not installed (test.sh installs it when run as root)")
    port = port if port is not None else free_port()
    d = _tempdir("ruvio-py-redis-")
    args = [exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--save", "", "--appendonly", "no",
            "--loglevel", "warning", *extra]
    return Server(args, port, d).start()


def start_sentinel(primary_port: int, service: str, *, down_after_ms: int = 1000) -> Server:
    exe = shutil.which("redis-sentinel")
    if exe is None:
        raise RuntimeError("redis-sentinel is not installed (test.sh installs it when run as root)")
    port = free_port()
    d = _tempdir("ruvio-py-sentinel-")
    conf = os.path.join(d, "sentinel.conf")
    with open(conf, "w") as f:
        f.write(f"port {port}\nbind 127.0.0.1\ndir {d}\n"
                f"sentinel monitor {service} 127.0.0.1 {primary_port} 1\n"
                f"sentinel down-after-milliseconds {service} {down_after_ms}\n"
                f"sentinel failover-timeout {service} 10000\n"
                f"sentinel parallel-syncs {service} 1\n")
    return Server([exe, conf], port, d).start()
