"""What a command prints when it cannot run: a user error (eval_harness.errors) is its one
sentence, exit 2; any other exception is a bug and is said as one, never passed off as the
user's mistake: "internal error" with the exception's type, and its traceback in a file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from eval_harness.cli import build_parser, main
from eval_harness.errors import EXIT_ERROR, InvalidInput, UnknownName, UserError
from eval_harness.retrieval.weights import grid_from_range

INTERNAL = re.compile(r"^eval-harness: error: internal error \((?P<what>.+)\); the command could "
                      r"not run, no check failed; traceback: (?P<file>\S+); please report it\.$")


def raising(error: BaseException):
    """A parser with one more command, ``fail``, whose work raises ``error``."""
    def fail(args, settings):
        raise error

    def extend(sub) -> None:
        sub.add_parser("fail").set_defaults(func=fail, loads_own_settings=True)

    return build_parser(extend=extend)


@pytest.mark.parametrize("error", [
    UserError("the store at port 1 cannot be reached; start it."),
    InvalidInput("--n must be at least 1 query, got 0."),
    UnknownName("dataset 'nope' is not in the store; ingest it first."),
])
def test_a_user_error_is_its_one_sentence_and_exit_2(capsys, error):
    assert main(["fail"], parser=raising(error)) == EXIT_ERROR
    out, err = capsys.readouterr()
    assert out == "" and err == f"eval-harness: error: {error}\n"


@pytest.mark.parametrize("error, what", [
    (ValueError("weights and keyword_weights must be non-empty 1-D and equally long."),
     "ValueError: weights and keyword_weights must be non-empty 1-D and equally long."),
    (KeyError("judge1"), "KeyError: 'judge1'"),
    (LookupError("no chat provider is named 'x'"), "LookupError: no chat provider is named 'x'"),
])
def test_a_programming_error_is_not_passed_off_as_a_user_error(capsys, error, what):
    assert main(["fail"], parser=raising(error)) == EXIT_ERROR
    err = capsys.readouterr().err
    said = INTERNAL.match(err.rstrip("\n"))
    assert said is not None, err
    assert said["what"] == what
    traceback = Path(said["file"]).read_text(encoding="utf-8")
    assert traceback.startswith("Traceback (most recent call last):")
    assert "in fail\n" in traceback and traceback.rstrip().endswith(what)
    Path(said["file"]).unlink()


def test_the_config_file_given_and_missing_is_a_user_error(tmp_path, capsys):
    missing = tmp_path / "nope.yaml"
    assert main(["--config", str(missing), "report"]) == EXIT_ERROR
    assert capsys.readouterr().err == f"eval-harness: error: {missing}: config file not found.\n"


def test_a_bad_value_from_the_user_raises_a_user_error_that_is_a_value_error_too():
    with pytest.raises(InvalidInput, match=r"^the grid step must lie between 0\.01 and 1, "
                                           r"got 5\.0\.$") as raised:
        grid_from_range(0.0, 1.0, 5.0)  # calibrate --grid-step 5
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, UserError)
