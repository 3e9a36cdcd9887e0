"""The Release board's view models and replays without a browser: menus that keep the visitor's picks, actions
disabled with a reason, scenario fields checked beside the form, calls as sentences, and collect files
replayed (and refused with one clear sentence)."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from releaseops_arena import catalog
from releaseops_arena.episode import Episode
from releaseops_arena.policies import POLICIES, play
from releaseops_arena.splits import task_scenario
from server import web_handlers as handlers
from server import web_render as render
from server import web_replay
from server.web_content import load_presets
from tests.live_server import REPO_ROOT

pytestmark = pytest.mark.timeout(120)

SEED_A = json.loads((REPO_ROOT / "server" / "assets" / "seed_a_bad_ci.json").read_text())
SEED_B = json.loads((REPO_ROOT / "server" / "assets" / "seed_b_budget_restraint.json").read_text())
BOARD = Episode(**SEED_A["scenario"]).board()["proposals"]
CI = next(p for p in BOARD if p["worker"] == "ci_fixer" and p["request"] == "merge_pr")
PR = next(r for r in CI["refs"] if r.startswith("pr_"))


@pytest.fixture
def presets():
    return load_presets()


def record(policy: str = "planner", index: int = 0) -> dict:
    """One line of a `training.collect` file, as collect writes it."""
    from training.collect import to_record

    run = play(POLICIES[policy](), task_scenario("heldout_seeds", index, "medium"))
    return asdict(to_record(run, f"{policy}|heldout_seeds|medium|{index}", "heldout_seeds", index))


def write(tmp_path, lines, name="results.jsonl"):
    path = tmp_path / name
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


# ------------------------------------------------------------- Play


def test_every_call_keeps_the_visitors_pick_and_a_vanished_pick_says_so(presets):
    sess = handlers.start(presets, SEED_A["title"], None, None, None, None).session
    picks = handlers.Picks(CI["id"], {"pr": PR})
    v = handlers.act(sess, "inspect_pr_diff", {"pr_id": PR}, picks)
    assert v.proposal.value == CI["id"] and v.refs["pr"].value == PR and v.error == ""
    v = handlers.act(sess, "block_proposal", {"proposal_id": CI["id"], "rule_id": "S2"}, picks)
    assert sess.episode.audit[-1]["arguments"] == {"proposal_id": CI["id"], "rule_id": "S2"}
    assert v.proposal.value is None and f"{CI['id']} is blocked" in v.proposal.label  # never another, silently
    assert CI["id"] not in [pid for _, pid in v.proposal.choices]
    # A refused call keeps the pick too.
    other = next(p["id"] for p in BOARD if p["id"] != CI["id"] and not p.get("status"))
    v = handlers.act(sess, "block_proposal", {"proposal_id": other, "rule_id": "S3"}, handlers.Picks(other))
    assert v.error and v.proposal.value == other
    assert "no rule applies" in handlers.rule_hint(sess.board(), other) or "allow" in handlers.rule_hint(
        sess.board(), other
    )


def test_a_phase_change_empties_the_pick_with_a_reason(presets):
    sess = handlers.start(presets, SEED_A["title"], None, None, None, None).session
    first = BOARD[0]["id"]
    for p in BOARD:
        v = handlers.act(sess, "approve_proposal", {"proposal_id": p["id"]}, handlers.Picks(first))
    assert sess.board()["phase"] != catalog.PHASES[0]
    assert v.proposal.value is None and first in v.proposal.label


def test_impossible_actions_are_disabled_with_a_reason(presets):
    sess = handlers.start(presets, SEED_A["title"], None, None, None, None).session
    for _ in range(sess.board()["evidence_actions_remaining"]):
        v = handlers.act(sess, "inspect_pr_diff", {"pr_id": PR})
    assert not any(v.enabled[k] for k in ("pr", "ci_run", "ticket", "ask"))
    assert v.enabled["approve"] and v.enabled["hold"]
    assert "No evidence actions left" in v.notes["evidence"]
    none = handlers.play_view(None)
    assert not any(none.enabled.values())


@pytest.mark.parametrize(
    ("seed", "says"),
    [(-5, "seed -5 is out of range"), (None, "enter a seed"), (2.5, "not a whole number"), (2**40, "out of range")],
)
def test_a_bad_seed_is_one_sentence_beside_the_fields(presets, seed, says):
    family, mix = catalog.ALL_FAMILIES[0], catalog.ALL_MIXES[0]
    v = handlers.start(presets, handlers.CUSTOM, family, seed, "medium", mix)
    assert v.session is None and says in v.setup and v.setup.count("ro-error") == 1 and v.error == ""
    w = handlers.watch(presets, handlers.CUSTOM, family, seed, "medium", mix)
    assert w.runs is None and says in w.setup and w.html == ""


# ------------------------------------------------------------ Watch


def test_calls_read_as_sentences_with_their_key_evidence():
    result = Episode(**SEED_A["scenario"]).step("inspect_pr_diff", {"pr_id": PR}).text
    said = render.sentence("inspect_pr_diff", {"pr_id": PR}, result)
    assert said.startswith(f"inspected {PR}: ") and "disables" in said and "{" not in said
    assert render.sentence("block_proposal", {"proposal_id": "p8", "rule_id": "S2"}, "{}") == "blocked p8 citing S2"
    assert "refused" in render.sentence("approve_proposal", {"proposal_id": "p1"}, None, "p1 is not active")
    assert render.wordy("release_manager") == "release_<wbr>manager"  # a break chance, never mid-word


def test_watch_offers_inspect_everything_and_seed_b_opens_with_it(presets):
    assert "inspect_everything" in handlers.WATCH_POLICIES and "naive" in handlers.WATCH_SHOWN
    assert handlers.shown_for(presets, SEED_B["title"])[0] == "inspect_everything"
    assert handlers.shown_for(presets, SEED_A["title"])[0] == "naive"
    v = handlers.watch(
        presets, SEED_B["title"], None, None, None, None, shown=handlers.shown_for(presets, SEED_B["title"])
    )
    assert v.runs["inspect_everything"]["metrics"]["outcome"] != "safe_ship"
    assert v.runs["planner"]["metrics"]["outcome"] == "safe_ship"
    assert "id='watch-inspect_everything'" in v.html and "raw JSON" in v.html


# ----------------------------------------------------------- Replay


def test_a_collect_file_replays_beside_the_baselines(tmp_path):
    rec = record()
    records = web_replay.read_records(write(tmp_path, [rec]))
    run = web_replay.replay_run(records[0])
    assert run["matches"] and run["return"] == pytest.approx(rec["reward"])
    assert [s["tool"] for s in run["steps"]] == [c["tool_name"] for c in rec["tool_trace"]]
    view, note = handlers.replay(records[0])
    assert list(view.runs)[0] == handlers.REPLAY and set(handlers.WATCH_POLICIES) <= set(view.runs)
    assert view.shown[0] == handlers.REPLAY and "every answer matches" in note
    assert "id='watch-replay'" in view.html and "heldout_seeds #0" in view.story
    assert web_replay.episode_label(0, records[0]).startswith("1. planner · heldout_seeds #0 · medium")


def test_a_tampered_file_replays_and_says_the_engine_differs(tmp_path):
    rec = record()
    rec["tool_trace"][0]["result"]["data"] = '{"tool": "something else"}'
    _, note = handlers.replay(web_replay.read_records(write(tmp_path, [rec]))[0])
    assert "differ from the file" in note


@pytest.mark.parametrize(
    ("lines", "says"),
    [
        (["not json"], "line 1 is not JSON"),
        ([{"episode_id": "x"}], "line 1 is not an episode record of training.collect"),
        ([{"task": {"seed": 1}}], "its task has no family, difficulty, archetype_mix"),
        ([], "holds no episodes"),
        ([{"task": {**SEED_A["scenario"], "benchmark_version": "v0"}, "tool_trace": []}], "played under benchmark v0"),
        ([{"task": dict(SEED_A["scenario"]), "tool_trace": "nope"}], "tool_trace is not a list of calls"),
    ],
)
def test_a_bad_file_gets_one_clear_sentence(tmp_path, lines, says):
    with pytest.raises(web_replay.ReplayError, match=says):
        web_replay.read_records(write(tmp_path, lines))


def test_uploads_have_a_published_limit(tmp_path):
    big = tmp_path / "big.jsonl"
    big.write_bytes(b" " * (web_replay.MAX_BYTES + 1))
    with pytest.raises(web_replay.ReplayError, match="the limit is"):
        web_replay.read_records(big)
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(web_replay.ReplayError, match="not UTF-8"):
        web_replay.read_records(binary)
    from server.web_ui import TITLE, build_release_board

    blocks = build_release_board(None, [], None, False, "OpenEnv Agentic Environment: x", "")
    blocks.title, blocks.max_file_size = "OpenEnv Agentic Environment: x", None  # as OpenEnv and gradio set them
    assert blocks.title == TITLE and blocks.max_file_size == web_replay.MAX_BYTES


def test_an_operator_folder_offers_its_files_and_nothing_else(tmp_path, monkeypatch):
    monkeypatch.delenv(web_replay.REPLAY_DIR_ENV, raising=False)
    assert web_replay.server_files() == (None, [], "")
    (tmp_path / "run1").mkdir()
    write(tmp_path / "run1", [record()])
    monkeypatch.setenv(web_replay.REPLAY_DIR_ENV, str(tmp_path))
    root, files, note = web_replay.server_files()
    assert root == tmp_path and files == ["run1/results.jsonl"] and note == ""
    assert web_replay.read_records(web_replay.server_file("run1/results.jsonl"))
    for name in ("../secret.jsonl", "/etc/passwd", "run1/other.jsonl"):
        with pytest.raises(web_replay.ReplayError, match="not one of the files"):
            web_replay.server_file(name)
    monkeypatch.setenv(web_replay.REPLAY_DIR_ENV, str(tmp_path / "missing"))
    assert "is not a folder" in web_replay.server_files()[2]
