"""The structured RL policy's pieces: features, valid-action masking, deterministic training steps.

Over 400 lines: the structured policy's pieces share a tracker and a tiny trained model.
"""

import copy
import json
import random

import pytest
import torch

from releaseops_arena import ReleaseOpsToolEnv
from releaseops_arena.splits import SPLITS, scenarios
from research import structured_policy as sp


def tracker(seed=3, difficulty="medium"):
    env = ReleaseOpsToolEnv()
    return env, sp.Tracker(json.loads(env.reset(seed=seed, difficulty=difficulty)))


def test_every_visible_field_moves_the_features():
    _, view = tracker()
    p = dict(view.pending()[0])
    base = sp.features(view, "approve", p)
    changes = {
        "claim": {"claim": "Certain: build green after a test cleanup in payments."},
        "request": {"request": "ship_release_candidate"},
        "refs": {"refs": p["refs"][:1] if len(p["refs"]) > 1 else p["refs"] + ["pr_999"]},
        "risk": {"risk": ["docs"]},
        "confidence": {"confidence": "low" if p["confidence"] != "low" else "high"},
    }
    for field, change in changes.items():
        assert sp.features(view, "approve", {**p, **change}) != base, field
    for key, value in (
        ("phase", "deploy_gate"),
        ("hours_to_deadline", 12),
        ("review_budget_remaining", 0),
        ("evidence_actions_remaining", 0),
    ):
        other = copy.deepcopy(view)
        other.board[key] = value
        if key == "phase":
            other.board["phase_index"] = 1
        assert sp.features(other, "approve", p) != base, key
    # Identity is not a feature (behaviour is, so lessons transfer across workers); a worker's
    # track record and hint are.
    other_worker = copy.deepcopy(view)
    for w in other_worker.board["worker_stats"]:
        if w["worker"] != p["worker"]:
            w["hint"], w["recent"] = "returning_from_leave", {"correct": 0, "incorrect": 4}
    assert (
        sp.features(
            other_worker,
            "approve",
            {
                **p,
                "worker": next(w["worker"] for w in other_worker.board["worker_stats"] if w["worker"] != p["worker"]),
            },
        )
        != base
    ), "worker"
    stats = copy.deepcopy(view)
    for w in stats.board["worker_stats"]:
        w["hint"], w["recent"] = "returning_from_leave", {"correct": 0, "incorrect": 4}
    assert sp.features(stats, "approve", p) != base, "worker_stats"
    seen = copy.deepcopy(view)
    seen.evidence[p["refs"][0]] = {"tests_disabled": ["test_x"]}
    assert sp.features(seen, "approve", p) != base, "evidence"
    told = copy.deepcopy(view)
    told.answers[p["id"]] = "Build passed after disabling one flaky payment test."
    assert sp.features(told, "approve", p) != base, "answers"


def test_masking_never_offers_an_invalid_call():
    rng = random.Random(0)
    checked = 0
    for scenario in scenarios("train", 24):
        env = ReleaseOpsToolEnv()
        view = sp.Tracker(json.loads(env.reset(**scenario)))
        while not env.done:
            cands = sp.candidates(view)
            for tool, args, _ in cands:
                probe = copy.deepcopy(env)
                getattr(probe, tool)(**args)  # raises ValueError if the call were invalid
                checked += 1
            tool, args, _ = cands[rng.randrange(len(cands))]
            view.note_call(tool, args)
            view.update(json.loads(getattr(env, tool)(**args)))
    assert checked > 500


def test_training_steps_change_the_parameters_deterministically():
    def run():
        result = sp.train(
            minutes=5,
            group=4,
            scenarios_per_step=2,
            max_steps=3,
            seed=7,
            warm_start="rule",
            warm_episodes=16,
            validate_every=0,
        )
        return {k: v.clone() for k, v in result["model"].state_dict().items()}

    torch.manual_seed(7)
    initial = sp.Scorer(sp.feature_dim()).state_dict()
    a, b = run(), run()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], initial[k]) for k in a)


def test_a_trained_policy_plays_through_the_evaluation_harness(tmp_path):
    from training.evaluate import evaluate

    path = tmp_path / "w.pt"
    sp.train(
        minutes=5, group=4, scenarios_per_step=2, max_steps=2, seed=1, warm_start="rule", warm_episodes=16, out=path
    )
    sp.register()
    result = evaluate(f"structured:{path}", "heldout_seeds", 12, "medium", progress=False)
    assert result["metrics"]["invalid_action"]["rate"] == 0.0
    assert result["metrics"]["episodes"] == 12


def test_training_keeps_the_best_validated_checkpoint(tmp_path):
    seen = []
    result = sp.train(
        minutes=5,
        group=4,
        scenarios_per_step=2,
        max_steps=6,
        seed=1,
        warm_start="rule",
        warm_episodes=16,
        lr=0.05,
        validate_every=2,
        validation_episodes=8,
        out=tmp_path / "w.pt",
        difficulty="medium",
        callback=lambda step, model, score: seen.append((step, score)),
    )
    assert [step for step, _ in seen] == [0, 2, 4, 6]
    best_step, best_score = max(seen, key=lambda s: s[1])
    assert result["best_step"] == best_step != 6  # with this seed the last weights are not the best
    held = list(scenarios("train", 8, "medium", start=sp.VALIDATION_START))
    assert sp.validation_return(result["model"], held) == pytest.approx(best_score)
    last = sp.StructuredPolicy(str(tmp_path / "w.last.pt")).model
    assert sp.validation_return(last, held) == pytest.approx(seen[-1][1])
    saved = sp.StructuredPolicy(str(tmp_path / "w.pt")).model.state_dict()
    assert all(torch.equal(saved[k], v) for k, v in result["model"].state_dict().items())
    assert (tmp_path / "w.warm.pt").exists()


def test_validation_seeds_lie_between_the_training_pool_and_the_held_out_seeds():
    held = list(scenarios("train", 500, "medium", start=sp.VALIDATION_START))
    pool_end = max(s["seed"] for s in scenarios("train", sp.TRAIN_POOL))
    assert pool_end < min(s["seed"] for s in held)
    assert max(s["seed"] for s in held) < SPLITS["heldout_seeds"]["seed_base"]
    # Picking among finished runs uses fresh train seeds again, past a validation of 2,000 and held-out ones.
    picked = list(scenarios("train", 2000, None, start=sp.SELECTION_START))
    assert max(s["seed"] for s in scenarios("train", 2000, None, start=sp.VALIDATION_START)) < picked[0]["seed"]
    assert picked[-1]["seed"] < SPLITS["heldout_seeds"]["seed_base"]


def test_compare_scores_checkpoints_on_fresh_train_seeds_and_names_the_best(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sp, "SELECTION_EPISODES", 6)
    for name, seed in (("a", 0), ("b", 1)):  # two untrained scorers, saved as train() saves them
        torch.manual_seed(seed)
        model = sp.Scorer(sp.feature_dim())
        torch.save(
            {"dim": sp.feature_dim(), "hidden": 64, "weights": model.state_dict(), "reader": "train"},
            tmp_path / f"{name}.pt",
        )
    paths = [str(tmp_path / "a.pt"), str(tmp_path / "b.pt")]
    scores = sp.compare(paths)
    assert scores == sp.compare(paths) and set(scores) == set(paths)
    sp.main(["--compare", *paths])
    *rows, best = capsys.readouterr().out.strip().splitlines()
    printed = {path: float(score) for score, path in (r.split() for r in rows)}
    assert set(printed) == set(paths) and best.endswith(": " + max(printed, key=printed.get))
    with pytest.raises(SystemExit):
        sp.main(["--compare", str(tmp_path / "missing.pt")])
    assert "no checkpoint at" in capsys.readouterr().err


def test_a_ships_two_runs_are_told_apart():
    """The release-candidate run and the deploy run are both ci runs on the ship proposal;
    inspecting one or the other must look different, or a policy cannot learn which to open."""
    env = ReleaseOpsToolEnv()
    view = sp.Tracker(
        json.loads(
            env.reset(
                family="release_manager_ships_before_evidence",
                seed=4,
                difficulty="easy",
                archetype_mix="careful_ci__careful_qa",
            )
        )
    )
    while view.board["phase"] != "ship_decision":
        p = view.pending()[0]
        view.note_call("approve_proposal", {"proposal_id": p["id"]})
        view.update(json.loads(env.approve_proposal(p["id"])))
    ship = next(p for p in view.pending() if p["request"] == "ship_release_candidate")
    inspections = {
        args["run_id"]: x
        for tool, args, x in sp.candidates(view)
        if tool == "inspect_ci_run" and args["run_id"] in ship["refs"]
    }
    assert len(inspections) == 2
    rc, deploy = (inspections[r] for r in ship["refs"])
    assert rc != deploy


def test_the_kl_anchor_is_zero_at_the_reference_and_grows_away_from_it():
    _, view = tracker()
    x = torch.tensor([c[2] for c in sp.candidates(view)])
    traces, advantages = [[(x, 0)]], [0.0]
    torch.manual_seed(0)
    model = sp.Scorer(x.shape[1])
    same = copy.deepcopy(model)
    other = sp.Scorer(x.shape[1])
    plain = sp.policy_loss(model, traces, advantages, 0.0)
    assert torch.isclose(sp.policy_loss(model, traces, advantages, 0.0, same, 1.0), plain)
    assert sp.policy_loss(model, traces, advantages, 0.0, other, 1.0) > plain


def test_the_exported_weights_make_the_same_greedy_choices_without_torch(tmp_path):
    """The web board and the Space image play the policy from its JSON export in plain Python;
    rounding the weights must not change a single greedy choice."""
    from releaseops_arena.policies.trained import TrainedPolicy, load_weights

    torch.manual_seed(11)
    model = sp.Scorer(sp.feature_dim(), 16)
    torch.save({"dim": sp.feature_dim(), "hidden": 16, "weights": model.state_dict()}, tmp_path / "w.pt")
    sp.export(tmp_path / "w.pt", tmp_path / "w.json")
    same, total = sp.greedy_agreement(
        model, load_weights(tmp_path / "w.json"), list(scenarios("train", 120)), walk=random.Random(0)
    )
    assert total >= 1000 and same == total
    # And as a policy through the harness: the same calls as the torch policy, episode by episode.
    from releaseops_arena.policies import play

    for scenario in scenarios("heldout_seeds", 6):
        ours, theirs = (
            play(p, scenario) for p in (TrainedPolicy(tmp_path / "w.json"), sp.StructuredPolicy(str(tmp_path / "w.pt")))
        )
        assert [(s["tool"], s["arguments"]) for s in ours["steps"]] == [
            (s["tool"], s["arguments"]) for s in theirs["steps"]
        ]


def test_the_features_have_one_home():
    from releaseops_arena.policies import trained as trained_policy

    assert sp.features is trained_policy.features and sp.candidates is trained_policy.candidates


def reading_of(view, p):
    from releaseops_arena.policies.trained import read

    return read(view, p)


def test_the_planners_reading_moves_with_every_cue_it_weighs():
    """The posterior of a site moves with its proposer's record and hint, its voice and its confidence,
    and the reading points inspections at the artifact that settles the site."""
    _, view = tracker(seed=5)
    site = next(p for p in view.pending() if reading_of(view, p)["rule"])
    base = reading_of(view, site)
    assert 0.0 < base["prob"] < 1.0 and base["decisive"] in site["refs"]
    worse = copy.deepcopy(view)
    for w in worse.board["worker_stats"]:
        if w["worker"] == site["worker"]:
            w["recent"] = {"correct": 0, "incorrect": 4}
    assert reading_of(worse, site)["prob"] > base["prob"], "track record"
    for change in (
        {"confidence": "low" if site["confidence"] != "low" else "high"},
        {"claim": "Certain: " + site["claim"]},
    ):
        assert reading_of(view, {**site, **change})["prob"] != base["prob"], change
    inspect = [
        x
        for tool, args, x in sp.candidates(view)
        if tool.startswith("inspect") and next(iter(args.values())) in site["refs"]
    ]
    at = len(inspect[0]) - sp.READING_DIM + 7  # the reading's "opens the decisive artifact" entry
    assert sorted(x[at] for x in inspect) == [0.0] * (len(inspect) - 1) + [1.0]


def held_out_sites(view):
    """The proposals a held-out mechanism puts on the board, by their claims (the test may know)."""
    from releaseops_arena.mechanisms import SEEN_MECHANISMS
    from releaseops_arena.policies.base import wording_of

    return [p for p in view.pending() if (wording_of(p["claim"]) or ("",))[0] not in ("", *SEEN_MECHANISMS)]


def test_the_train_reader_reads_a_held_out_familys_own_sites_as_unknown():
    """Reader "train" knows the train families' mechanisms only: a held-out mechanism's site gets no
    rule, posterior, decisive artifact or wording kind (the policy must go by the board and the
    evidence), while the sites of the seen mechanisms on the same boards are still read. Reader "all"
    knows the held-out mechanisms too, which is why a policy reading with it has hand-coded knowledge
    of the unseen-family slice."""
    from releaseops_arena.policies.trained import _planner, read

    unknown = known = 0
    train = _planner("train")
    for scenario in scenarios("unseen_family", 30, "medium"):
        view = sp.Tracker(json.loads(ReleaseOpsToolEnv().reset(**scenario)))
        held = held_out_sites(view)
        for p in view.pending():
            r = read(view, p, train)
            assert set(r) == {
                "prob",
                "rule",
                "decisive",
                "decisive_seen",
                "fix",
                "request_kind",
                "delay",
                "ship",
                "kind",
                "risk",
                "answer",
                "approved",
                "over_ship",
                "in_cut",
            }
            if p in held and p["request"] != "open_deploy_gate":
                assert (r["rule"], r["prob"], r["decisive"], r["kind"]) == (None, 0.0, None, None), p["claim"]
                assert read(view, p, _planner("all"))["rule"] is not None
                unknown += 1
            elif r["rule"]:
                known += 1
    assert unknown >= 15 and known >= 30


def test_the_agnostic_reader_places_a_held_out_site_by_its_request_and_risk():
    """Reader "agnostic" knows what "train" knows, but reads a site whose request no known mechanism
    makes by the slot its risk tags name: the rule and decisive artifact the full reader gives it, a
    posterior from the board, and still no wording kind (it knows none of that mechanism's phrases)."""
    from releaseops_arena.policies.trained import _planner, read

    agnostic, every = _planner("agnostic"), _planner("all")
    placed = 0
    for scenario in scenarios("unseen_family", 30, "medium"):
        view = sp.Tracker(json.loads(ReleaseOpsToolEnv().reset(**scenario)))
        for p in held_out_sites(view):
            if p["request"] == "open_deploy_gate":
                continue
            r, full = read(view, p, agnostic), read(view, p, every)
            assert (r["rule"], r["decisive"]) == (full["rule"], full["decisive"]) and r["rule"], p["claim"]
            assert 0.0 < r["prob"] < 1.0 and r["kind"] is None
            placed += 1
    assert placed >= 15


def test_on_the_train_split_the_readers_place_the_same_sites():
    """Both readers find every train site's rule and decisive artifact; their posteriors differ, because
    "all" also weighs the held-out waiver family, whose requests are all seen ones, as possible."""
    from releaseops_arena.policies.trained import _planner, read

    differ = 0
    for scenario in scenarios("train", 8):
        view = sp.Tracker(json.loads(ReleaseOpsToolEnv().reset(**scenario)))
        for p in view.pending():
            train, every = read(view, p, _planner("train")), read(view, p, _planner("all"))
            assert [train[k] for k in ("rule", "decisive", "kind")] == [every[k] for k in ("rule", "decisive", "kind")]
            differ += train["prob"] != every["prob"]
    assert differ
    with pytest.raises(ValueError, match="unknown reader 'heldout'; valid: agnostic, train, all"):
        sp.candidates(view, "heldout")


def test_reading_dropout_withholds_whole_readings_once_per_proposal():
    from releaseops_arena.policies.trained import read

    _, view = tracker(seed=5)
    assert sp.ReadingDropout(0.0, random.Random(0))(view) == set()
    dropout = sp.ReadingDropout(1.0, random.Random(0))
    masked = dropout(view)
    assert masked == {p["id"] for p in view.pending() if p["request"] != "ship_release_candidate"}
    site = next(p for p in view.pending() if read(view, p)["rule"])
    hidden = read(view, site, masked=masked)
    assert (hidden["rule"], hidden["prob"], hidden["decisive"], hidden["kind"]) == (None, 0.0, None, None)
    assert dropout(view) is masked  # drawn once: the same proposals stay masked for the episode
    assert sp.features(view, "approve", site, reading=hidden) != sp.features(view, "approve", site)


def test_the_ships_risk_adds_up_the_sites_approved_unseen():
    env, view = tracker(seed=5)
    approved = []
    while view.board["phase"] != "ship_decision":
        p = view.pending()[0]
        if reading_of(view, p)["rule"]:
            approved.append(reading_of(view, p))
        view.note_call("approve_proposal", {"proposal_id": p["id"]})
        view.update(json.loads(env.approve_proposal(p["id"])))
    ship = next(p for p in view.pending() if p["request"] == "ship_release_candidate")
    risk = reading_of(view, ship)["risk"]
    for rule in risk:
        expect = 1.0
        for r in approved:
            expect *= 1 - r["prob"] if r["rule"] == rule else 1.0
        assert risk[rule] == pytest.approx(1 - expect, abs=0.05), rule
    assert max(risk.values()) > 0


@pytest.mark.parametrize("share", ["-0.1", "1.5"])
def test_a_reading_dropout_outside_0_to_1_is_refused_with_the_valid_range(share, capsys):
    with pytest.raises(SystemExit):
        sp.main(["--reading-dropout", share])
    assert f"--reading-dropout is a share of proposals, from 0 to 1; got {float(share)}" in capsys.readouterr().err


def test_the_cloned_planner_knows_only_what_the_reader_knows():
    """The teacher of a `train`-reader clone weighs only train families on a train board, so its calls
    carry no knowledge of the held-out families; with reader `all` it is the planner as shipped."""
    from releaseops_arena.policies import POLICIES

    scenario = next(scenarios("train", 1, "medium"))
    for reader, families in (("train", SPLITS["train"]["families"]), ("all", POLICIES["planner"].known)):
        expert = sp.teach(POLICIES["planner"](), reader)
        expert.begin(ReleaseOpsToolEnv().reset(**scenario))
        assert set(expert.families) <= set(families) and expert.families
        assert expert.known == tuple(families)
    held_out = set(SPLITS["unseen_family"]["families"])
    assert not held_out & set(sp.teach(POLICIES["planner"](), "train").known)


def test_cloning_counts_the_expert_calls_it_cannot_imitate():
    """Every expert call is counted, and one that is not among the candidates (the random policy's
    invalid calls; none of the planner's) is counted as dropped rather than vanishing unseen."""
    pool = list(scenarios("train", 6, "medium"))
    for expert, dropped in (("planner", lambda n: n == 0), ("random", lambda n: n > 0)):
        counts = {}
        traces = sp.expert_traces(expert, pool, "train", 0.3, counts=counts)
        assert counts["calls"] == sum(len(t) for t in traces) + counts["dropped"] > 6
        assert dropped(counts["dropped"]), (expert, counts)


def test_the_train_reader_knows_no_held_out_mechanisms_fix_or_request():
    """The waiver's canary re-run is a fix and the reopen's close_ticket is paperwork only to a reader
    that knows those mechanisms; to the train reader both read as an unknown change, while a train
    mechanism's fix still reads as a fix. A withheld proposal (`whole` dropout) hides both too."""
    from releaseops_arena.policies.trained import _planner, read

    env, view = tracker()
    p = dict(view.pending()[0])
    rerun = {**p, "request": "run_deploy_checks", "claim": "Running the full canary now; gate opens on green."}
    close = {**p, "request": "close_ticket"}
    train_fix = {**p, "request": "merge_pr", "claim": "Real fix merged; payment test re-enabled and green."}
    train, every = _planner("train"), _planner("all")
    assert not read(view, rerun, train)["fix"] and read(view, rerun, every)["fix"]
    assert read(view, close, train)["request_kind"] == "change"
    assert read(view, train_fix, train)["fix"] and read(view, train_fix, every)["fix"]
    assert sp.features(view, "approve", close, reading=read(view, close, train)) != sp.features(
        view, "approve", close, reading=read(view, close, every)
    )
    whole = sp.Withheld({train_fix["id"]})
    whole.whole = True
    assert (
        not read(view, train_fix, train, whole)["fix"] and read(view, train_fix, train, sp.Withheld({p["id"]}))["fix"]
    )


def test_the_expert_played_in_parallel_gives_the_same_traces_and_counts():
    """The clone's traces do not depend on how many processes play the expert: the same candidate
    features, the same chosen calls, in pool order, and the same call counts."""
    pool = list(scenarios("train", 5, "hard"))
    one, two = {}, {}
    serial = sp.expert_traces("planner", pool, "agnostic", counts=one, workers=1)
    parallel = sp.expert_traces("planner", pool, "agnostic", counts=two, workers=2)
    assert one == two and one["calls"] > 5
    assert [[i for _, i in t] for t in serial] == [[i for _, i in t] for t in parallel]
    assert all(torch.equal(a, b) for s, p in zip(serial, parallel) for (a, _), (b, _) in zip(s, p))


def test_the_budget_reaches_the_sites_the_planner_inspects_and_no_more():
    """`in_cut` marks the open sites the review budget reaches as the planner ranks them: every site the
    planner inspects while the site is pending is among them, and there are never more of them than
    looks left."""
    from releaseops_arena.policies import POLICIES
    from releaseops_arena.policies.trained import _planner, budget_cut, read

    looked = 0
    for scenario in scenarios("train", 12, "hard"):
        env, expert = ReleaseOpsToolEnv(), sp.teach(POLICIES["planner"](), "agnostic")
        obs = env.reset(**scenario)
        view = sp.Tracker(json.loads(obs))
        expert.begin(obs)
        reader = _planner("agnostic")
        while not env.done:
            readings = {p["id"]: read(view, p, reader) for p in view.pending()}
            budget_cut(view, reader, readings)
            cut = [pid for pid, r in readings.items() if r["in_cut"]]
            assert len(cut) <= max(0, view.board["review_budget_remaining"])
            tool, args = expert.act(view)
            ref = next(iter(args.values()))
            site = [pid for pid, r in readings.items() if tool.startswith("inspect_") and r["decisive"] == ref]
            if site:
                assert set(site) <= set(cut), (scenario, ref, readings)
                looked += 1
            view.note_call(tool, args)
            view.update(json.loads(getattr(env, tool)(**args)))
    assert looked > 5
