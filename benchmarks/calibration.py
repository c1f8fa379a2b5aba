"""Benchmark the vectorised weight sweep against ranx.optimize_fusion on synthetic runs.

1,000 seeded synthetic queries; a semantic and a keyword retriever each return their top 100
of a 400-document pool, so a query has up to 200 candidates. Both tools see the same runs:
ranx through ``optimize_fusion(..., method="wsum", norm="min-max", metric="precision@5",
step=0.1)``, our sweep through ``normalisation="per_retriever"`` (min-max over each
retriever's own top 100, a document missing from a run scores 0) with ranx's weight pairs.
Per-weight P@5 of ranx is recomputed with ``ranx.fuse`` + ``ranx.evaluate``.

    .venv/bin/python benchmarks/calibration.py
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_harness.metrics.calibration import best_weight, weight_grid  # noqa: E402
from eval_harness.retrieval.sweep import CandidateSet, reciprocal_rank_fusion, sweep_weights  # noqa: E402

N_QUERIES = 1_000
POOL_SIZE = 400
RUN_DEPTH = 100
SEED = 20251114


def synthetic_collection(seed: int = SEED) -> tuple[dict, dict, dict, dict]:
    """Seeded runs and qrels; both retrievers score the whole pool, runs keep their top 100.

    Returns (semantic_run, keyword_run, qrels, pool) with int doc ids; ``pool`` maps query
    -> (doc_ids, semantic scores, keyword scores) over all 400 pool documents.
    """
    rng = np.random.default_rng(seed)
    semantic_run, keyword_run, qrels, pool = {}, {}, {}, {}
    for q in range(N_QUERIES):
        doc_ids = rng.choice(5_000_000, POOL_SIZE, replace=False).astype(np.int64)
        grades = np.zeros(POOL_SIZE, dtype=np.int64)
        n_relevant = 1 + rng.poisson(4)
        grades[rng.choice(POOL_SIZE, n_relevant, replace=False)] = rng.integers(1, 3, n_relevant)
        relevant = grades > 0
        # cosine-like semantic scores and BM25-like keyword scores, both favouring relevant docs
        semantic = (0.35 + 0.2 * relevant * rng.gamma(2.0, 0.5, POOL_SIZE)
                    + rng.normal(0.0, 0.06, POOL_SIZE))
        keyword = rng.gamma(1.5, 2.0, POOL_SIZE) + 8.0 * relevant * rng.random(POOL_SIZE)
        semantic_run[f"q{q}"] = _top(doc_ids, semantic)
        keyword_run[f"q{q}"] = _top(doc_ids, keyword)
        qrels[f"q{q}"] = {int(d): int(g) for d, g in zip(doc_ids[relevant], grades[relevant])}
        pool[f"q{q}"] = (doc_ids, semantic, keyword)
    return semantic_run, keyword_run, qrels, pool


def _top(doc_ids: np.ndarray, scores: np.ndarray) -> dict[int, float]:
    best = np.argsort(-scores, kind="stable")[:RUN_DEPTH]
    return {int(doc_ids[i]): float(scores[i]) for i in best}


def as_ranx(run_or_qrels: dict) -> dict:
    return {q: {str(d): v for d, v in docs.items()} for q, docs in run_or_qrels.items()}


def full_pool_candidates(semantic_run: dict, keyword_run: dict, qrels: dict,
                         pool: dict) -> CandidateSet:
    """The same union of top-100s, but every candidate carries both raw scores (fusion.py)."""
    doc_ids, semantic, keyword = [], [], []
    for query_id in qrels:
        ids, sem, kw = pool[query_id]
        union = set(semantic_run[query_id]) | set(keyword_run[query_id])
        keep = np.isin(ids, np.fromiter(union, dtype=np.int64))
        doc_ids.append(ids[keep])
        semantic.append(sem[keep])
        keyword.append(kw[keep])
    return CandidateSet.from_queries(doc_ids, semantic, keyword, list(qrels.values()),
                                     query_ids=list(qrels))


def ranx_weight_pairs(step: float = 0.1) -> list[tuple[float, float]]:
    """optimize_weights' trials for two runs: grid values rounded to the step's decimals,
    every pair whose float sum is exactly 1.0 (so 0.7 goes with 0.3, not 1.0 - 0.7)."""
    digits = str(step)[::-1].find(".")
    grid = [round(float(x), digits) for x in np.arange(0, 1 + step, step)]
    return [(a, b) for a in grid for b in grid if a + b == 1.0]


def main() -> None:
    semantic_run, keyword_run, qrels, pool = synthetic_collection()
    candidates_per_query = [len(set(semantic_run[q]) | set(keyword_run[q])) for q in qrels]
    print(f"{N_QUERIES} queries, {RUN_DEPTH} docs per retriever, union "
          f"{min(candidates_per_query)}..{max(candidates_per_query)} "
          f"(mean {np.mean(candidates_per_query):.1f}) candidates")
    pairs = ranx_weight_pairs(0.1)
    semantic_weights = np.array([a for a, _ in pairs])
    keyword_weights = np.array([b for _, b in pairs])

    def our_sweep():
        return sweep_weights(candidates, semantic_weights, keyword_weights=keyword_weights,
                             normalisation="per_retriever")

    # Ours first: once numba's runtime is loaded our numpy loop runs ~20% slower (shared
    # 2-core machine); the figure after ranx is printed too.
    build_seconds, candidates = _median_time(
        lambda: CandidateSet.from_runs(semantic_run, keyword_run, qrels))
    sweep_seconds, ours = _median_time(our_sweep, repeats=5)
    full_pool = full_pool_candidates(semantic_run, keyword_run, qrels, pool)
    fine_grid_lines = _time_fine_grid(candidates, full_pool)

    warnings.filterwarnings("ignore")  # numba's uint64 -> int64 cast warnings inside ranx
    import ranx
    from ranx.fusion_optimization.optimize_weights import get_possible_weights, get_trial_configs

    assert [tuple(map(float, p)) for p in get_trial_configs(get_possible_weights(0.1), 2)] \
        == pairs, "ranx enumerates other weight pairs than ranx_weight_pairs"
    ranx_qrels = ranx.Qrels(as_ranx(qrels))
    ranx_runs = [ranx.Run(as_ranx(semantic_run), name="semantic"),
                 ranx.Run(as_ranx(keyword_run), name="keyword")]
    _warm_up_ranx(ranx)
    start = time.perf_counter()
    ranx_best = ranx.optimize_fusion(ranx_qrels, runs=ranx_runs, method="wsum", norm="min-max",
                                     metric="precision@5", step=0.1, show_progress=False)
    ranx_seconds = time.perf_counter() - start
    sweep_after_ranx, _ = _median_time(our_sweep, repeats=5)

    ranx_p5 = np.array([_ranx_p_at_5(ranx, ranx_qrels, ranx_runs, pair) for pair in pairs])
    difference = np.abs(ranx_p5 - ours.p_at_5)
    print("\nweights (sem, kw)   ranx P@5        ours P@5        |diff|")
    for (w_sem, w_kw), theirs, mine, diff in zip(pairs, ranx_p5, ours.p_at_5, difference):
        print(f"  ({w_sem:.1f}, {w_kw:.1f})      {theirs:.12f}  {mine:.12f}  {diff:.1e}")
    print(f"max |P@5 difference| = {difference.max():.3e}"
          f" ({'OK' if difference.max() <= 1e-9 else 'MISMATCH'}, tolerance 1e-9)")

    # ranx keeps the last of tied configs (score >= best); ours prefers the config weight.
    ranx_rule = float(semantic_weights[np.flatnonzero(ours.p_at_5 == ours.p_at_5.max())[-1]])
    print(f"\nranx chosen weights: {[float(w) for w in ranx_best['weights']]}")
    print(f"ours with ranx's tie rule: ({ranx_rule}, {1.0 - ranx_rule:.1f}); ours with "
          f"our tie rule (closest to 0.7): {best_weight(semantic_weights, ours.p_at_5)}")

    print(f"\nranx.optimize_fusion (11 configs, warmed-up JIT): {ranx_seconds:8.3f} s (one run)")
    for label, seconds in (("ours, sweep only (11 weights, median of 5):      ", sweep_seconds),
                           ("ours, same, measured after ranx ran:             ", sweep_after_ranx),
                           ("ours, build CandidateSet from run dicts + sweep: ",
                            build_seconds + sweep_seconds)):
        print(f"{label}{seconds:8.3f} s  -> {ranx_seconds / seconds:6.0f}x faster")
    print("\n".join(fine_grid_lines))

    ranx_rrf = ranx.fuse(ranx_runs, norm=None, method="rrf", params={"k": 60})
    ranx_rrf_p5 = float(ranx.evaluate(ranx_qrels, ranx_rrf, "precision@5"))
    print(f"\nRRF k=60 reference, P@5: ours {reciprocal_rank_fusion(candidates).p_at_5:.12f}, "
          f"ranx {ranx_rrf_p5:.12f}")


def _median_time(run, repeats: int = 3):
    """Median wall time of ``repeats`` calls (the machine is shared) and the last result."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        seconds.append(time.perf_counter() - start)
    return float(np.median(seconds)), result


def _ranx_p_at_5(ranx, qrels, runs, pair) -> float:
    fused = ranx.fuse(runs, norm="min-max", method="wsum", params={"weights": list(pair)})
    return float(ranx.evaluate(qrels, fused, "precision@5", save_results_in_run=False))


def _warm_up_ranx(ranx) -> None:
    """Compile (or load from cache) ranx's numba functions outside the timed region."""
    qrels = ranx.Qrels({"q": {"1": 1}, "r": {"2": 2}})
    runs = [ranx.Run({"q": {"1": 0.5, "3": 0.2}, "r": {"2": 0.1, "3": 0.3}}),
            ranx.Run({"q": {"3": 0.9, "1": 0.1}, "r": {"2": 0.4, "1": 0.5}})]
    ranx.optimize_fusion(qrels, runs=runs, method="wsum", norm="min-max",
                         metric="precision@5", step=0.1, show_progress=False)
    ranx.evaluate(qrels, ranx.fuse(runs, norm="min-max", method="wsum",
                                   params={"weights": [0.5, 0.5]}), "precision@5")


def _time_fine_grid(per_retriever: CandidateSet, full_pool: CandidateSet) -> list[str]:
    grid = weight_grid(start=0.0, stop=1.0, step=0.01)
    lines = []
    sweep_weights(full_pool, grid[:2])  # first call pays numpy's one-off set-up
    for label, candidates, mode in (("per_retriever", per_retriever, "per_retriever"),
                                    ("candidates (fusion.py rule)", full_pool, "candidates")):
        seconds, result = _median_time(
            lambda candidates=candidates, mode=mode: sweep_weights(candidates, grid,
                                                                   normalisation=mode))
        chosen = best_weight(grid, result.p_at_5)
        lines.append(f"ours, 101-point grid 0..1 step 0.01, {label:27s}: {seconds:6.3f} s "
                     f"(best w={chosen}, P@5={result.p_at_5[result.index_of(chosen)]:.4f}, "
                     f"ceiling {result.p_at_5_ceiling:.4f})")
    return lines


if __name__ == "__main__":
    main()
