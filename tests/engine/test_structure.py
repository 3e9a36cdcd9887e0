"""The engine is a pure library (it imports with only the standard library), and each table is written once."""

import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
ENGINE = sorted(p.stem for p in (REPO_ROOT / "releaseops_arena").glob("*.py") if p.stem != "__init__")
# Everything the other doors use; the engine must never need any of them.
BLOCKED = [
    "openenv",
    "pydantic",
    "fastapi",
    "gradio",
    "torch",
    "uvicorn",
    "websockets",
    "transformers",
    "trl",
    "datasets",
    "numpy",
    "starlette",
    "httpx",
]

PROBE = f"""
import importlib, importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {BLOCKED!r}:
            raise ImportError('blocked for the purity test: ' + name)

sys.meta_path.insert(0, Block())
for module in {ENGINE!r}:
    importlib.import_module('releaseops_arena.' + module)
from releaseops_arena import ReleaseOpsToolEnv
from releaseops_arena.policies import ReferencePlanner, play
run = play(ReferencePlanner(), dict(family='green_ci_disabled_payment_test', seed=1, difficulty='medium',
                                    archetype_mix='shortcut_ci__careful_qa'))
third_party = sorted(m for m in sys.modules if m.split('.')[0] in {BLOCKED!r})
print('OK', run['metrics']['outcome'], third_party)
"""


def test_engine_imports_and_plays_with_only_the_standard_library():
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[0] == "OK" and result.stdout.strip().endswith("[]"), result.stdout


def test_the_probe_really_blocks():
    """The blocker itself works, so the test above cannot pass by accident."""
    probe = PROBE.split("for module")[0] + "import pydantic\n"
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "blocked for the purity test: pydantic" in result.stderr


# ----------------------------------------------------- each table once
# The catalogue is the one source of every closed name set; these tests fail as soon as a door
# (tool signatures, JSON schemas, MCP, /metadata, the engine, the web board) disagrees with it.

ENUMS = {
    ("block_proposal", "rule_id"): "RULE_IDS",
    ("ask_worker", "worker_id"): "WORKERS",
    ("ask_worker", "question_type"): "QUESTION_TYPES",
    ("hold_release", "reason_code"): "HOLD_REASONS",
}


def test_tool_enums_schemas_mcp_and_metadata_are_the_catalogue():
    import asyncio

    from releaseops_arena import catalog
    from releaseops_arena.tools import TOOL_SPECS, tool_schemas
    from server.mcp_tools import SessionToolServer

    listed = catalog.catalogue()
    schemas = {s["function"]["name"]: s["function"] for s in tool_schemas()}
    mcp = {t.name: t.parameters for t in asyncio.run(SessionToolServer(lambda *a, **k: {}).list_tools())}
    closed = {(tool, arg) for tool, spec in TOOL_SPECS.items() for arg, choices in spec.items() if choices}
    assert closed == set(ENUMS)  # a new closed argument gets a row here and a tuple in the catalogue
    for (tool, arg), name in ENUMS.items():
        values = getattr(catalog, name)
        assert TOOL_SPECS[tool][arg] == values
        prop = schemas[tool]["parameters"]["properties"][arg]
        assert prop["enum"] == list(values) and mcp[tool] == schemas[tool]["parameters"]
        assert all(v in prop["description"] for v in values), (tool, arg)  # the prose lists them too
    assert listed["workers"] == list(catalog.WORKERS) and listed["question_types"] == list(catalog.QUESTION_TYPES)
    assert listed["hold_reasons"] == list(catalog.HOLD_REASONS) and list(listed["rules"]) == list(catalog.RULE_IDS)


def test_one_artifact_table_names_every_inspect_tool_and_every_id():
    from releaseops_arena import catalog
    from releaseops_arena.episode import Episode
    from releaseops_arena.splits import scenarios
    from releaseops_arena.tools import TOOL_SPECS

    inspect_tools = {name for name in TOOL_SPECS if name.startswith("inspect_")}
    assert inspect_tools == set(catalog.ARTIFACT_BY_TOOL)
    for column in ("kind", "prefix", "tool", "argument", "result_key"):  # one row per kind, nothing shared
        assert len({getattr(a, column) for a in catalog.ARTIFACT_KINDS}) == len(catalog.ARTIFACT_KINDS), column
    for kind in catalog.ARTIFACT_KINDS:
        assert TOOL_SPECS[kind.tool] == {kind.argument: None}
        assert catalog.inspect_call(kind.prefix + "1") == (kind.tool, {kind.argument: kind.prefix + "1"})
    seen = set()
    for scenario in scenarios("train", 40):
        ep = Episode(**scenario)
        for aid, artifact in ep.world.artifacts.items():  # the generator's ids follow the table
            assert catalog.artifact_kind(aid).kind == artifact.kind
        for ref in ep.world.seen_refs[:2]:  # the engine names the artifact where the table says
            tool, args = catalog.inspect_call(ref)
            result = json.loads(ep.step(tool, args).text)
            assert result["tool"] == tool and result[catalog.ARTIFACT_BY_TOOL[tool].result_key] == ref
            seen.add(tool)
    assert seen == inspect_tools


def test_ref_prefixes_are_written_only_in_the_catalogue():
    import ast

    from releaseops_arena import catalog

    prefixes = {a.prefix for a in catalog.ARTIFACT_KINDS}
    found = []
    for folder in ("releaseops_arena", "server", "client", "training"):
        for path in (REPO_ROOT / folder).glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and node.value in prefixes and path.name != "catalog.py":
                    found.append(f"{folder}/{path.name}:{node.lineno} {node.value!r}")
    assert not found, found


def _source_functions():
    import ast

    for folder in ("releaseops_arena", "server", "client", "training"):
        for path in (REPO_ROOT / folder).glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef):
                    yield f"{folder}/{path.name}", node.name


def test_observations_are_read_in_one_place():
    """The reader's parts (absorbing a board, the clock arithmetic) exist once, in rendering.py."""
    readers = {"_absorb", "absorb", "spare_phases", "can_look"}
    assert {(where, name) for where, name in _source_functions() if name in readers} == {
        ("releaseops_arena/rendering.py", name) for name in readers - {"absorb"}
    }


def test_the_one_reader_rebuilds_the_engines_board_after_every_call():
    """`View` is the inverse of rendering: fed the observation and each result, it holds the board the
    engine renders, every ref shown so far, and the engine's count of spare phases."""
    from releaseops_arena import ReleaseOpsToolEnv, catalog
    from releaseops_arena.policies import POLICIES, TruthReader
    from releaseops_arena.rendering import View
    from releaseops_arena.splits import scenarios

    checked = 0
    for k, scenario in enumerate(s for split in ("train", "unseen_family") for s in scenarios(split, 100)):
        policy = POLICIES[("random", "rule", "oracle", "planner", "inspect_everything")[k % 5]]()
        env = ReleaseOpsToolEnv()
        policy.rng = __import__("random").Random(k)
        view = View(json.loads(env.reset(**scenario)))
        ep = env._episode
        if policy.privileged:
            policy.truth = TruthReader(ep)
        policy.begin(ep.initial_observation)
        shown = []
        while not env.done:
            w = ep.world
            assert view.current() == ep.board()
            shown.extend(r for p in ep.board()["proposals"] for r in p["refs"] if r not in shown)
            assert view.refs == shown
            assert view.spare_phases() == w.rounds_total - w.round - (len(catalog.PHASES) - w.stage)
            checked += 1
            tool, args = policy.act(view)
            view.note_call(tool, args)
            try:
                view.update(json.loads(getattr(env, tool)(**args)))
            except ValueError:
                pass  # an invalid call changes nothing a reader sees
    assert checked > 2000


def test_the_web_boards_menus_are_the_catalogue():
    """Every menu of the Release board offers exactly the values its tool accepts, and every argument a
    button sends has a name to ask for it by."""
    from releaseops_arena import catalog
    from releaseops_arena.tools import TOOL_SPECS
    from server import web_handlers, web_render

    for (tool, arg), choices in web_handlers.MENUS.items():
        assert tuple(value for _, value in choices) == TOOL_SPECS[tool][arg], (tool, arg)
    assert set(web_handlers.MENUS) == set(ENUMS)
    assert set(web_handlers.NEEDS) == {arg for spec in TOOL_SPECS.values() for arg in spec}
    assert set(web_render.OUTCOME_TEXT) == set(catalog.OUTCOMES)
