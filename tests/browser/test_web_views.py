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


RANGE = f"is not {catalog.SEED_RANGE}"


@pytest.mark.parametrize(
    ("seed", "says"),
    [
        (-5, f"seed -5 {RANGE}"),
        (-5.0, f"seed -5 {RANGE}"),  # the number field delivers floats
        (None, f"enter a seed: {catalog.SEED_RANGE}"),
        ("", f"enter a seed: {catalog.SEED_RANGE}"),
        (2.5, f"seed 2.5 {RANGE}"),  # gradio's precision=0 rounded it to seed 2
        ("2.5", f"seed &#x27;2.5&#x27; {RANGE}"),
        (1e30, f"seed 1e+30 {RANGE}"),  # not quoted back as 1000000000000000019884624838656
        (float("nan"), f"seed nan {RANGE}"),
        (True, f"seed True {RANGE}"),
        (2**31, f"seed 2147483648 {RANGE}"),
        (2**70, f"seed {2**70} {RANGE}"),
    ],
    ids=repr,
)
def test_a_bad_seed_is_one_sentence_beside_the_fields(presets, seed, says):
    family, mix = catalog.ALL_FAMILIES[0], catalog.ALL_MIXES[0]
    v = handlers.start(presets, handlers.CUSTOM, family, seed, "medium", mix)
    assert v.kept and v.session is None and says in v.setup and v.setup.count("ro-error") == 1 and v.error == ""
    w = handlers.watch(presets, handlers.CUSTOM, family, seed, "medium", mix)
    assert w.runs is None and says in w.setup and w.html == ""


def test_a_whole_number_in_the_range_starts_that_seed(presets):
    family, mix = catalog.ALL_FAMILIES[0], catalog.ALL_MIXES[0]
    for seed, value in ((2.0, 2), (2, 2), (0, 0), (float(catalog.MAX_SEED), catalog.MAX_SEED)):
        v = handlers.start(presets, handlers.CUSTOM, family, seed, "medium", mix)
        assert not v.kept and v.session.episode.config["seed"] == value, (seed, v.setup)


def test_a_refused_start_keeps_the_running_episode_its_board_and_menus(presets):
    """The issue's steps: start Seed A, inspect pr_259, clear the Seed field (or type -5), press Start. The
    board used to go back to its placeholder with every button disabled while the menus still showed p2
    and pr_259. The episode stays, and one message beside the fields says why nothing started."""
    from server import web_ui

    started = handlers.start(presets, SEED_A["title"], None, None, None, None)
    sess = started.session
    picks = handlers.Picks(CI["id"], {"pr": PR})
    inspected = handlers.act(sess, "inspect_pr_diff", {"pr_id": PR}, picks)
    assert inspected.error == "" and len(sess.episode.audit) == 1
    board = render.board_html(sess)
    scenario = SEED_A["scenario"]
    for seed in (None, -5, 2.5):  # cleared, negative, fractional: each edit switched the preset to Custom
        v = handlers.start(
            presets, handlers.CUSTOM, scenario["family"], seed, scenario["difficulty"], scenario["archetype_mix"], sess
        )
        assert v.kept and v.session is sess and "Your episode is unchanged" in v.setup
        assert v.setup.count("ro-error") == 1 and "seed" in v.setup
        assert len(sess.episode.audit) == 1 and render.board_html(sess) == board  # nothing was played or reset
        updates = web_ui._play_updates(v)
        assert len(updates) == web_ui.PLAY_OUTPUTS and updates[web_ui.SETUP_MSG] == v.setup
        untouched = [u for i, u in enumerate(updates) if i != web_ui.SETUP_MSG]
        assert all(u == {"__type__": "update"} for u in untouched), untouched  # board, menus, buttons as they were
    after = handlers.act(sess, "approve_proposal", {"proposal_id": BOARD[0]["id"]}, picks)
    assert after.error == "" and len(sess.episode.audit) == 2 and after.refs["pr"].value == PR  # it plays on


def test_evidence_menus_offer_only_this_phases_artifacts(presets):
    """The issue: after a phase change, Inspect CI run still sent the previous phase's run (labelled
    "(earlier phase)") and spent a budget unit on it. A pick that left with its phase is no pick, and says so."""
    sess = handlers.start(presets, SEED_A["title"], None, None, None, None).session
    run = next(r for r in CI["refs"] if r.startswith("ci_run_"))
    picks = handlers.Picks(None, {"pr": PR, "ci_run": run})
    for p in BOARD:  # approve all of triage: the phase ends
        v = handlers.act(sess, "approve_proposal", {"proposal_id": p["id"]}, picks)
    board = sess.board()
    assert board["phase"] != catalog.PHASES[0]
    for kind in catalog.ARTIFACT_KINDS:
        on_board = handlers.board_refs(board, kind)
        menu = v.refs[kind.kind]
        assert [value for _, value in menu.choices] == on_board  # nothing from triage
        assert "earlier phase" not in json.dumps(menu.choices)
        assert v.enabled[kind.kind] == bool(on_board)
    # Seed A's triage PR and CI run are gone from the deploy gate, which has other runs and no PR.
    assert handlers.board_refs(board, catalog.ARTIFACT_BY_KIND["pr"]) == [] and not v.enabled["pr"]
    assert v.refs["pr"].label == f"PR ({PR} left the board with its phase; none on this board)"
    assert "no PR on this board" in v.notes["evidence"]
    assert handlers.board_refs(board, catalog.ARTIFACT_BY_KIND["ci_run"]) and run not in v.refs["ci_run"].choices
    assert v.refs["ci_run"].value is None and f"{run} left the board with its phase" in v.refs["ci_run"].label
    # The Inspect CI run button sends what the menu shows: nothing, so nothing is spent.
    budget = board["review_budget_remaining"]
    unpicked = handlers.act(sess, "inspect_ci_run", {"run_id": v.refs["ci_run"].value}, picks)
    assert "deploy-check run first (nothing was sent" in unpicked.error
    assert sess.board()["review_budget_remaining"] == budget and len(sess.episode.audit) == len(BOARD)


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
