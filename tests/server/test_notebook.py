"""examples/quickstart.ipynb runs top to bottom against a live server and ships safely."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from releaseops_arena.episode import Episode
from releaseops_arena.scenario_builder import FAMILY_MECHANISM
from tests.live_server import live_server  # noqa: F401  (fixture)

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "quickstart.ipynb"


def code_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code"]


def seed_a(nb) -> dict:
    """The notebook's SEED_A assignment, evaluated on its own (it may span lines)."""
    for cell in code_cells(nb):
        for node in ast.parse(cell.source).body:
            if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["SEED_A"]:
                namespace: dict = {}
                exec(ast.get_source_segment(cell.source, node), namespace)
                return namespace["SEED_A"]
    raise AssertionError("no SEED_A in the notebook")


def output_text(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            parts.append(out.data.get("text/plain", ""))
        elif out.output_type == "error":
            parts.append("\n".join(out.traceback))
    return "".join(parts)


def test_the_notebook_talks_only_over_the_wire():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    source = "\n".join(c.source for c in code_cells(nb))
    assert "GenericEnvClient" in source and 'os.environ.get("RELEASEOPS_ENV_URL"' in source
    assert not re.search(r"^\s*(from|import)\s+(releaseops_arena|client|server)\b", source, re.M)
    assert all(not c.get("outputs") for c in code_cells(nb)), "commit the notebook without outputs"


def test_seed_a_has_the_disabled_payment_test():
    # Checked in-process here; the notebook itself only sees the board and the evidence.
    scenario = seed_a(nbformat.read(NOTEBOOK, as_version=4))
    assert scenario["family"] == "green_ci_disabled_payment_test"
    world = Episode(**scenario).world
    assert world.hazard and world.hazards == {FAMILY_MECHANISM[scenario["family"]]}, (
        f"{scenario} no longer has the CI fixer's disabled payment test (the engine changed?): pick another seed"
    )


def test_the_notebook_plays_seed_a_to_a_safe_ship(live_server, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.setenv("RELEASEOPS_ENV_URL", live_server)  # the kernel inherits this environment
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    probe = nbformat.v4.new_code_cell("import sys; print(sys.executable)")
    nb.cells.insert(0, probe)
    NotebookClient(nb, kernel_name="python3", timeout=60, resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert output_text(nb.cells[0]).strip() == sys.executable  # the kernel runs this venv's python
    cells = code_cells(nb)
    text = {i: output_text(c) for i, c in enumerate(cells)}
    assert f"connected to {live_server}" in text[1]
    assert any("tests_disabled" in t for t in text.values())
    assert any("block_proposal(proposal_id=" in t and "rule_id='S2'" in t for t in text.values())
    outcome = next(c for c in cells if "outcome" in c.metadata.get("tags", []))
    printed = output_text(outcome)
    assert "outcome: safe_ship" in printed
    assert '"safe_ship": true' in printed and '"false_blocks": 0' in printed


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
