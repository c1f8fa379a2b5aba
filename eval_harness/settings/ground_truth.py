"""The ``ground_truth:`` section of ``config.yaml``: queries written for a dataset that has
none, from its documents (``eval-harness ground-truth generate``) or from its users' questions
(``ground-truth from-answers``); see :mod:`eval_harness.query_sources`."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import PlainValidator
from pydantic.dataclasses import dataclass as section

from eval_harness.settings.errors import problem
from eval_harness.settings.values import SECTION, Flag, NonNegative, OrEmpty, Share, budget_of

OFFLINE_GENERATOR = "local:offline"


def _generator_spec(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none",
                                                                              "null")):
        return None
    if not isinstance(value, str) or ":" not in value or value.split(":", 1)[1] == "":
        raise problem(f"must be provider:model (e.g. openai:gpt-4o-mini) or {OFFLINE_GENERATOR}"
                      f", got {value!r}.")
    provider = value.split(":", 1)[0]
    if provider == "local" and value != OFFLINE_GENERATOR:
        raise problem(f"the offline generator is {OFFLINE_GENERATOR}, got {value!r}.")
    return value.strip()


@section(frozen=True, config=SECTION)
class QueryKinds:
    """``ground_truth.kinds``: the share of each kind among generated queries (relative
    weights; 0 leaves a kind out)."""

    question: NonNegative = 0.6      # a plain question the document answers
    paraphrase: NonNegative = 0.3    # the same with little word overlap with the document
    unanswerable: NonNegative = 0.1  # a query no document answers (abstention, gates)

    def weights(self) -> dict[str, float]:
        return {"question": self.question, "paraphrase": self.paraphrase,
                "unanswerable": self.unanswerable}


@section(frozen=True, config=SECTION)
class GroundTruthSettings:
    # provider:model that writes generated queries; None: judges.judge1, or local:offline
    # when its API key is not set (the embedded default)
    generator: Annotated[str | None, PlainValidator(_generator_spec)] = None
    kinds: Annotated[QueryKinds, OrEmpty] = QueryKinds()
    # drop generated queries that give the answer away or that their document cannot answer:
    # judges.judge2 reads each (offline rules without its API key)
    critic: Flag = True
    # USD per dataset and UTC day for writing and checking queries (a budget line of its own,
    # never judges.budget_usd); none = no limit
    budget_usd: Annotated[float | None, PlainValidator(budget_of)] = 2.0
    # users' queries whose word sets overlap at least this much (Jaccard) are one query
    near_duplicate_similarity: Share = 0.8
