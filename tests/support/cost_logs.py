"""What the judge client logged for a run: its cache hits and its billed calls."""

from __future__ import annotations


def cache_hits_by_model(conn, run_id):
    """(api, model, operation, hits, saved cost) of the run's cache hits, one row per group."""
    return conn.execute("SELECT api_name, model, operation, sum(hits)::int, sum(saved_cost) "
                        "FROM api_cache_hit_log WHERE run_id = %s "
                        "GROUP BY 1, 2, 3", (run_id,)).fetchall()


def calls_and_cost(conn, run_id):
    """(number of billed calls, their estimated cost) of the run."""
    return conn.execute("SELECT count(*), coalesce(sum(estimated_cost), 0) FROM api_cost_log "
                        "WHERE run_id = %s", (run_id,)).fetchone()
