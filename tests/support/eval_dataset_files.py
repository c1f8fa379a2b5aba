"""RAGAS and DeepEval dataset files, written from their documented schemas the way the
libraries write them (neither library is a test dependency: ragas 0.4.3 pins openai<2,
which the harness cannot take, and fails to import next to the current langchain-community;
deepeval 4.3.1 brings pytest plugins that would load into every test run). The shapes below
were checked against files written by ragas 0.4.3 and deepeval 4.3.1 themselves:

- RAGAS ``EvaluationDataset.to_jsonl``: one ``json.dumps(sample, ensure_ascii=False)`` line
  per ``SingleTurnSample``, fields that are None left out; ``to_csv``: pandas' ``to_csv``
  of the same rows, lists written as Python lists (``['a', 'b']``);
- DeepEval ``EvaluationDataset.save_as(file_type, include_test_cases=True)``: ``json`` an
  indented array of every golden field (None as null, ``retrieval_context`` a list);
  ``csv`` and ``jsonl`` the same fields with lists joined by ``|``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd

DEEPEVAL_FIELDS = ("input", "actual_output", "expected_output", "retrieval_context", "context",
                   "name", "comments", "source_file", "tools_called", "expected_tools",
                   "token_cost", "input_token_count", "output_token_count",
                   "additional_metadata", "custom_column_key_values", "expectations")


def ragas_sample(user_input, response, contexts, **more) -> dict:
    """A SingleTurnSample as ``to_list`` gives it (None fields left out)."""
    sample = {"user_input": user_input, "retrieved_contexts": contexts, **more,
              "response": response}
    return {key: value for key, value in sample.items() if value is not None}


def write_ragas_jsonl(path: Path, samples) -> Path:
    path.write_text("".join(json.dumps(s, ensure_ascii=False) + "\n" for s in samples),
                    encoding="utf-8")
    return path


def write_ragas_csv(path: Path, samples) -> Path:
    pd.DataFrame(samples).to_csv(path, index=False)
    return path


def deepeval_case(input, actual_output, retrieval_context, **more) -> dict:
    case = dict.fromkeys(DEEPEVAL_FIELDS)
    case.update(input=input, actual_output=actual_output, retrieval_context=retrieval_context,
                **more)
    return case


def write_deepeval_json(path: Path, cases) -> Path:
    path.write_text(json.dumps(cases, indent=4, ensure_ascii=False), encoding="utf-8")
    return path


def _joined(case: dict) -> dict:
    return {key: "|".join(value) if isinstance(value, list) else value
            for key, value in case.items()}


def write_deepeval_csv(path: Path, cases) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(DEEPEVAL_FIELDS)
        for case in cases:
            joined = _joined(case)
            writer.writerow(["" if joined[k] is None else joined[k] for k in DEEPEVAL_FIELDS])
    return path


def write_deepeval_jsonl(path: Path, cases) -> Path:
    path.write_text("".join(json.dumps(_joined(c), ensure_ascii=False) + "\n" for c in cases),
                    encoding="utf-8")
    return path
