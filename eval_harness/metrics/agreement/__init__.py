"""Agreement between two relevance judges, and between a judge and a human.

Judges score a (query, document) pair in [0, 1]; ``None`` or NaN means the pair was not
scored (for example, the reply did not parse). A score is *relevant* when it is strictly
greater than the threshold (0.5 by default, so exactly 0.5 is not relevant). Unscored pairs
are left out of every statistic and counted, never guessed.

The headline is Cohen's kappa over all scored pairs pooled, with a 95% interval from a
bootstrap over queries: the documents of one query are judged against the same query text,
so they are not independent and resampling single pairs would make the interval too narrow.

Coefficients that can be undefined come back as small result types whose ``value`` is
``None`` with a ``reason``; reports built here never contain NaN (``to_dict`` is valid
strict JSON). Pure statistics: no store, no Dagster.

Modules: :mod:`.inputs` (accepted input, scores to labels), :mod:`.results` (result types,
strict JSON), :mod:`.kappa` (Cohen's kappa, weighted kappa, Gwet's AC1, Landis & Koch),
:mod:`.raw_scores` (Krippendorff's alpha, Spearman, Wilcoxon offset), :mod:`.bootstrap`
(query bootstrap interval), :mod:`.retest` (a judge against itself: flip rate, alpha over repeats),
:mod:`.sequential` (the interval's level when it is read at several
planned looks), :mod:`.reports` (the judge-judge and judge-human reports).
"""

from eval_harness.metrics.agreement.bootstrap import (
                                                      DEFAULT_CONFIDENCE,
                                                      DEFAULT_RESAMPLES,
                                                      DEFAULT_SEED,
                                                      kappa_bootstrap_interval,
)
from eval_harness.metrics.agreement.inputs import (
                                                      DEFAULT_ANCHORS,
                                                      DEFAULT_THRESHOLD,
                                                      AgreementInputError,
                                                      bin_scores,
                                                      binarize_scores,
)
from eval_harness.metrics.agreement.kappa import (
                                                      Weights,
                                                      binary_table,
                                                      cohen_kappa,
                                                      cohen_kappa_value,
                                                      gwet_ac1,
                                                      kappa_from_table,
                                                      landis_koch_label,
                                                      weighted_kappa,
)
from eval_harness.metrics.agreement.raw_scores import krippendorff_alpha_interval, score_offset_test
from eval_harness.metrics.agreement.reports import agreement_report, judge_vs_human
from eval_harness.metrics.agreement.results import (
                                                      AgreementReport,
                                                      AlphaResult,
                                                      BinaryTable,
                                                      BootstrapInterval,
                                                      JudgeHumanReport,
                                                      KappaResult,
                                                      OffsetTest,
                                                      QueryKappa,
                                                      RankCorrelation,
                                                      to_jsonable,
)
from eval_harness.metrics.agreement.retest import (
                                                      RetestAgreement,
                                                      krippendorff_alpha,
                                                      retest_agreement,
)
from eval_harness.metrics.agreement.sequential import spent_confidence

__all__ = [
    "DEFAULT_ANCHORS", "DEFAULT_CONFIDENCE", "DEFAULT_RESAMPLES", "DEFAULT_SEED",
    "DEFAULT_THRESHOLD", "AgreementInputError", "AgreementReport", "AlphaResult", "BinaryTable",
    "BootstrapInterval", "JudgeHumanReport", "KappaResult", "OffsetTest", "QueryKappa",
    "RankCorrelation", "RetestAgreement", "Weights", "agreement_report", "bin_scores",
    "binarize_scores",
    "binary_table", "cohen_kappa", "cohen_kappa_value", "gwet_ac1", "judge_vs_human",
    "kappa_bootstrap_interval", "kappa_from_table", "krippendorff_alpha",
    "krippendorff_alpha_interval", "retest_agreement",
    "landis_koch_label", "score_offset_test", "spent_confidence", "to_jsonable",
    "weighted_kappa",
]
