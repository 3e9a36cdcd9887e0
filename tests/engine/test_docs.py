"""The README and docs/ hold to what they promise a reader.

The README stays a few minutes long (at most 2,000 words, counted like `wc -w`), its sections come in a fixed
order, its layout tree matches the repository, and its TRL snippet names nothing it does not define. In the README
and every page of docs/: each relative link (and `#anchor`) resolves and each `python path/to/file.py` names a file
that exists. In the hand-written pages, each `python -m MODULE` names an importable module, and nothing narrates how
the page came to be (sessions, issues, run letters); the generated reports are left out of those two checks, since a
script writes them (and names the command that did, as it was then).
docs/architecture.md names every module of the tree.
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
# Written by scripts (tools.bench.run_all, research.calibrate, research.learnability), never by hand.
GENERATED = {"benchmarks.md", "calibration.md", "learnability.md"}
PAGES = [README, *sorted(DOCS.glob("*.md"))]
HAND_WRITTEN = [p for p in PAGES if p.name not in GENERATED]
SECTIONS = [
    "Links",
    "Quickstart",
    "Train with TRL",
    "Use it from other trainers",
    "The environment at a glance",
    "Results",
    "Deploy and scale",
    "Layout",
    "Development",
]
WORD_LIMIT = 2000
# How a page would narrate its own making: sessions, issues, run letters, lettered variants.
NARRATION = re.compile(
    r"\bthis session\b|\bsessions? [A-Z]\b|\bruns? [A-Z](?:[, ]+(?:and )?[A-Z])*\b(?![\w-])|\bvariants? [A-Z]\b"
    r"|\bissues?\s*#\s*\d+|\bissue \d+\b|\bthe v\d+ issue\b",
)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
MODULE = re.compile(r"\bpython3?\s+-m\s+([A-Za-z_][\w.]*)")
SCRIPT = re.compile(r"\bpython3?\s+((?:[\w.-]+/)*[\w.-]+\.py)\b")


def rel(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT))


def prose(text: str) -> str:
    """The text outside fenced code blocks."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", prose(page.read_text()), re.M)}


def section(text: str, title: str) -> str:
    """A README section's text, up to the next `## ` heading."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"README has no section '## {title}'"
    return match.group(1)


# ----------------------------------------------------------------------------- the README's shape


def test_the_readme_takes_a_few_minutes():
    words = len(README.read_text().split())  # what `wc -w` counts
    assert words <= WORD_LIMIT, f"README.md has {words} words; at most {WORD_LIMIT} (move detail to docs/)"


def test_the_readme_sections_come_in_order():
    text = README.read_text()
    headings = re.findall(r"^## (.+)$", prose(text), re.M)
    assert headings == SECTIONS
    pitch = prose(text).split("\n## ", 1)[0]
    assert "Seed A" in pitch, "the pitch tells Seed A"
    assert len(re.findall(r"^\d\. ", pitch, re.M)) == 4, "Seed A's story in four lines"


def test_the_quickstart_says_how_to_get_each_command_running():
    quick = section(README.read_text(), "Quickstart")
    for needle in (
        "make serve",
        "pip install",
        "releaseops-serve",
        "docker run",
        "GenericEnvClient(base_url=",
        "source .venv/bin/activate",
        '.[train]"',
    ):
        assert needle in quick, f"the quickstart lacks {needle!r}"


def test_the_trl_snippet_defines_every_name_it_uses():
    block = next(b for b in re.findall(r"```python\n(.*?)```", section(README.read_text(), "Train with TRL"), re.S))
    tree = ast.parse(block)
    bound, used = set(dir(builtins)), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store) else used).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
    assert used <= bound, f"undefined in the README's TRL snippet: {sorted(used - bound)}"
    ours = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module.startswith("releaseops")]
    assert ours and all(importlib.util.find_spec(m) for m in ours)
    assert "GRPOTrainer(" in block and "environment_factory=" in block and ".train()" in block


def _tracked_top_level() -> set[str]:
    if not shutil.which("git") or not (REPO_ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    files = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
    return {f.split("/")[0] + ("/" if "/" in f else "") for f in files.splitlines() if not f.startswith(".")}


def test_the_layout_tree_matches_the_repository():
    tree = re.search(r"```text\n(.*?)```", section(README.read_text(), "Layout"), re.S).group(1)
    named = set()
    for line in tree.splitlines():
        if line and not line.startswith(" "):
            head = line.split("  ")[0]
            named.update(name.strip() for name in head.split(","))
    for name in named:
        assert (REPO_ROOT / name.rstrip("/")).exists(), f"the layout names {name}, which is not in the repository"
    tracked_dirs = {name for name in _tracked_top_level() if name.endswith("/")}
    top_named = {name.split("/")[0] + "/" for name in named if name.endswith("/")}
    assert tracked_dirs <= top_named, f"the layout leaves out {sorted(tracked_dirs - top_named)}"
    for sub in ("policies/", "assets/"):
        assert sub in tree


# ----------------------------------------------------------------------------- every page


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target} (no heading with that anchor)")
    assert not broken, f"{rel(page)}: {broken}"


@pytest.mark.parametrize("page", HAND_WRITTEN, ids=rel)
def test_every_module_a_command_runs_exists(page):
    """Hand-written pages only: a generated report names the command that wrote it, which may be older than the tree."""
    text = page.read_text()
    missing = sorted({m for m in MODULE.findall(text) if importlib.util.find_spec(m) is None})
    assert not missing, f"{rel(page)} runs modules that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_script_a_command_runs_exists(page):
    missing = sorted({s for s in SCRIPT.findall(page.read_text()) if not (REPO_ROOT / s).is_file()})
    assert not missing, f"{rel(page)} runs files that do not exist: {missing}"


@pytest.mark.parametrize("page", HAND_WRITTEN, ids=rel)
def test_no_page_narrates_its_making(page):
    found = [m.group() for m in NARRATION.finditer(page.read_text())]
    assert not found, f"{rel(page)} speaks of sessions, issues or run letters: {found}"


def test_the_narration_pattern_catches_what_it_should():
    for bad in (
        "as this session found",
        "run R",
        "runs M, N and O",
        "variant I",
        "the v2 issue",
        "issue #35",
        "see issue 12",
    ):
        assert NARRATION.search(bad), bad
    for fine in (
        "a WebSocket session",
        "run the server",
        "Seed A",
        "S1 no open P1 bug",
        "the issue tracker",
        "a run-length",
        "runs 4 replicas",
    ):
        assert not NARRATION.search(fine), fine


def test_the_slug_matches_github():
    assert slug("The evaluation secret") == "the-evaluation-secret"
    assert slug("Does a policy learn? (research)") == "does-a-policy-learn-research"
    assert slug("`training.train_grpo`") == "trainingtrain_grpo"


# ----------------------------------------------------------------------------- architecture


def test_the_architecture_page_names_every_module():
    text = (DOCS / "architecture.md").read_text()
    roots = ["releaseops_arena", "server", "client", "training", "research", "tools", "examples"]
    modules = [p for root in roots for p in (REPO_ROOT / root).rglob("*.py") if p.name != "__init__.py"]
    modules += [p for p in REPO_ROOT.glob("*.py")]  # the environment root's __init__.py and client.py
    missing = sorted(rel(p) for p in modules if "__pycache__" not in p.parts and p.name not in text)
    assert not missing, f"docs/architecture.md does not name {missing}"
    packages = [p.parent for p in (REPO_ROOT / "releaseops_arena").rglob("__init__.py")]
    assert all(p.name in text for p in packages)


def test_the_commands_use_the_projects_interpreter():
    """A bare `python -m` after `make serve` would be the system's Python, without the project installed."""
    bare = re.compile(r"(?m)^(?:\$ )?python3? -m ")
    offenders = [
        rel(p) for p in HAND_WRITTEN if bare.search("\n".join(re.findall(r"```bash\n(.*?)```", p.read_text(), re.S)))
    ]
    assert not offenders, f"use .venv/bin/python in the commands of {offenders}"


# ----------------------------------------------------------------------------- numbers from the results files


def test_the_readme_results_come_from_the_results_files():
    """The README's Results table is rendered from calibration.json and learnability.json, never typed:
    a number changed by hand, or results regenerated without re-rendering, fails here."""
    from research import readme_results

    text = README.read_text()
    calibration = json.loads((REPO_ROOT / readme_results.CALIBRATION).read_text())
    learnability = json.loads((REPO_ROOT / readme_results.LEARNABILITY).read_text())
    assert readme_results.render(text, calibration, learnability) == text, "run: python -m research.readme_results"
    assert "--difficulty medium" in text[text.index(readme_results.START) :]
    tampered = text.replace("| rule | a hand-written suspicion score | ", "| rule | a hand-written suspicion score | 9")
    assert readme_results.render(tampered, calibration, learnability) != tampered


def test_the_evaluation_guides_attention_table_comes_from_the_calibration():
    """The evaluation guide's attention table and its count of met targets are rendered from calibration.json:
    a share typed by hand, or a calibration re-run without re-rendering, fails here."""
    from research import readme_results

    path = REPO_ROOT / readme_results.EVALUATION
    text = path.read_text()
    calibration = json.loads((REPO_ROOT / readme_results.CALIBRATION).read_text())
    assert readme_results.render_evaluation(text, calibration) == text, "run: python -m research.readme_results"
    block = text[text.index(readme_results.ATTENTION_START) : text.index(readme_results.ATTENTION_END)]
    share = calibration["attention_share"]["unseen_mix/medium"]["planner_share"]
    assert f"| {share:.2f} |" in block
    tampered = text.replace("| unseen_mix/medium | ", "| unseen_mix/medium | 9")
    assert readme_results.render_evaluation(tampered, calibration) != tampered
