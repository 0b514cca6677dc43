"""`python -m nsight_tui ARGS` as a real process, without paying Python's start and the command's
imports (~0.5 s of CPU) each time: for the tests of how the process ends (its exit status, its
stdout and stderr as bytes on file descriptors, no traceback or interpreter warning).

A process per test worker imports the command line and what its commands import, once, then waits
(the "zygote"). Each `run` hands it the arguments, the working folder, the environment and three
file descriptors (stdin, stdout, stderr: pipes of this process) over a Unix socket; it forks, and
the forked child sets them up as a started interpreter would have them and runs
`nsight_tui.cli.main`, exiting as `python -m nsight_tui` exits (atexit functions, non-daemon
threads, flushed streams). Its pid and its wait status come back over a socket of its own.

Falls back to a real `subprocess.run` where the child would not be the same as a started one:
an environment that changes what Python or the libraries read when they are imported (PYTHON*,
thread-count variables), or a platform without fork and SCM_RIGHTS."""
from __future__ import annotations

import atexit
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
# read when a library is imported (the zygote imported them with its own environment)
_IMPORT_TIME_ENV = ("PYTHON", "OMP_", "OPENBLAS", "MKL_", "NUMEXPR", "NUMPY", "ARROW", "PANDAS", "LD_", "MALLOC")
_PRELOAD = ("nsight_tui.cli", "nsight_tui.cli.stats", "nsight_tui.cli.report", "nsight_tui.cli.ranks",
            "nsight_tui.cli.diff", "nsight_tui.cli.whatif", "nsight_tui.cli.ncu", "nsight_tui.cli.cache")
_lock = threading.Lock()
_zygote: tuple[subprocess.Popen, socket.socket] | None = None


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


def _same_imports(environment: dict) -> bool:
    keys = {k for k in (*os.environ, *environment) if k.startswith(_IMPORT_TIME_ENV)}
    return all(os.environ.get(k) == environment.get(k) for k in keys) and hasattr(socket, "send_fds")


def _started() -> socket.socket:
    global _zygote
    with _lock:
        if _zygote is None or _zygote[0].poll() is not None:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import cli_process; cli_process.serve({theirs.fileno()})"
            proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=(theirs.fileno(),),
                                    stdin=subprocess.DEVNULL)
            theirs.close()
            _zygote = (proc, ours)
            atexit.register(_stop, proc, ours)
        return _zygote[1]


def _stop(proc: subprocess.Popen, sock: socket.socket) -> None:
    sock.close()  # the zygote ends on end of file
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def _send(sock: socket.socket, payload: bytes, fds: list[int]) -> None:
    socket.send_fds(sock, [struct.pack("!I", len(payload)) + payload], fds)


def _ask(zygote: socket.socket, argv, cwd, environment, input, timeout, text) -> subprocess.CompletedProcess:
    import pickle

    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    answer, answer_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with _lock:
            _send(zygote, pickle.dumps((argv, cwd, environment)), [in_r, out_w, err_w, answer_theirs.fileno()])
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
        answer_theirs.close()
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
    import time

    deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
    pid = None
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                if pid is None and len(got) >= 4:
                    pid = struct.unpack("!i", got[:4])[0]
                if pid:
                    os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired([sys.executable, "-m", "nsight_tui", *argv], timeout)
            for key, _ in sel.select(min(left, 60)):
                fd = key.fd
                if fd == in_w:
                    try:
                        n = os.write(in_w, data[:65536])
                    except BrokenPipeError:
                        n = len(data)
                    data = data[n:]
                    if not data:
                        sel.unregister(in_w)
                        os.close(in_w)
                    continue
                if key.fileobj is answer:
                    more = answer.recv(64)
                    got += more
                    if not more:
                        sel.unregister(answer)
                    continue
                more = os.read(fd, 65536)
                if more:
                    chunks[fd].append(more)
                else:
                    sel.unregister(fd)
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


# -- the zygote -------------------------------------------------------------------------------------
def serve(fd: int) -> None:
    """Import the command line, then fork a child per request until the socket closes."""
    import importlib
    import pickle

    for name in _PRELOAD:
        importlib.import_module(name)
    sock = socket.socket(fileno=fd)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the go-betweens are reaped by the kernel
    buffer = b""
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 4)
        except OSError:
            return
        if not msg and not fds:
            return
        buffer += msg
        size = struct.unpack("!I", buffer[:4])[0]
        while len(buffer) < 4 + size:
            more = sock.recv(1 << 20)
            if not more:
                return
            buffer += more
        request, buffer = pickle.loads(buffer[4:4 + size]), buffer[4 + size:]
        if os.fork() == 0:
            try:
                sock.close()
                _go_between(request, fds)
            finally:
                os._exit(70)  # never back into the loop, whatever happened
        for f in fds:
            os.close(f)


def _go_between(request, fds: list[int]) -> None:
    """The zygote's child: forks the command, says its pid, waits for it, says how it ended."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    answer = socket.socket(fileno=fds[3])
    pid = os.fork()
    if pid == 0:
        try:
            answer.close()
            _command(request, fds[:3])
        finally:
            os._exit(70)
    for f in fds[:3]:
        os.close(f)
    try:
        answer.sendall(struct.pack("!i", pid))
    except OSError:  # the test gave up (its timeout killed the command)
        pass
    _, status = os.waitpid(pid, 0)
    try:
        answer.sendall(struct.pack("!i", status))
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
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(environment)
    main_file = str(Path(sys.modules["nsight_tui"].__file__).with_name("__main__.py"))
    sys.argv = [main_file, *argv]
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
