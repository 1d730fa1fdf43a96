# trainguard's preload server (supervise/src/preload/mod.rs holds the
# protocol's description and the client). Run as `python -c <this text> FD
# MODULE...`: FD is a Unix stream socket to the client. It imports the
# modules once, says so, then forks one trial per request; a trial runs its
# program as `__main__` as a fresh `python` would, and never returns here.
import os
import sys


def send(sock, obj):
    sock.sendall((json.dumps(obj) + "\n").encode())


def fresh_signals():
    """What a fresh python has (before any import could install handlers)."""
    out = {}
    for s in signal.valid_signals():
        try:
            h = signal.getsignal(s)
        except (ValueError, OSError):
            continue
        if h in (signal.SIG_DFL, signal.SIG_IGN, signal.default_int_handler):
            out[s] = h
    return out


def imports(modules):
    """Imports each module; None, or why not (the last line of the error)."""
    for m in modules:
        try:
            importlib.import_module(m)
        except BaseException as e:  # noqa: BLE001 - reported to the client
            return f"cannot import {m}: {type(e).__name__}: {e}"
    t = sys.modules.get("torch")
    cuda = getattr(t, "cuda", None)
    if cuda is not None and cuda.is_initialized():
        return "importing the modules initialised CUDA: a forked trial could not use the GPU"
    return None


def main():
    sock = socket.socket(fileno=int(sys.argv[1]))
    modules = sys.argv[2:]
    signals = fresh_signals()
    server_pythonpath = pythonpath(os.environ)
    if not hasattr(socket, "recv_fds"):
        why = f"python {sys.version.split()[0]} cannot preload: it needs 3.9 or later (socket.recv_fds)"
    else:
        why = imports(modules)
    if why is not None:
        send(sock, {"failed": why})
        return 1
    # The imports' weakref finalizers (torch: one per operator library, 25 ms
    # in all at exit) only undo registrations inside the process, which a
    # trial's os._exit discards anyway: its exit skips them.
    for info in getattr(weakref.finalize, "_registry", {}).values():
        info.atexit = False
    gc.collect()
    gc.freeze()  # the imported objects stay out of the trials' collections: pages stay shared
    send(sock, {"ready": {"pid": os.getpid(), "python": sys.version.split()[0]}})
    # A trial's end wakes the loop through SIGCHLD and a self-pipe (the
    # handler does nothing; Python writes the signal's number to the wakeup
    # descriptor): it works on every kernel the wheel promises (pidfd_open
    # needs Linux 5.3; RHEL 8 has 4.18), and a SIGCHLD that comes before
    # the poll leaves its byte in the pipe, so no end is missed.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    trials = {}  # pid -> request id
    buf = b""
    fds = []  # received with the requests' first bytes, two a request
    while True:
        ready = [fd for fd, _ in poller.poll()]
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        if sock.fileno() in ready:
            data, new, _, _ = socket.recv_fds(sock, 1 << 16, 64)
            fds.extend(new)
            if not data:
                return 0  # the client is gone: so is the server (trials have their keepers)
            buf += data
            while len(buf) >= 4 and len(buf) >= 4 + int.from_bytes(buf[:4], "big"):
                n = int.from_bytes(buf[:4], "big")
                req = json.loads(buf[4 : 4 + n])
                buf = buf[4 + n :]
                out, err = (fds.pop(0), fds.pop(0)) if len(fds) >= 2 else (None, None)
                if out is None:
                    send(sock, {"id": req["id"], "error": "the request came without its stdout and stderr"})
                    continue
                try:
                    # The child closes the server's other descriptors: the
                    # socket, the self-pipe, later requests' pipes (else their
                    # readers would wait for this trial's end too).
                    others = fds + [wake_r, wake_w]
                    pid = fork_trial(req, out, err, sock, signals, server_pythonpath, others)
                except OSError as e:
                    send(sock, {"id": req["id"], "error": f"fork: {e}"})
                    continue
                finally:
                    os.close(out)
                    os.close(err)
                trials[pid] = req["id"]
                send(sock, {"id": req["id"], "pid": pid})
        for pid, rid in list(trials.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                del trials[pid]
                send(sock, {"id": rid, "status": status})


def pythonpath(env):
    return [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]


def fork_trial(req, out, err, sock, signals, server_pythonpath, others):
    sys.stdout.flush()
    sys.stderr.flush()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid:
        # Its pid is told once it is a session and process group of its
        # own: a keeper's signal to the group -pid then reaches it.
        os.close(ready_w)
        os.read(ready_r, 1)
        os.close(ready_r)
        return pid
    code = 1
    try:
        os.close(ready_r)
        os.setsid()
        os.close(ready_w)
        keep = {out, err}
        os.close(sock.detach())
        for fd in others:
            os.close(fd)
        code = trial(req, out, err, signals, server_pythonpath, keep)
    except BaseException:  # noqa: BLE001 - a trial never returns into the server's loop
        try:
            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001
            pass
    os._exit(code)


def trial(req, out, err, signals, server_pythonpath, keep):
    """The forked child, a session of its own: becomes the trial, runs it,
    returns its exit code."""
    for s, h in signals.items():
        try:
            signal.signal(s, h)
        except (OSError, ValueError):
            pass
    signal.set_wakeup_fd(-1)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(req["oom_score_adj"])
    except OSError:
        pass
    env = req["env"]
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    for fd in keep | {null}:
        if fd > 2:
            os.close(fd)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(env)
    unbuffered = req["unbuffered"] or bool(env.get("PYTHONUNBUFFERED"))
    stdio(unbuffered, env)
    sys.dont_write_bytecode = req["no_bytecode"] or bool(env.get("PYTHONDONTWRITEBYTECODE"))
    if env.get("PYTHONFAULTHANDLER"):
        import faulthandler

        faulthandler.enable()
    threads(env)
    target = req["target"]
    # A script as python runs one, a directory or zip by its __main__.py.
    runs_main = not req["module"] and (os.path.isdir(target) or zipfile.is_zipfile(target))
    if req["module"]:
        path0 = os.getcwd()
    elif runs_main:
        path0 = target
    else:
        path0 = os.path.dirname(os.path.realpath(target))
    rest = [p for p in sys.path[1:] if p not in server_pythonpath]
    sys.path[:] = [path0] + pythonpath(env) + rest
    importlib.invalidate_caches()
    sys.argv = list(req["argv"])
    # The program's own __main__, kept until os._exit as python keeps it
    # (its objects' finalizers and atexit handlers see it).
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    try:
        if req["module"] or runs_main:
            # What python -m runs (its own message and exit 1 for a module
            # that is not there).
            runpy._run_module_as_main("__main__" if runs_main else target, alter_argv=not runs_main)
        else:
            try:
                with open(target, "rb") as f:
                    source = f.read()
            except OSError as e:
                path = os.path.abspath(target)
                print(f"{sys.executable}: can't open file {path!r}: [Errno {e.errno}] {e.strerror}", file=sys.stderr)
                return finish(2)
            main.__file__ = target
            main.__cached__ = None
            main.__loader__ = importlib.machinery.SourceFileLoader("__main__", target)
            exec(compile(source, target, "exec", dont_inherit=True), main.__dict__)
    except SystemExit as e:
        return finish(exit_code(e.code))
    except BaseException as e:  # noqa: BLE001 - as python prints an uncaught exception
        tb = e.__traceback__
        while tb is not None and any(tb.tb_frame.f_globals is g for g in (globals(), vars(runpy))):
            tb = tb.tb_next
        sys.excepthook(type(e), e.with_traceback(tb), tb)  # python prints e's own
        if isinstance(e, KeyboardInterrupt):
            # As python 3.8+: the parent sees the trial killed by SIGINT.
            flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        return finish(1)
    return finish(0)


def exit_code(code):
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def finish(code):
    """What python does at its end: waits for its threads, runs atexit, flushes."""
    try:
        threading._shutdown()
    except BaseException:  # noqa: BLE001
        pass
    try:
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass
    return code if flush() else 120


def flush():
    ok = True
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:  # noqa: BLE001
            ok = False
    return ok


def stdio(unbuffered, env):
    """sys.std* over fds 0-2 as a fresh python makes them: stdout
    block-buffered on a pipe (line-buffered on a terminal), stderr
    line-buffered, both write-through with -u."""
    enc, out_errors, err_errors = sys.__stdout__.encoding, sys.__stdout__.errors, "backslashreplace"
    io_enc = env.get("PYTHONIOENCODING")
    if io_enc:
        e, _, errs = io_enc.partition(":")
        enc = e or enc
        out_errors = errs or out_errors

    def writer(fd, errors, line):
        raw = io.FileIO(fd, "w", closefd=False)
        b = raw if unbuffered else io.BufferedWriter(raw)
        return io.TextIOWrapper(b, enc, errors, "\n", line_buffering=line, write_through=unbuffered)

    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), enc, out_errors)
    sys.stdout = sys.__stdout__ = writer(1, out_errors, os.isatty(1))
    sys.stderr = sys.__stderr__ = writer(2, err_errors, True)


def threads(env):
    """torch loaded its OpenMP runtime in the server, with the server's
    OMP_NUM_THREADS: the trial's own count is set by hand."""
    torch = sys.modules.get("torch")
    n = env.get("OMP_NUM_THREADS") or env.get("MKL_NUM_THREADS")
    if torch is None or not n:
        return
    try:
        n = int(n)
    except ValueError:
        return
    if n > 0:
        torch.set_num_threads(n)


if __name__ == "__main__":
    import atexit
    import builtins
    import gc
    import importlib
    import importlib.machinery
    import io
    import json
    import runpy
    import select
    import signal
    import socket
    import threading
    import traceback
    import types
    import weakref
    import zipfile

    sys.exit(main())
