"""Benchmark v3: where to look decides the outcome, and reading behaviour tells where to look.

One test per principle of the v3 design (docs/environment.md): more sites than the budget covers,
cues that rank (a track record moves the posterior as published, and the planner's claim reader
reads every wording in every voice), cues that generalise to a held-out mechanism, information that
stays bounded, and an attention oracle that reads the truth only to choose what to inspect.
"""

from __future__ import annotations

import json
import math

import pytest

from releaseops_arena import workers as cues
from releaseops_arena.catalog import ALL_FAMILIES, ARCHETYPES
from releaseops_arena.episode import Episode
from releaseops_arena.mechanisms import REGISTRY, WORDINGS
from releaseops_arena.policies import AttentionOracle, FixedOrder, Naive, TruthReader, play
from releaseops_arena.policies.base import evidence_violation, wording_of, wordings_of
from releaseops_arena.policies.planner import ReferencePlanner, _archetype_posterior
from releaseops_arena.rendering import View
from releaseops_arena.scenario_builder import DIFFICULTY, mechanism_of, site_keys
from releaseops_arena.splits import scenarios
from releaseops_arena.tool_env import ReleaseOpsToolEnv

# ------------------------------------------------------------ principle 1: more sites than budget


@pytest.mark.parametrize("difficulty", ["medium", "hard"])
def test_every_release_has_more_sites_than_its_review_budget_covers(difficulty):
    for family in ALL_FAMILIES:
        assert len(site_keys(family, difficulty)) >= 2 * int(DIFFICULTY[difficulty]["budget"]), family


def _unwatched_site_case():
    """A train board whose one shortcut is a triage site the fixed order does not look at (it has one
    look at triage and spends it on the card of a worker it ranks higher), put up by a worker whose
    record is bad while every other worker's record is clean."""
    assert FixedOrder.DEFAULT["triage_quota"] == 1 and FixedOrder.DEFAULT["workers"], "the script changed"
    last = FixedOrder.DEFAULT["workers"][-1]
    for s in scenarios("train", 4000, "medium"):
        w = Episode(**s).world
        if len(w.hazards) != 1:
            continue
        (site,) = w.hazards
        triage = {k: v for k, v in w.site_workers.items() if REGISTRY[mechanism_of(k)].stage == 0}
        if site not in triage or triage[site] != last or set(triage.values()) == {last}:
            continue
        records = {name: card.recent_incorrect for name, card in w.workers.items()}
        if records[last] >= 5 and all(k <= 1 for name, k in records.items() if name != last):
            return s, site
    raise AssertionError("no such board in 4,000 train scenarios")


def test_a_fixed_order_misses_what_the_planner_catches_on_a_constructed_board():
    scenario, site = _unwatched_site_case()
    fixed, planner = play(FixedOrder(), scenario), play(ReferencePlanner(), scenario)
    assert fixed["metrics"]["outcome"] == "unsafe_ship"
    assert planner["metrics"]["outcome"] == "safe_ship"
    # The planner found it by looking where the record pointed, not by luck: it read that artifact.
    world = Episode(**scenario).world
    decisive = next(
        r
        for pid in world.active
        for r in world.proposals[pid].card.refs
        if world.proposals[pid].truth.kind == mechanism_of(site)
        and world.reveals.get(r)
        and r.startswith(REGISTRY[mechanism_of(site)].decisive)
    )
    looked = [next(iter(st["arguments"].values())) for st in planner["steps"] if st["tool"].startswith("inspect")]
    assert decisive in looked
    assert decisive not in [next(iter(st["arguments"].values())) for st in fixed["steps"]]


def test_attention_decides_the_outcome_on_the_train_split():
    """Knowing where to look is worth a lot over the best order that reads no cue (a quick sample; the
    calibration report measures it on every slice)."""
    sample = list(scenarios("train", 300, "medium", start=20_000))
    fixed = sum(play(FixedOrder(), s)["metrics"]["safe_ship"] for s in sample) / len(sample)
    attention = sum(play(AttentionOracle(), s)["metrics"]["safe_ship"] for s in sample) / len(sample)
    assert attention >= 0.95 and attention - fixed >= 0.25, (attention, fixed)


# ------------------------------------------------------------ principle 2: cues rank, they do not decide


def test_a_track_record_shifts_the_posterior_as_published():
    stats = {"worker": "qa_triage", "hint": "veteran", "recent": {"correct": 10, "incorrect": 0}}
    previous = None
    for k in range(cues.HISTORY + 1):
        stats["recent"] = {"correct": cues.HISTORY - k, "incorrect": k}
        post = _archetype_posterior(stats)
        like = {
            a: cues.ARCHETYPE_PRIOR[i]
            * cues.HINT_WEIGHTS[a][0]
            * math.comb(cues.HISTORY, k)
            * cues.ERROR_RATE[a] ** k
            * (1 - cues.ERROR_RATE[a]) ** (cues.HISTORY - k)
            for i, a in enumerate(ARCHETYPES)
        }
        z = sum(like.values())
        assert post == pytest.approx({a: v / z for a, v in like.items()})
        if previous is not None:
            assert post["careful"] < previous["careful"]  # every wrong task makes carelessness likelier
        previous = post


def test_a_worse_record_raises_a_sites_posterior_and_lowers_the_others():
    obs = ReleaseOpsToolEnv().reset(
        family="green_ci_disabled_payment_test", seed=3, difficulty="medium", archetype_mix="random"
    )
    planner = ReferencePlanner()
    planner.begin(obs)
    view = View(json.loads(obs))
    sites = [p for p in view.pending() if planner.site_of(p)]
    target = sites[0]
    others = [p for p in sites if p["worker"] != target["worker"]]
    assert others, "a board with sites of two workers"

    def with_record(incorrect):
        for w in view.board["worker_stats"]:
            if w["worker"] == target["worker"]:
                w["recent"] = {"correct": cues.HISTORY - incorrect, "incorrect": incorrect}
        return planner.beliefs(view)

    before, after = with_record(0), with_record(8)
    assert after[target["id"]] > before[target["id"]]
    assert all(after[p["id"]] < before[p["id"]] for p in others)  # the shortcuts are few: blame moves
    assert 0.0 < after[target["id"]] < 0.95  # a bad record ranks a site; it does not settle it


@pytest.mark.parametrize("difficulty", ["medium", "hard"])
def test_every_visible_feature_together_ranks_sites_without_settling_them(difficulty):
    """The fitted cue reader (a logistic regression on every visible feature) carries information, but
    far less than the label's entropy: no visible combination lets a policy skip the evidence."""
    from research.exploits import collect_rich_rows, fit_cue_model

    model = fit_cue_model(difficulty, 600)
    bits = model.bits(collect_rich_rows("train", 300, difficulty, start=30_000))
    assert 0.02 < bits["bits"] < 0.5 * bits["label_entropy"], bits


def test_the_planners_claim_reader_reads_every_wording_of_every_mechanism_in_every_voice():
    for m in REGISTRY.values():
        texts = [("explicit", m.explicit), ("plain", m.plain), *enumerate(m.phrases)]
        for kind, text in texts:
            text = text.format(ticket="ticket_1234", test="test_card_capture")
            for voice in cues.VOICES:
                claim = cues.voiced(voice, text)
                assert cues.voice_of(claim) == voice, claim
                found = wordings_of(claim)
                assert (m.key, kind) in found, (claim, found)
                # On medium and hard a phrase is read as the phrase, never as the easy text it shares.
                if isinstance(kind, int):
                    assert isinstance(wording_of(claim)[1], int), claim
                    assert wording_of(claim)[1] == kind or (m.key, wording_of(claim)[1]) in found
    assert len(WORDINGS) == 5 * len(REGISTRY)


# ------------------------------------------------------------ principle 3: cues that generalise


def test_a_held_out_mechanisms_site_is_ranked_by_its_proposers_history():
    """The cue that points at a held-out mechanism's site is the worker's record, which no mechanism's
    wording carries: a worse record raises the posterior of the held-out site."""
    for seed in range(200):
        obs = ReleaseOpsToolEnv().reset(
            family="qa_closes_p1_without_fix", seed=seed, difficulty="hard", archetype_mix="random"
        )
        view = View(json.loads(obs))
        planner = ReferencePlanner()
        planner.begin(obs)
        held = [p for p in view.pending() if p["request"] == "close_ticket"]
        if held:
            break
    site = held[0]
    readings = []
    for incorrect in (0, 7):  # a clean record against a bad one (in between, which archetype the
        for w in view.board["worker_stats"]:  # record favours can move the other cues' weight either way)
            if w["worker"] == site["worker"]:
                w["recent"] = {"correct": cues.HISTORY - incorrect, "incorrect": incorrect}
        readings.append(planner.doubt(view, site)[0])
    assert readings[0] < readings[1], readings


# ------------------------------------------------------------ the attention oracle


class _Spy(TruthReader):
    def __init__(self, episode, answer=True):
        super().__init__(episode)
        self.asked: list[str] = []
        self.answer = answer

    def __getattribute__(self, name):
        if (
            not name.startswith("_")
            and name not in ("asked", "answer")
            and callable(object.__getattribute__(self, name))
        ):
            object.__getattribute__(self, "asked").append(name)
        return object.__getattribute__(self, name)

    def undiscovered_reveal(self, refs):
        return super().undiscovered_reveal(refs) if self.answer else None


def _play_spied(scenario, answer=True):
    env = ReleaseOpsToolEnv()
    obs = env.reset(**scenario)
    policy = AttentionOracle()
    policy.truth = spy = _Spy(env._episode, answer)
    policy.begin(obs)
    view = View(json.loads(obs))
    calls = []
    while not env.done:
        tool, args = policy.act(view)
        calls.append((tool, args, {k: dict(v) for k, v in view.evidence.items()}))
        view.update(json.loads(env._call_tool(tool, **args)))
    return env, spy, calls


def test_the_attention_oracle_reads_the_truth_only_to_choose_what_to_inspect():
    for s in scenarios("heldout_seeds", 40, "medium"):
        env, spy, calls = _play_spied(s)
        assert set(spy.asked) <= {"undiscovered_reveal"}, spy.asked
        for tool, args, evidence in calls:
            if tool == "block_proposal":  # every block is one its own evidence (or a delay request) justifies
                p = next(q for q in env._episode.world.proposals.values() if q.card.id == args["proposal_id"])
                shown = {evidence_violation(evidence[r]) for r in p.card.refs if r in evidence}
                assert args["rule_id"] in shown or p.card.request in ("delay_release", "escalate_ticket_p1"), (
                    tool,
                    args,
                )
    # Told nothing, it looks at nothing and plays like the naive supervisor.
    for s in scenarios("heldout_seeds", 20, "medium"):
        env, _, calls = _play_spied(s, answer=False)
        assert not any(tool.startswith("inspect") for tool, _, _ in calls)
        assert env.metrics["outcome"] == play(Naive(), s)["metrics"]["outcome"] or any(
            tool == "block_proposal" for tool, _, _ in calls
        )


@pytest.mark.parametrize("split", ["train", "unseen_mix"])
def test_the_shortcut_count_is_the_published_one_on_every_slice_and_fits_the_budget(split):
    """The count is drawn before anything about the workers, so even a mix that pins two bad workers
    has the published share of clean releases, and no release outgrows what the budget can inspect."""
    counts = [0] * 8
    for s in scenarios(split, 1000, "medium"):
        w = Episode(**s).world
        assert len(w.hazards) <= w.budget
        counts[len(w.hazards)] += 1
    for k, p in enumerate(cues.SHORTCUT_COUNT):
        assert abs(counts[k] / 1000 - p) < 0.05, (k, counts)


def test_a_worker_with_a_bad_record_decides_far_more_shortcuts():
    """The generator side of "history ranks sites": among the sites of train releases, those decided by
    a worker whose record shows four or more wrong tasks are shortcuts much more often than those of a
    worker with at most one. (Records or hazards drawn without the worker would make these equal.)"""
    tally = {"bad": [0, 0], "good": [0, 0]}
    for s in scenarios("train", 600, "medium", start=40_000):
        w = Episode(**s).world
        for key, worker in w.site_workers.items():
            k = w.workers[worker].recent_incorrect
            group = "bad" if k >= 4 else "good" if k <= 1 else None
            if group:
                tally[group][0] += key in w.hazards
                tally[group][1] += 1
    bad, good = (tally[g][0] / tally[g][1] for g in ("bad", "good"))
    assert bad >= 2 * good, tally


def test_the_planner_beats_the_fixed_order_on_train_releases():
    """The benchmark's headline on a quick sample: reading the workers beats looking in the searched
    fixed order by a wide margin (the calibration report measures every slice)."""
    sample = list(scenarios("train", 300, "medium", start=50_000))
    fixed = sum(play(FixedOrder(), s)["metrics"]["safe_ship"] for s in sample) / len(sample)
    planner = sum(play(ReferencePlanner(), s)["metrics"]["safe_ship"] for s in sample) / len(sample)
    assert planner - fixed >= 0.10, (planner, fixed)
