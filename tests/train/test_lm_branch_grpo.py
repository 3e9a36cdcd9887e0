"""Branch-point GRPO (research/lm_branch_grpo.py): where a group branches, what each sample scores, which way an
update moves the model, and which tasks it trains on."""

import json
import random

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from research import lm_branch_grpo as bg  # noqa: E402


def _run(outcome, refused):
    steps = [{"tool": "approve_proposal", "error": "refused"} if r else {"tool": "approve_proposal"} for r in refused]
    return {"steps": steps, "metrics": {"outcome": outcome}}


def test_a_failure_branches_at_the_turn_of_its_first_refused_call_and_the_turn_before():
    rng = random.Random(0)
    run = _run("missed_deadline", [False, False, True, True, True])
    assert bg.branch_turns(run, 5, [1, 2, 3, 4, 5], rng, 0.0) == [2, 3]
    assert bg.branch_turns(run, 5, [1, 2, 3, 4, 5], rng, 0.0, before=False) == [3]  # --no-before: its own turn only
    # two calls in one turn: the branch is the refused call's turn, not its index
    assert bg.branch_turns(run, 3, [1, 1, 2, 3, 3], rng, 0.0) == [1, 2]
    assert bg.branch_turns(_run("missed_deadline", [True]), 1, [1], rng, 0.0) == [1]  # no turn before the first


def test_a_failure_without_a_refusal_branches_at_its_last_turn_and_a_safe_ship_only_by_its_share():
    rng = random.Random(0)
    unsafe = _run("unsafe_ship", [False] * 4)
    for _ in range(20):
        turns = bg.branch_turns(unsafe, 4, [1, 2, 3, 4], rng, 0.0)
        assert 4 in turns and all(1 <= t <= 4 for t in turns)
    safe = _run("safe_ship", [False] * 4)
    assert all(bg.branch_turns(safe, 4, [1, 2, 3, 4], rng, 0.0) == [] for _ in range(20))
    assert all(len(bg.branch_turns(safe, 4, [1, 2, 3, 4], rng, 1.0)) == 1 for _ in range(20))
    assert bg.branch_turns(_run("missed_deadline", []), 0, [], rng, 1.0) == []  # no turn at all: nothing to branch


def test_advantages_are_centred_and_ordered_as_the_returns():
    a = bg.advantages([1.0, -1.0, 1.0, 0.0])
    assert sum(a) == pytest.approx(0.0, abs=1e-9)
    assert a[0] == a[2] > a[3] > a[1]


class FakePolicy:
    """A greedy episode of two turns; `sample` answers the second turn's prompt with fixed calls."""

    def __init__(self, samples):
        self.turn_log = [([1, 2, 3], [7]), ([1, 2, 3, 7, 4], [8])]
        self.samples, self.branch, self.forced = samples, None, None

    def sample(self, ids, k):
        assert ids == [1, 2, 3, 7, 4]  # the branch turn's own prompt, the greedy turns before it included
        return self.samples[:k]


def test_a_group_replays_each_new_call_once_and_weights_it_by_its_advantage(monkeypatch):
    replayed = []

    def fake_play(policy, scenario):
        replayed.append((policy.branch, tuple(policy.forced)))
        return {"return": {(9,): 1.0, (5,): -1.0}[tuple(policy.forced)]}

    monkeypatch.setattr(bg, "play", fake_play)
    policy = FakePolicy([[8], [9], [9], [5]])
    g = bg.group(policy, {}, 2, greedy_return=-1.5, samples=4)
    # the greedy call keeps the greedy episode's return; each other call is played out once, from turn 2
    assert sorted(replayed) == [(2, (5,)), (2, (9,))]
    assert policy.branch is None and policy.forced is None
    assert g["prompt"] == [1, 2, 3, 7, 4] and g["returns"] == [-1.5, 1.0, 1.0, -1.0]
    w = g["completions"]
    assert w[(9,)] > 0 > w[(5,)] > w[(8,)]
    assert sum(w.values()) == pytest.approx(0.0, abs=1e-9)
    replayed.clear()
    assert bg.group(FakePolicy([[8]] * 4), {}, 2, -1.5, 4) is None  # every sample the greedy call: nothing to learn
    assert replayed == []


def test_a_guided_group_adds_the_planner_call_and_judges_it_by_its_return(monkeypatch):
    monkeypatch.setattr(bg, "guided", lambda policy, scenario, turn, prompt: ([6], 1.2))
    # every sample is the greedy call: unguided, nothing to learn; guided, the planner's way out is raised
    g = bg.group(FakePolicy([[8]] * 4), {}, 2, -1.5, 4, guide=True)
    assert g["returns"] == [-1.5] * 4 + [1.2]
    assert g["completions"][(6,)] > 0 > g["completions"][(8,)]
    assert sum(g["completions"].values()) == pytest.approx(0.0, abs=1e-9)
    assert g["planner"] == {"return": 1.2, "best": True}
    # a planner call that does worse than the samples is lowered, not imitated
    monkeypatch.setattr(bg, "play", lambda policy, scenario: {"return": 1.0})
    monkeypatch.setattr(bg, "guided", lambda policy, scenario, turn, prompt: ([6], -2.0))
    g = bg.group(FakePolicy([[9]] * 4), {}, 2, -1.5, 4, guide=True)
    assert g["completions"][(6,)] < 0 < g["completions"][(9,)] and g["planner"]["best"] is False
    monkeypatch.setattr(bg, "guided", lambda policy, scenario, turn, prompt: None)  # no planner call there
    assert bg.group(FakePolicy([[8]] * 4), {}, 2, -1.5, 4, guide=True) is None


def test_the_planner_call_is_played_at_the_branch_turn_as_the_model_writes_a_call(tmp_path):
    from releaseops_arena.policies.planner import ReferencePlanner

    source = _tiny_checkpoint(tmp_path)
    policy = bg.BranchPolicy(str(source), 1.0)
    policy.max_new_tokens = 8  # a random tiny model writes no call: its episode stops after its first turn
    scenario = bg.task_scenario("train", 777, "easy")
    bg.play(policy, scenario)
    prompt = policy.turn_log[0][0]
    planner_first = bg.play(ReferencePlanner(), scenario)["steps"][0]
    policy.guide_turn = 1
    run = bg.play(policy, scenario)
    tokens = policy.guided
    policy.guide_turn = policy.guided = policy.branch = policy.forced = None
    # the engine received the planner's own call, from tokens the model could have written
    assert run["steps"][0]["tool"] == planner_first["tool"] and "error" not in run["steps"][0]
    assert run["steps"][0]["arguments"] == planner_first["arguments"]
    assert tokens[-1] == policy.tokenizer.eos_token_id and policy.branch_prompt == prompt
    assert bg.guided(policy, scenario, 1, prompt) == (tokens, run["return"])
    assert bg.guided(policy, scenario, 1, prompt + [0]) is None  # a replay that drifted from the greedy prompt


def test_an_update_raises_the_better_call_and_lowers_the_worse_and_drops_the_stale_cache():
    from research.copy_model import build_pointer_model, result_tokens
    from training.tiny_model import build_tokenizer

    tokenizer = build_tokenizer()
    model = build_pointer_model(tokenizer, hidden=32, layers=1, seed=3)
    model.config.result_token_ids = list(result_tokens(tokenizer))
    model.eval()

    class Policy:
        forgotten = 0

        def forget_cache(self):
            Policy.forgotten += 1

    policy = Policy()
    policy.torch, policy.model = torch, model

    def ids(text):
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    prompt, good, bad = ids('{"id":"p17"} {"id":"p4"} approve "'), ids('p4"'), ids('p17"')

    def logp(out):
        with torch.no_grad():
            n = len(prompt)
            logits = model(input_ids=torch.tensor([prompt + out])).logits[0, n - 1 : n - 1 + len(out)]
            return float(torch.log_softmax(logits, -1).gather(-1, torch.tensor(out).unsqueeze(-1)).sum())

    before = logp(good), logp(bad)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    g = {"prompt": prompt, "completions": {tuple(good): 0.5, tuple(bad): -0.5}, "returns": [1.0, -1.0]}
    for _ in range(3):
        bg.update(policy, optimizer, [g])
    assert logp(good) > before[0] and logp(bad) < before[1]
    assert Policy.forgotten == 3 and not model.training


def test_it_trains_on_train_split_tasks_from_start_only_and_leaves_a_run_lm_select_reads(tmp_path, monkeypatch):
    from research.lm_learnability import grpo_checkpoints

    source = _tiny_checkpoint(tmp_path)
    drawn = []
    real = bg.task_scenario

    def recording(split, index, difficulty):
        drawn.append((split, index, difficulty))
        return real(split, index, difficulty)

    monkeypatch.setattr(bg, "task_scenario", recording)
    monkeypatch.setattr(bg.LLMPolicy, "__init__", _short_turns(bg.LLMPolicy.__init__))
    out = tmp_path / "branch"
    info = bg.main([str(source), "--out", str(out), "--minutes", "0.2", "--samples", "2", "--start", "777"])
    assert drawn and all(d[0] == "train" and d[2] == "easy" for d in drawn)
    assert [d[1] for d in drawn] == list(range(777, 777 + len(drawn)))
    run = json.loads((out / "run.json").read_text())
    assert run == info
    assert run["tasks"] == {"split": "train", "difficulty": "easy", "start": 777, "end": 777 + len(drawn)}
    assert grpo_checkpoints(out, run["global_step"])[-1] == (run["global_step"], out)
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()
    with pytest.raises(SystemExit):
        bg.main([str(source), "--out", str(out), "--samples", "1"])


def _short_turns(init):
    """A random tiny model writes no call; cap its turns' tokens so the test plays many episodes quickly."""

    def wrapped(self, checkpoint, *args, **kwargs):
        init(self, checkpoint, max_new_tokens=8)

    return wrapped


def _tiny_checkpoint(tmp_path):
    """An untrained one-layer copy model and its tokenizer, saved as a warm start's folder."""
    from research.copy_model import build_pointer_model, register, result_tokens
    from training.tiny_model import build_tokenizer

    register()
    tokenizer = build_tokenizer()
    model = build_pointer_model(tokenizer, hidden=32, layers=1, seed=3)
    model.config.result_token_ids = list(result_tokens(tokenizer))
    source = tmp_path / "sft"
    model.save_pretrained(source)
    tokenizer.save_pretrained(source)
    return source
