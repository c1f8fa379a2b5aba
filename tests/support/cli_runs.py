"""Running ``eval-harness`` in the test's own process, as its console entry point does."""

from __future__ import annotations


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """``eval-harness ARGV...`` (each argument as text): its exit code, stdout and stderr."""
    from eval_harness_pipelines import cli

    code = cli.main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err
