"""`python -m nsight_tui ARGS` as a real process, without paying Python's start and the command's
imports (pandas, numpy, the MCP SDK: ~0.5-1 s of CPU) each time: for the tests of how the process
ends (its exit status, its stdout and stderr on file descriptors, no traceback or interpreter
warning) and for the MCP tests' servers.

A process per test worker imports the command line and what its commands import, once, then waits
on a Unix socket (the "zygote"). A request (one connection) hands it the arguments, the working
folder, the environment and three file descriptors (stdin, stdout, stderr) with SCM_RIGHTS; it
forks a go-between, which forks the command: the command sets the descriptors up as a started
interpreter would have them and runs `nsight_tui.cli.main`, exiting as `python -m nsight_tui`
exits (non-daemon threads joined, atexit functions, flushed streams). The go-between sends back the
command's pid, then its wait status.

`run` is `subprocess.run` over it; `launcher_argv` is a command line (a bare `python -S`, a few ms)
that runs the command with its own stdin/stdout/stderr and ends as it ends, for a client that
starts the process itself (the MCP SDK's stdio_client). Both fall back to a real interpreter where
the child would not be the same as a started one: an environment that changes what Python or the
libraries read when they are imported (PYTHON*, thread counts), or no fork/SCM_RIGHTS."""
from __future__ import annotations

import atexit
import os
import pickle
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# read when a library is imported (the zygote imported them with its own environment)
_IMPORT_TIME_ENV = ("PYTHON", "OMP_", "OPENBLAS", "MKL_", "NUMEXPR", "NUMPY", "ARROW", "PANDAS", "LD_", "MALLOC")
_PRELOAD = ("nsight_tui.cli", "nsight_tui.cli.stats", "nsight_tui.cli.report", "nsight_tui.cli.ranks",
            "nsight_tui.cli.diff", "nsight_tui.cli.whatif", "nsight_tui.cli.ncu", "nsight_tui.cli.cache")
_PRELOAD_IF_PRESENT = ("nsight_tui.cli.mcp", "nsight_tui.mcp.server")  # the mcp extra may be absent
_lock = threading.Lock()
_zygote: tuple[subprocess.Popen, str] | None = None

# The launcher: connects, hands over its own stdin/stdout/stderr, passes SIGTERM/SIGINT/SIGHUP on to
# the command and ends as it ended (its exit status, or the signal that ended it).
_LAUNCH = r"""
import os, pickle, signal, socket, struct, sys
path, cwd = sys.argv[1], os.getcwd()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
payload = pickle.dumps((sys.argv[2:], cwd, dict(os.environ)))
socket.send_fds(s, [struct.pack("!I", len(payload)) + payload], [0, 1, 2])
def recv4():
    b = b""
    while len(b) < 4:
        more = s.recv(4 - len(b))
        if not more:
            os._exit(70)
        b += more
    return struct.unpack("!i", b)[0]
pid = recv4()
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, lambda n, f: os.kill(pid, n))
code = os.waitstatus_to_exitcode(recv4())
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
os._exit(code)
"""


def run(args, *, capture_output: bool = True, text: bool = False, check: bool = False, cwd=None, env=None,
        input=None, stdin=None, timeout: float | None = None, preexec_fn=None) -> subprocess.CompletedProcess:
    """`subprocess.run([sys.executable, "-m", "nsight_tui", *args], capture_output=True, ...)`, its
    arguments and answer. `stdin` None or subprocess.DEVNULL are both /dev/null (no test here reads
    a terminal); `input` is fed to it instead."""
    argv = [str(a) for a in args]
    environment = dict(os.environ if env is None else env)
    if not capture_output or preexec_fn or stdin not in (None, subprocess.DEVNULL) or not _same_imports(environment):
        return subprocess.run([sys.executable, "-m", "nsight_tui", *argv], capture_output=capture_output, text=text,
                              check=check, cwd=cwd, env=env, input=input, stdin=stdin, timeout=timeout,
                              preexec_fn=preexec_fn)
    done = _ask(_started(), argv, str(Path(cwd or os.getcwd()).resolve()), environment, input, timeout, text)
    if check:
        done.check_returncode()
    return done


def launcher_argv(args, env: dict | None = None) -> list[str]:
    """The command line that runs `python -m nsight_tui ARGS` through the zygote (the real one where
    `env` changes what is read at import)."""
    argv = [str(a) for a in args]
    if not _same_imports(dict(os.environ if env is None else env)):
        return [sys.executable, "-m", "nsight_tui", *argv]
    return [sys.executable, "-S", "-c", _LAUNCH, _started(), *argv]


def _same_imports(environment: dict) -> bool:
    keys = {k for k in (*os.environ, *environment) if k.startswith(_IMPORT_TIME_ENV)}
    return all(os.environ.get(k) == environment.get(k) for k in keys) and hasattr(socket, "send_fds")


def _started() -> str:
    """The zygote's socket path (started on first use, stopped when this process exits)."""
    global _zygote
    with _lock:
        if _zygote is None or _zygote[0].poll() is not None:
            folder = tempfile.mkdtemp(prefix="nsight-tui-zygote-")
            path = os.path.join(folder, "s")
            code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import cli_process; cli_process.serve({path!r})"
            proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            if proc.stdout.readline() != b"listening\n":  # type: ignore[union-attr]  # once its imports are done
                raise RuntimeError(f"the CLI zygote ended with {proc.wait()} before it listened")
            _zygote = (proc, path)
            atexit.register(_stop, proc, folder)
        return _zygote[1]


def _stop(proc: subprocess.Popen, folder: str) -> None:
    import shutil

    proc.stdin.close()  # type: ignore[union-attr]  # the zygote ends on end of file
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    shutil.rmtree(folder, ignore_errors=True)


def _ask(path: str, argv, cwd, environment, input, timeout, text) -> subprocess.CompletedProcess:
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    answer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        answer.connect(path)
        payload = pickle.dumps((argv, cwd, environment))
        socket.send_fds(answer, [struct.pack("!I", len(payload)) + payload], [in_r, out_w, err_w])
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    data = input.encode() if isinstance(input, str) else (input or b"")
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    got = b""
    sel = selectors.DefaultSelector()
    for fd in (out_r, err_r):
        sel.register(fd, selectors.EVENT_READ)
    sel.register(answer, selectors.EVENT_READ)
    if data:
        sel.register(in_w, selectors.EVENT_WRITE)
    else:
        os.close(in_w)
    deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                _kill(answer, got)
                raise subprocess.TimeoutExpired([sys.executable, "-m", "nsight_tui", *argv], timeout or 0)
            for key, _ in sel.select(min(left, 60)):
                if key.fd == in_w:
                    try:
                        n = os.write(in_w, data[:65536])
                    except BrokenPipeError:
                        n = len(data)
                    data = data[n:]
                    if not data:
                        sel.unregister(in_w)
                        os.close(in_w)
                elif key.fileobj is answer:
                    more = answer.recv(64)
                    got += more
                    if not more:
                        sel.unregister(answer)
                else:
                    more = os.read(key.fd, 65536)
                    if more:
                        chunks[key.fd].append(more)
                    else:
                        sel.unregister(key.fd)
    finally:
        sel.close()
        for fd in (out_r, err_r):
            os.close(fd)
        if data:
            os.close(in_w)
        answer.close()
    if len(got) != 8:
        raise RuntimeError(f"the CLI zygote did not say how the command ended ({got!r})")
    returncode = os.waitstatus_to_exitcode(struct.unpack("!i", got[4:])[0])
    out, err = b"".join(chunks[out_r]), b"".join(chunks[err_r])
    if text:
        return subprocess.CompletedProcess(argv, returncode, out.decode(), err.decode())
    return subprocess.CompletedProcess(argv, returncode, out, err)


def _kill(answer: socket.socket, got: bytes) -> None:
    """The command of a request that ran out of time, killed (its pid read first if it has not come)."""
    answer.settimeout(10)
    try:
        while len(got) < 4:
            more = answer.recv(4 - len(got))
            if not more:
                return
            got += more
    except OSError:
        return
    try:
        os.kill(struct.unpack("!i", got[:4])[0], signal.SIGKILL)
    except ProcessLookupError:
        pass


# -- the zygote -------------------------------------------------------------------------------------
def serve(path: str) -> None:
    """Import the command line, then fork a go-between per connection until stdin closes."""
    import importlib

    for name in _PRELOAD:
        importlib.import_module(name)
    for name in _PRELOAD_IF_PRESENT:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    sys.stdout.write("listening\n")
    sys.stdout.flush()
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    sel.register(sys.stdin, selectors.EVENT_READ)
    while True:
        # the go-betweens are reaped here, not by the kernel: their CPU time, and their commands',
        # then counts in this process's children, and so in the test run's (`time`, rusage)
        _reap(block=False)
        for key, _ in sel.select(timeout=1.0):
            if key.fileobj is not listener:
                _reap(block=True)
                return  # the test process closed our stdin: it is done
            conn, _ = listener.accept()
            if os.fork() == 0:
                try:
                    listener.close()
                    _go_between(conn)
                finally:
                    os._exit(70)  # never back into the loop, whatever happened
            conn.close()


def _reap(block: bool) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _request(conn: socket.socket):
    msg, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 3)
    size = struct.unpack("!I", msg[:4])[0]
    while len(msg) < 4 + size:
        more = conn.recv(1 << 20)
        if not more:
            raise EOFError("the request ended early")
        msg += more
    return pickle.loads(msg[4:4 + size]), fds


def _go_between(conn: socket.socket) -> None:
    """The zygote's child: forks the command, says its pid, waits for it, says how it ended."""
    request, fds = _request(conn)
    pid = os.fork()
    if pid == 0:
        try:
            conn.close()
            _command(request, fds)
        finally:
            os._exit(70)
    for f in fds:
        os.close(f)
    try:
        conn.sendall(struct.pack("!i", pid))
    except OSError:  # the test gave up (its timeout kills the command)
        pass
    _, status = os.waitpid(pid, 0)
    try:
        conn.sendall(struct.pack("!i", status))
    except OSError:
        pass
    os._exit(0)


def _command(request, fds: list[int]) -> None:
    """Runs as `python -m nsight_tui ARGS` would, then exits the process."""
    import atexit as child_atexit
    import traceback

    argv, cwd, environment = request
    for target, f in enumerate(fds):
        os.dup2(f, target)
        os.close(f)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(environment)
    sys.argv = [str(Path(sys.modules["nsight_tui"].__file__).with_name("__main__.py")), *argv]
    sys.path[0] = cwd  # as `-m` puts the working folder first
    code: object = 0
    try:
        from nsight_tui.cli import main

        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # as the interpreter reports an uncaught exception
        traceback.print_exc()
        code = 1
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # non-daemon threads, as at exit
        child_atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        code = 120  # what the interpreter exits with when flushing stdout fails at exit
    os._exit(int(code) & 0xFF)
