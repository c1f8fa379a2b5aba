"""End-to-end `eval-harness calibrate` on SciFact and, when ../shared is present, NFCorpus.

    .venv/bin/python benchmarks/calibration_e2e.py [--nfcorpus ../shared/datasets/nfcorpus]

Each dataset is ingested into a temporary embedded store (as benchmarks/ingest.py does);
then the command runs as its own process, exactly as a user runs it (config.yaml, history
and report written into a temporary project folder), three ways: the seed's grid (0.5..0.9
step 0.1), the finest grid (0..1 step 0.01, 101 weights) and the seed's grid with
--trec-runs. Reported per run: wall time of the process (Python start-up and imports
included), the library's own split (candidate fetch / sweep / statistics) and the peak
resident memory of the process (ru_maxrss from wait4, so only that process is counted; the
Postgres server's memory is not). A dataset without embeddings.npz needs an embedder; without
one it is skipped, saying why. Record results in RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval_harness.store import StoreLocation, migrate  # noqa: E402
from eval_harness.store.connection import start_embedded  # noqa: E402
from eval_harness.datasets.embeddings import make_embedder  # noqa: E402
from eval_harness.datasets.ingest import ingest_beir  # noqa: E402

CONFIG = """\
default_dataset: {name}
datasets:
  {name}:
    path: {path}
hybrid_search:
  semantic: 0.7
  keyword: 0.3
  candidate_depth: 50
calibration:
  grid: {{start: {start}, stop: {stop}, step: {step}}}
history:
  duckdb_path: history.duckdb
"""
RUNS = (("seed grid 0.5..0.9 step 0.1", (0.5, 0.9, 0.1), []),
        ("fine grid 0..1 step 0.01", (0.0, 1.0, 0.01), []),
        ("seed grid + --trec-runs", (0.5, 0.9, 0.1), ["--trec-runs", "trec"]))


def embedder_available() -> str | None:
    """None when a local embedder can be imported, else why not."""
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        return ("sentence-transformers is not installed in .venv (the local embedder; "
                "pip install torch==2.13.0 -e '.[local-embeddings]') and no OPENAI_API_KEY "
                "is used by this benchmark")
    return None


def run_calibrate(project: Path, url: str, extra: list[str]) -> tuple[float, int, dict, int]:
    """Wall seconds, peak RSS in KiB, the --json output and the exit code of one command."""
    env = dict(os.environ, DATABASE_URL=url, PYTHONPATH=str(ROOT))
    env.pop("EVAL_HARNESS_CONFIG", None)
    out_path, err_path = project / "stdout.json", project / "stderr.txt"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "eval_harness.cli", "--config", str(project / "config.yaml"),
             "calibrate", "--json", *extra], cwd=project, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)  # this child's own rusage
        seconds = time.perf_counter() - started
    process.returncode = code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise RuntimeError(f"calibrate exited {code}: {err_path.read_text().strip()}")
    return seconds, usage.ru_maxrss, json.loads(out_path.read_text()), code


def benchmark_dataset(store: StoreLocation, name: str, path: Path, work: Path,
                      embeddings: Path | None = None) -> None:
    with store.connection() as conn:
        started = time.perf_counter()
        # a folder without embeddings.npz is embedded by the offline model (embedder_available)
        report = ingest_beir(conn, path, name=name, embeddings=embeddings,
                             embedder_factory=lambda: make_embedder("all-MiniLM-L6-v2",
                                                                  provider="local"))
        ingest_seconds = time.perf_counter() - started
    print(f"\n## {name}: {report.documents.inserted} documents, {report.queries.inserted} "
          f"ground-truth queries (ingest {ingest_seconds:.1f} s)")
    print(f"{'run':32} {'wall s':>7} {'fetch s':>8} {'sweep s':>8} {'stats s':>8} "
          f"{'peak MiB':>9}  best  P@5     ceiling verdict")
    for label, (start, stop, step), extra in RUNS:
        project = work / f"{name}-{step}-{len(extra)}"
        project.mkdir()
        (project / "config.yaml").write_text(CONFIG.format(name=name, path=path, start=start,
                                                           stop=stop, step=step))
        seconds, peak_kib, result, code = run_calibrate(project, store.url, extra)
        split = result["seconds"]
        print(f"{label:32} {seconds:7.2f} {split['fetch_candidates']:8.2f} "
              f"{split['sweep']:8.3f} {split['statistics']:8.2f} {peak_kib / 1024:9.0f}  "
              f"{result['best']['semantic_weight']:.2f}  {result['best']['p_at_5']:.4f}  "
              f"{result['p_at_5_ceiling']:.4f} {result['verdict']['verdict']} (exit {code})")
        if extra:
            files = list((project / "trec").iterdir())
            size = sum(f.stat().st_size for f in files) / 2**20
            print(f"{'':32} TREC: {len(files)} files, {size:.1f} MiB")
    uplift, cv = result["uplift"], result["cross_validated_p_at_5"]
    print(f"seed grid: uplift over 0.7 {uplift['absolute']:+.4f} [{uplift['ci_low']:+.4f}, "
          f"{uplift['ci_high']:+.4f}], p = {uplift['p_value']:.3f}; cross-validated P@5 "
          f"{cv['p_at_5']:.4f}; RRF k=60 P@5 {result['rrf']['p_at_5']:.4f}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scifact", default=str(ROOT / "datasets" / "scifact"))
    parser.add_argument("--nfcorpus", default=str(ROOT.parent / "shared" / "datasets" / "nfcorpus"))
    parser.add_argument("--nfcorpus-embeddings",
                        default=str(ROOT / ".eval-harness" / "cache" / "nfcorpus" / "embeddings.npz"),
                        help="precomputed vectors for the read-only NFCorpus folder, made with "
                             "scripts/compute_embeddings.py ... --output FILE")
    args = parser.parse_args()
    extra_embeddings = {"nfcorpus": Path(args.nfcorpus_embeddings)}
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpus, python "
          f"{platform.python_version()}, {platform.platform()}")
    datasets = [("scifact", Path(args.scifact)), ("nfcorpus", Path(args.nfcorpus))]
    with tempfile.TemporaryDirectory(prefix="eh-calibrate-") as tmp:
        store = StoreLocation(start_embedded(Path(tmp) / "pgdata"), "benchmark")
        with store.connection() as conn:
            migrate(conn)
        for name, path in datasets:
            if not path.is_dir():
                print(f"\n## {name}: skipped, {path} does not exist")
                continue
            embeddings = extra_embeddings.get(name)
            embeddings = embeddings if embeddings and embeddings.is_file() else None
            if embeddings is None and not (path / "embeddings.npz").is_file() \
                    and (why := embedder_available()):
                print(f"\n## {name}: skipped, {path} has no embeddings.npz and {why}")
                continue
            benchmark_dataset(store, name, path, Path(tmp), embeddings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
