"""The benchmark tool's own rules: it needs nothing from tests/, its goal thresholds are one table that
the report and the performance block of docs/deployment.md both read, it renders kept results, its text
echo answers with exactly our texts, and its profiler finds our packages wherever the checkout is.
Nothing here measures performance."""

from __future__ import annotations

import ast
import copy
import dataclasses
import json
from pathlib import Path

import pytest

from tools.bench import goals, profiles, readme, report, text_echo_app
from tools.bench.common import record, workload_scenarios
from tools.bench.echo_app import EchoAction
from tools.bench.run_all import BLOCK_PAGE, LAST_RUN, load_results

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCH = sorted((REPO_ROOT / "tools" / "bench").glob("*.py"))


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", BENCH, ids=lambda p: p.name)
def test_bench_imports_nothing_from_tests(path):
    assert not {m for m in _imported_modules(path) if m.split(".")[0] == "tests"}


def test_bench_uses_no_unsafe_temporary_file_names():
    offenders = [p.name for p in BENCH if "mktemp(" in p.read_text()]
    assert offenders == []


@pytest.fixture(scope="module")
def results() -> dict:
    return load_results(LAST_RUN)


def test_the_kept_results_render_every_goal_and_the_block(results):
    text = report.render(results)
    for goal in goals.GOALS.values():
        assert f"| {goal.what} | {goal.goal()} | {goal.measured(results)} |" in text
    assert "Not measured" not in text
    block = readme.block(results)
    assert block.startswith(readme.START) and block.endswith(readme.END)
    assert all(f"| {g.what} | {g.goal()} |" in block for g in goals.GOALS.values())


def test_the_committed_block_and_report_match_the_kept_results(results):
    """Neither is typed by hand: both are exactly what `python -m tools.bench.run_all --render-only` writes."""
    assert (REPO_ROOT / "docs" / "benchmarks.md").read_text() == report.render(results)
    assert BLOCK_PAGE == REPO_ROOT / "docs" / "deployment.md"
    assert readme.block(results) in BLOCK_PAGE.read_text()


def test_a_threshold_changed_in_the_goals_table_changes_report_block_and_notes(results, monkeypatch):
    key = "server_throughput_64"
    old = goals.GOALS[key]
    value = old.value(results)
    new = dataclasses.replace(old, limit=round(value * 0.5, 2))  # now comfortably met
    monkeypatch.setitem(goals.GOALS, key, new)
    text, block = report.render(results), readme.block(results)
    row = f"| {old.what} | {new.goal()} | {new.measured(results)} |"
    assert f"{row} **met** |" in text and f"{row} met |" in block
    assert f"| {old.what} | {old.goal()} |" not in text + block
    assert f"The {new.limit:g}x throughput goal" in text


def test_a_part_that_did_not_run_leaves_its_goals_and_sections_out(results):
    partial = copy.deepcopy(results)
    for piece in ("variants", "workers", "soak", "timers", "profile", "profile_text_echo"):
        partial["server"].pop(piece)
    text = report.render(partial)
    assert "### What-ifs" not in text and "Soak:" not in text and "### Server step" not in text
    assert "### Workers" not in text
    not_measured = [
        goals.GOALS[k].what
        for k in (
            "server_throughput_64_plain",
            "server_p99_64_plain",
            "server_throughput_64_loop",
            "server_p99_64_loop",
            "workers_2_over_1",
            "soak_flat",
        )
    ]
    assert f"Not measured in this run: {'; '.join(not_measured)}." in text
    assert goals.GOALS["soak_flat"].what not in readme.block(partial).split("Not measured")[0]


def test_a_column_nothing_measured_is_not_printed(results):
    partial = copy.deepcopy(results)
    for row in partial["server"]["variants"]["table"]:
        for key in [k for k in row if "full_gc" in k]:
            del row[key]
    partial["server"].pop("profile_text_echo")
    text = report.render(partial)
    assert "| full GCs |" not in text and "text echo share %" not in text
    assert "| full GCs |" in report.render(results) and "text echo share %" in report.render(results)


def test_the_block_is_replaced_between_its_markers_only(results, tmp_path):
    path = tmp_path / "deployment.md"
    path.write_text(f"# title\n\nbefore\n\n{readme.START}\nstale table\n{readme.END}\n\nafter\n")
    readme.write(path, results)
    text = path.read_text()
    assert text.startswith("# title\n\nbefore\n\n") and text.endswith("\n\nafter\n")
    assert "stale table" not in text and readme.block(results) in text
    path.write_text("no markers\n")
    with pytest.raises(SystemExit, match="bench:start"):
        readme.write(path, results)


def test_missing_results_say_how_to_make_them(tmp_path):
    (tmp_path / "meta.json").write_text(json.dumps({}))
    with pytest.raises(
        SystemExit, match=r"missing engine\.json, tokens\.json, server\.json; run `python -m tools\.bench"
    ):
        load_results(tmp_path)


def test_the_profiler_finds_our_packages_by_where_they_are_not_by_folder_name(monkeypatch):
    here = str(REPO_ROOT / "server" / "app.py")
    assert profiles.category(here, "create_app") == profiles.OWN_PACKAGES["server"]
    # a clone with another name: our code is wherever the packages are imported from
    clone = Path("/srv/any-name-at-all")
    monkeypatch.setattr(
        profiles, "package_dirs", lambda: {"releaseops_arena": clone / "releaseops_arena", "server": clone / "server"}
    )
    profiles._own_package.cache_clear()
    try:
        assert profiles.category(str(clone / "server" / "app.py"), "f") == profiles.OWN_PACKAGES["server"]
        assert profiles.category(str(clone / "releaseops_arena" / "episode.py"), "step") == "engine (releaseops_arena)"
        assert profiles.label(str(clone / "server" / "app.py"), 7, "f") == "server/app.py:7(f)"
        assert profiles.category(here, "create_app") == "other"
    finally:
        profiles._own_package.cache_clear()


# ------------------------------------------------------------------ the text echo


@pytest.fixture(scope="module")
def episodes() -> list[dict]:
    return record("rule", workload_scenarios(1)[:4])


def test_the_text_echo_answers_every_reset_and_step_with_exactly_our_servers_text(episodes, tmp_path):
    from client.models import ReleaseOpsAction
    from server.releaseops_environment import ReleaseOpsEnvironment

    path = tmp_path / "texts.json"
    text_echo_app.write_texts(episodes, path)
    echo, ours = text_echo_app.TextEchoEnvironment(text_echo_app.load_texts(str(path))), ReleaseOpsEnvironment()
    steps = 0
    for ep in episodes:
        assert echo.reset(**ep["scenario"]).text == ours.reset(**ep["scenario"]).text
        for tool, args in ep["calls"]:
            mine = ours.step(ReleaseOpsAction(tool_name=tool, arguments=args)).text
            assert echo.step(EchoAction(tool_name=tool, arguments=args)).text == mine
            steps += 1
    assert steps > len(episodes)  # the episodes really played, invalid calls' error texts included


def test_the_text_echo_refuses_an_unknown_scenario_and_a_missing_texts_file(episodes):
    echo = text_echo_app.TextEchoEnvironment(text_echo_app.texts_of(episodes))
    with pytest.raises(ValueError, match="no recorded texts for scenario"):
        echo.reset(family="nope", seed=1, difficulty="easy")
    with pytest.raises(SystemExit, match=text_echo_app.TEXTS_ENV):
        text_echo_app.load_texts(None)


# ------------------------------------------------------------------ goals and rendering


def test_the_goal_table_judges_ours_against_the_text_echo_and_the_workers():
    whats = {k: g.what for k, g in goals.GOALS.items()}
    for key in (
        "server_throughput_64",
        "server_p99_64",
        "server_throughput_64_plain",
        "server_p99_64_plain",
        "server_cpu_minus_echo",
        "reply_bytes_median",
        "reply_bytes_p99",
        "workers_2_over_1",
    ):
        assert key in whats
    assert "text echo" in whats["server_throughput_64"] and "text echo" in whats["server_p99_64"]
    assert goals.GOALS["workers_2_over_1"].limit == 1.3 and goals.GOALS["workers_2_over_1"].op == ">="


def _synthetic(results: dict, echo_us: float, ours_minus: float) -> dict:
    fake = copy.deepcopy(results)
    row = goals.at_64(fake)
    row["text_echo_server_cpu_us_per_step"], row["cpu_us_minus_text_echo"] = echo_us, ours_minus
    return fake


def test_the_cpu_goal_is_the_throughput_goals_budget_over_the_text_echo(results):
    g = goals.GOALS["server_cpu_minus_echo"]
    fake = _synthetic(results, 170.0, 29.0)
    assert g.threshold(fake) == pytest.approx(170.0 / 0.85 - 170.0)
    assert g.met(fake) and not g.met(_synthetic(results, 170.0, 31.0))


def test_the_plain_goals_read_the_what_if_whose_client_offered_no_compression(results):
    rows = results["server"]["variants"]["table"]
    assert goals.plain_64(results) is next(r for r in rows if r["compression"] is None)
    assert next(r for r in rows if r["compression"] is None)["extensions"] == [None]  # the server honoured it


def test_the_report_shows_the_workers_cpu_split(results):
    text = report.render(results)
    wk = results["server"]["workers"]
    two = {row["workers"]: row for row in wk["table"]}[2]
    assert "### Workers at 64 sessions" in text
    assert f"2 workers / 1: **{wk['speedup']:.2f}x**" in text
    assert len(two["server_cpu_by_process"]) >= 2  # the supervisor and the workers, each measured
    assert " + ".join(f"{c:,.2f}" for c in two["server_cpu_by_process"]) in text
    what = goals.GOALS["workers_2_over_1"].what
    for speedup, verdict in ((1.31, "**met**"), (1.29, "**not met**")):
        fake = copy.deepcopy(results)
        fake["server"]["workers"]["speedup"] = speedup
        row = next(line for line in report.render(fake).splitlines() if line.startswith(f"| {what} |"))
        assert f"| {speedup:.2f}x, the median of per-round ratios (" in row and row.endswith(f"| {verdict} |")


def test_the_report_names_the_commit_it_measured(results):
    import subprocess

    from tools.bench.run_all import commit

    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
    ).stdout.strip()
    assert commit().split(" ")[0] == head
    fake = copy.deepcopy(results)
    fake["meta"]["commit"] = "abc1234 with uncommitted changes to 2 measured files"
    assert ", at commit abc1234 with uncommitted changes to 2 measured files)" in report.render(fake).splitlines()[2]
