"""The benchmarks still run: each at its smallest, as `make bench` runs it at full size.

Their figures are not judged here (docs/PERFORMANCE.md holds them); what is checked is that
each runs to its end and prints its figures, so a change cannot leave `make bench` broken.
bench/load.py's smoke is tests/test_load.py.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bench.fake_server import FakeServerProcess, paced

from .browser.conftest import _browser_missing

ROOT = Path(__file__).resolve().parents[1]
_URL = os.environ.get("DATABASE_URL", "")
# The PostgreSQL pass's server, where a bench that `make bench-postgres` runs makes a database of
# its own (BENCH_POSTGRES); empty on the SQLite pass.
POSTGRES = _URL.rsplit("/", 1)[0] + "/postgres" if _URL.startswith(("postgres://", "postgresql://")) else ""  # fmt: skip
# The other benches make a SQLite file of their own whatever DATABASE_URL says: the PostgreSQL
# pass would run them again exactly as the SQLite pass did.
sqlite_pass_only = pytest.mark.skipif(
    bool(POSTGRES), reason="the bench runs on a SQLite file of its own: the SQLite pass ran it"
)


def bench(*args: str, **env: str) -> str:
    """Run a benchmark script in a process of its own (`env`: variables more); its output."""
    done = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "agentweb.settings", **env},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def needs_chromium() -> None:
    if reason := _browser_missing():
        if os.environ.get("AGENTWEB_REQUIRE_BROWSER") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


@sqlite_pass_only
def test_the_relay_bench_compares_the_websocket_path_with_the_raw_sdk():
    out = bench("bench/stream_overhead.py", "--tokens", "50", "--runs", "1")
    assert "50 deltas, 1 runs each, medians:" in out
    assert "of raw SDK" in out and "time to the first token" in out


@sqlite_pass_only
def test_the_read_bench_costs_an_event_three_ways_against_aiohttps_own_reader():
    out = bench(
        "bench/read_paths.py", "--streams", "3", "--tokens", "20", "--delay", "0", "--runs", "1"
    )
    assert "3 streams at once, 20 one-token events each" in out
    assert "3 requests of one token at once: CPU a request (median of 1)" in out
    assert re.search(r"agentweb +[\d.]+ ms$", out, re.M), out
    for way in ("aiohttp", "sdk-raw", "agentweb"):
        assert re.search(rf"{way} +[\d.]+ µs  ×[\d.]+ of aiohttp's own reader", out), out


@sqlite_pass_only
def test_the_relay_batches_bench_costs_a_delta_on_both_layers():
    out = bench("bench/relay_batches.py", "--streams", "3", "--seconds", "0.2", "--runs", "1")
    assert "3 relays, a delta each 25 ms for 0.2 s, in-memory channel layer, 1 runs:" in out
    assert re.search(r"CPU a delta +[\d.]+ µs, [\d,]+ messages read", out), out
    out = bench(
        "bench/relay_batches.py", "--streams", "3", "--seconds", "0.2", "--runs", "1",
        "--layer", "redis",
    )  # fmt: skip
    assert "Redis channel layer" in out and "median: CPU a delta" in out


@sqlite_pass_only
def test_the_browser_relay_bench_shows_every_token_in_chromium():
    needs_chromium()
    # 3,000 deltas are past the 8,192-token output limit a request asks for: the bench's
    # stream must not stop there (it did, and the bench waited for a token never sent)
    out = bench("bench/relay_browser.py", "--tokens", "3000", "--runs", "1")
    assert "3,000 one-token deltas, 1 interleaved runs, medians:" in out
    assert "browser" in out and "of sdk-raw" in out
    assert "main thread a frame" in out and "a second" in out


@sqlite_pass_only
def test_the_cancel_bench_times_both_cancels_in_and_across_processes():
    out = bench("bench/cancel_latency.py", "--runs", "1")
    assert "1 runs each" in out
    assert out.count("median") >= 5


@sqlite_pass_only
def test_the_sizes_bench_reports_pages_switch_and_queries():
    out = bench("bench/sizes.py", "--sizes", "10", "--runs", "1")
    assert "10 entries: page" in out and "queries" in out and "switch" in out


@sqlite_pass_only
def test_the_page_bench_loads_both_pages_in_chromium():
    needs_chromium()
    out = bench("bench/page_browser.py", "--sizes", "10", "--runs", "1")
    assert "10 entries  session page: load" in out
    assert "10 entries  side by side: load" in out


@sqlite_pass_only
def test_the_coverage_bench_times_the_report():
    out = bench("bench/coverage.py", "--entries", "200", "--runs", "1")
    assert "200 entries" in out and "of scan" in out


@sqlite_pass_only
def test_the_continuation_bench_scores_each_kind_of_probe_against_its_target():
    out = bench("bench/continuation.py", "--episodes", "20")
    assert "22 probes; superseded decisions carried as current: 0 (target 0)" in out
    for kind in ("artifact", "decision", "recall", "continuation"):
        assert re.search(rf"^  {kind} +\d+ +\d+% +\d+% +\d+%  (met|NOT MET)$", out, re.M), out


@sqlite_pass_only
def test_the_handoff_wait_bench_times_handoff_with_and_without_a_draft():
    out = bench("bench/handoff_wait.py", "--runs", "1", "--document-seconds", "0.5",
                "--episodes", "5", "--samples", "2")  # fmt: skip
    assert "the model writes a document in 0.5 s; 1 runs" in out
    assert re.search(r"^  /handoff without a draft +median +[\d.]+ ms +p95 +[\d.]+ ms$", out, re.M)
    assert re.search(r"^  /handoff with a draft +median +[\d.]+ ms +p95 +[\d.]+ ms$", out, re.M)
    assert re.search(r"beside a draft [\d.]+ ms \(x[\d.]+; medians of 2\)$", out, re.M), out


@sqlite_pass_only
def test_the_long_session_bench_prints_each_figure_beside_its_target():
    out = bench("bench/long_session.py", "--runs", "1")
    assert out.count("target ≤") == 5


@sqlite_pass_only
def test_the_fork_bench_times_another_users_renames_during_a_fork():
    out = bench("bench/fork_stall.py", "--entries", "1500")
    assert "fork of 1,500 entries:" in out and "renames by another user meanwhile" in out


@sqlite_pass_only
def test_the_tree_bench_times_the_page_of_a_long_session():
    out = bench("bench/tree_page.py", "--entries", "600", "--runs", "1")
    assert out.startswith("tree page of 600 entries: median")


@sqlite_pass_only
def test_the_recall_bench_times_a_look_up_over_a_chain():
    out = bench("bench/recall.py", "--sessions", "2", "--entries", "50", "--runs", "1")
    assert "recall over 2 sessions of 50 entries: median" in out


@sqlite_pass_only
def test_the_socket_memory_bench_says_where_a_sockets_memory_goes():
    out = bench("bench/socket_memory.py", "--sockets", "3", "--top", "2")
    assert out.startswith("in-memory channel layer, one process:\n  3 idle sockets: RSS +")
    assert "the heap's growth by file, largest first:" in out


def pass_database() -> dict[str, str]:
    """A bench of `make bench-postgres` runs on the pass's database: on the PostgreSQL pass, a
    database of its own on that server, which it must drop at its end."""
    return {"BENCH_POSTGRES": POSTGRES} if POSTGRES else {}


def vendor() -> str:
    return "postgresql" if POSTGRES else "sqlite"


def test_the_prompt_parts_bench_times_each_part_of_a_prompts_set_up():
    out = bench("bench/prompt_parts.py", "--runs", "3", **pass_database())
    assert out.startswith(f"{vendor()}: a prompt's set-up, part by part")
    assert re.search(r"^\s+\d+  the claim taken and released$", out, re.M)
    assert re.search(r"^\s+\d+  render: the status line$", out, re.M)
    assert re.search(r"^\s+\d+  in all$", out, re.M)


def test_the_database_calls_bench_times_a_short_call_and_its_statements():
    out = bench("bench/db_calls.py", "--runs", "1", **pass_database())
    assert out.startswith(f"{vendor()}: CPU a call, 200 at once")
    assert re.search(r"^\s+\d+\.\d{3} ms  a short call, no statement \(the hop alone\)$", out, re.M)
    assert re.search(r"^\s+\d+\.\d{3} ms  a short call, three statements$", out, re.M)


def test_the_prompt_queries_bench_counts_a_prompts_statements_and_says_who_sent_them():
    out = bench("bench/prompt_queries.py", "--runs", "1", "--list", **pass_database())
    assert out.startswith(f"{vendor()}: database statements of one prompt")
    assert re.search(r"a later prompt: \d+ statements .*from the frame to the first delta", out)
    assert "sessions/generation/turns.py:" in out and "× UPDATE" in out  # the claim


def test_the_search_bench_times_a_rare_and_a_common_word_behind_other_users_entries():
    out = bench("bench/search_scale.py", "--users", "3", "--entries", "600", "--runs", "1",
                **pass_database())  # fmt: skip
    assert out.startswith(f"{vendor()}: search behind 600 entries of 3 users (the searcher's 200)")
    assert re.search(r"^\s+\d+\.\d  a rare word: the entries shown$", out, re.M)
    assert re.search(r"^\s+\d+\.\d  a common word: the sessions listed$", out, re.M)


def test_the_many_sessions_bench_times_the_sidebar_and_the_list():
    out = bench("bench/many_sessions.py", "--sessions", "3", "--entries", "40", "--runs", "1",
                **pass_database())  # fmt: skip
    assert out.startswith(f"{vendor()}: 3 sessions of 40 entries, median of 1 (ms)")
    assert re.search(r"^\s+\d+\.\d  the sidebar beside a session's page$", out, re.M)
    assert re.search(r"^\s+\d+\.\d  the session list, its counts and usage$", out, re.M)


@sqlite_pass_only
def test_the_load_bench_profiles_a_burst_of_prompts_with_cprofile(tmp_path):
    """`bench/load.py --cprofile`: daphne under cProfile for the burst, the event loop's thread
    and the one database thread each in a pstats file that names agentweb's own code."""
    import pstats

    out_file = tmp_path / "burst.prof"
    out = bench("bench/load.py", "--sessions", "3", "--tokens", "5", "--cprofile", str(out_file))
    assert re.search(r"N= +3 +lost 0 +errors 0", out)
    loop = pstats.Stats(str(out_file))
    assert any("sessions/consumers.py" in file for file, _, _ in loop.stats)  # type: ignore[attr-defined]
    assert Path(f"{out_file}.db").exists()


@sqlite_pass_only
def test_the_load_bench_draws_the_timeline_of_a_burst_with_the_model_in_its_own_process():
    """`bench/load.py --timeline`: every 50 ms, each process's CPU (a PostgreSQL server's and
    Redis servers' on this machine too, if any), the requests the model (its own process) has
    had, and the tabs with a first delta; the model has every prompt."""
    out = bench("bench/load.py", "--sessions", "3", "--tokens", "20", "--timeline", "1")
    assert re.search(r"N= +3 +lost 0 +errors 0", out)
    assert "ms  CPU ms: servers  model  tabs  postgres  redis   asked  first delta" in out
    rows = [line.split() for line in out.splitlines() if re.fullmatch(r"(\s+\d+){8}", line)]
    assert len(rows) >= 15  # a row every 50 ms for a second
    assert rows[-1][6:] == ["3", "3"]  # every prompt asked, every tab with its first delta


@sqlite_pass_only
def test_the_pairs_runner_alternates_a_bench_between_a_commit_and_the_working_tree():
    out = bench(
        "bench/pairs.py",
        "--base",
        "HEAD",
        "--runs",
        "1",
        "--",
        "bench/prompt_parts.py",
        "--runs",
        "3",
    )
    head = subprocess.run(
        ["git", "rev-parse", "--short=8", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    runs = re.findall(r"^--- (\S+), run 1 of 1$", out, re.M)
    assert runs == [head, "working"]
    assert f"--- medians of 1 runs each, {head} against working:" in out
    assert re.search(rf"^\s+{head}\s+\d+(\.\d+)? in all$", out, re.M)
    assert re.search(r"^\s+working\s+\d+(\.\d+)? in all$", out, re.M)


def test_on_a_postgresql_server_a_bench_leaves_no_database_of_its_own_behind():
    if not POSTGRES:
        pytest.skip("the tests run on SQLite: no PostgreSQL server to make a database on")
    bench("bench/db_calls.py", "--runs", "1", BENCH_POSTGRES=POSTGRES)
    assert databases_named_bench(POSTGRES) == []


def databases_named_bench(server: str) -> list[str]:
    import psycopg

    with psycopg.connect(server) as admin:
        found = admin.execute("SELECT datname FROM pg_database WHERE datname LIKE 'bench_%'")
        return [row[0] for row in found.fetchall()]


def _asked(port: int, text: str) -> socket.socket:
    """A Messages request for `text` sent to the server on `port`, as the SDK sends it."""
    body = json.dumps(
        {"model": "claude-fake", "max_tokens": 64, "stream": True,
         "messages": [{"role": "user", "content": text}]}
    ).encode()  # fmt: skip
    connection = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = f"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n\r\n"
    connection.sendall(head.encode() + body)
    return connection


def _read_to_the_end(connection: socket.socket) -> bytes:
    with connection:
        return b"".join(iter(lambda: connection.recv(65536), b""))


def test_the_loads_model_sends_the_fake_servers_paced_reply_byte_for_byte_and_reports_a_hang_up(
    fake_server,
):
    """bench/paced_model.py, the loads' model in a process of its own, answers as the fake
    server does (`paced`), and reports each request and each reply left early, for the load to
    time its first deltas and cancels."""
    fake_server.reset()
    fake_server.responder = paced(tokens=5, rate=200)
    model = FakeServerProcess(5, rate=200, report=True)
    try:
        ours = _read_to_the_end(_asked(model.port, "stream please 7"))
        theirs = _read_to_the_end(_asked(fake_server.port, "stream please 7"))
        assert ours == theirs
        assert ours.count(b"event: content_block_delta\n") == 5
        assert b'"text": "token4 "' in ours and ours.endswith(b"0\r\n\r\n")
        assert model.wait_for(lambda: len(model.requests) == 1)
        asked = model.requests[0]["json"]["messages"]
        assert asked == [{"role": "user", "content": "stream please 7"}]

        long = _asked(model.port, "cancel me")  # 500 tokens: left after its first
        with long:
            while b"token0 " not in long.recv(65536):
                pass
        assert model.wait_for(lambda: model.disconnects == 1)
        assert len(model.requests) == 2
    finally:
        model.stop()


@sqlite_pass_only
def test_the_mcp_bench_times_a_tool_call_and_fifty_sessions_get_their_own_results():
    out = bench("bench/mcp_calls.py", "--runs", "2", "--sessions", "5")
    assert "round trip, 2 runs each, interleaved (ms):" in out
    assert "5 sessions calling a tool at once: 5 results in" in out
    assert "each in its own session: yes" in out
