"""The benchmark tool's own rules: it needs nothing from tests/, its goal thresholds are one table that
the report and the README both read, it renders kept results, and its profiler finds our packages
wherever the checkout is. Nothing here measures performance."""

from __future__ import annotations

import ast
import copy
import dataclasses
import json
from pathlib import Path

import pytest

from bench import goals, profiles, readme, report
from bench.run_all import LAST_RUN, load_results

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH = sorted((REPO_ROOT / "bench").glob("*.py"))


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


def test_the_kept_results_render_every_goal_and_the_readme_block(results):
    text = report.render(results)
    for goal in goals.GOALS.values():
        assert f"| {goal.what} | {goal.goal()} | {goal.measured(results)} |" in text
    assert "Not measured" not in text
    block = readme.block(results)
    assert block.startswith(readme.START) and block.endswith(readme.END)
    assert all(f"| {g.what} | {g.goal()} |" in block for g in goals.GOALS.values())


def test_the_committed_readme_and_report_match_the_kept_results(results):
    """Neither is typed by hand: both are exactly what `python -m bench.run_all --render-only` writes."""
    assert (REPO_ROOT / "docs" / "benchmarks.md").read_text() == report.render(results)
    assert readme.block(results) in (REPO_ROOT / "README.md").read_text()


def test_a_threshold_changed_in_the_goals_table_changes_report_readme_and_notes(results, monkeypatch):
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
    for piece in ("variants", "soak", "timers", "profile", "profile_echo"):
        partial["server"].pop(piece)
    text = report.render(partial)
    assert "### What-ifs" not in text and "Soak:" not in text and "### Server step" not in text
    assert f"Not measured in this run: {goals.GOALS['soak_flat'].what}." in text
    assert goals.GOALS["soak_flat"].what not in readme.block(partial).split("Not measured")[0]


def test_a_column_nothing_measured_is_not_printed(results):
    partial = copy.deepcopy(results)
    for row in partial["server"]["variants"]["table"]:
        for key in [k for k in row if "full_gc" in k]:
            del row[key]
    partial["server"].pop("profile_echo")
    text = report.render(partial)
    assert "full GCs ours / echo" not in text and "echo share %" not in text
    assert "full GCs ours / echo" in report.render(results)


def test_the_readme_block_is_replaced_between_its_markers_only(results, tmp_path):
    path = tmp_path / "README.md"
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
    with pytest.raises(SystemExit, match=r"missing engine\.json, tokens\.json, server\.json; run `python -m bench"):
        load_results(tmp_path)


def test_the_profiler_finds_our_packages_by_where_they_are_not_by_folder_name(monkeypatch):
    here = str(REPO_ROOT / "server" / "app.py")
    assert profiles.category(here, "create_app") == profiles.OWN_PACKAGES["server"]
    # a clone with another name: our code is wherever the packages are imported from
    clone = Path("/srv/any-name-at-all")
    monkeypatch.setattr(profiles, "package_dirs", lambda: {"releaseops_arena": clone / "releaseops_arena",
                                                           "server": clone / "server"})
    profiles._own_package.cache_clear()
    try:
        assert profiles.category(str(clone / "server" / "app.py"), "f") == profiles.OWN_PACKAGES["server"]
        assert profiles.category(str(clone / "releaseops_arena" / "episode.py"), "step") == "engine (releaseops_arena)"
        assert profiles.label(str(clone / "server" / "app.py"), 7, "f") == "server/app.py:7(f)"
        assert profiles.category(here, "create_app") == "other"
    finally:
        profiles._own_package.cache_clear()
