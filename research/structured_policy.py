"""A small network over the public observation, trained with group-relative policy gradients.
Over 400 lines: the network, its cloning, its GRPO loop and its export belong to one experiment.

Each turn, every valid tool call on the board is a candidate (approve or block
each pending proposal under each relevant rule, inspect each of its artifacts,
ask its worker each question, hold); a feature vector describes the candidate
from visible information only (the board, worker stats, claims, evidence and
answers seen so far, and a reference planner's reading of each proposal with
the knowledge `--reader` names: by default the train families' mechanisms
only, a site of any other placed by its request and risk, see
`releaseops_arena.policies.trained.READERS`); an MLP scores it; the policy is a
softmax over the valid candidates, so it can never make an invalid call. Training samples a group of
episodes per `train`-split scenario and weights log-probabilities by the
group-normalised return (GRPO-style advantages), with a KL penalty towards
the behaviour-cloned start. The greedy policy is scored on validation seeds of
the `train` split as it learns, and the best checkpoint is kept (`.pt`; the
final weights go to `.last.pt`, the cloned start to `.warm.pt`).

    python -m research.structured_policy --preset published --out runs/structured.pt   # the shipped recipe
    python -m research.structured_policy --compare runs/a.pt runs/b.pt                   # pick among runs
    python -m research.structured_policy --export runs/structured.pt releaseops_arena/policies/trained_policy.json

The export writes the weights as JSON for `releaseops_arena.policies.trained` (the policy
`trained`, which plays them in plain Python: the web board and the Space image need no torch).
"""

from __future__ import annotations

import argparse
import copy
import json
import multiprocessing as mp
import random
import sys
import time
from pathlib import Path

import torch
from torch import nn

from releaseops_arena import ReleaseOpsToolEnv
from releaseops_arena.policies import Policy, TruthReader
from releaseops_arena.policies.planner import ReferencePlanner

# The features and candidates live in the engine, so the exported policy plays without torch;
# re-exported: the trainer's users read them from here too.
from releaseops_arena.policies.trained import (
    ACTIONS,  # noqa: F401
    DEFAULT_READER,
    FORMAT,
    READERS,
    READING_DIM,  # noqa: F401
    TARGET_DIM,  # noqa: F401
    candidates,
    check_reader,
    feature_dim,
    feature_maps,
    features,  # noqa: F401
    known_wordings,  # noqa: F401
    onehot,  # noqa: F401
    ref_features,  # noqa: F401
)
from releaseops_arena.policies.trained import teach as teach_reader
from releaseops_arena.rendering import View
from releaseops_arena.splits import scenarios

Tracker = View  # the one observation reader (it also remembers the supervisor's own calls), by its old name


class Scorer(nn.Module):
    def __init__(self, dim: int, hidden: int = 64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)


class Withheld(set):
    """Proposal ids whose reading is withheld; `whole`: their fix flag and request kind too."""

    whole = False


class ReadingDropout:
    """Withholds the reading of a random `share` of an episode's proposals (the ship excepted), drawn
    once per proposal: the reader cannot place a held-out family's own site, and a policy that never
    trained without a reading has no idea what to do then. Use one per episode."""

    def __init__(self, share: float, rng: random.Random, whole: bool = False):
        self.share, self.rng, self.drawn, self.masked = share, rng, set(), Withheld()
        self.masked.whole = whole

    def __call__(self, view: View) -> set:
        if self.share > 0:  # no draws at 0, so a run without dropout replays as before
            for pid, p in view.proposals.items():
                if pid not in self.drawn and p["request"] != "ship_release_candidate":
                    self.drawn.add(pid)
                    if self.rng.random() < self.share:
                        self.masked.add(pid)
        return self.masked


def rollout(
    model: Scorer,
    scenario: dict,
    rng: random.Random,
    greedy: bool = False,
    reader: str = DEFAULT_READER,
    dropout: float = 0.0,
    whole: bool = False,
) -> tuple[float, list, dict]:
    """One episode; returns (return, [(candidate features, chosen index)], metrics)."""
    env = ReleaseOpsToolEnv()
    view = View(json.loads(env.reset(**scenario)))
    trace = []
    masked = ReadingDropout(dropout, rng, whole)
    while not env.done:
        cands = candidates(view, reader, masked(view))
        x = torch.tensor([c[2] for c in cands])
        with torch.no_grad():
            logits = model(x)
        if greedy:
            i = int(torch.argmax(logits))
        else:
            probs = torch.softmax(logits, 0).tolist()
            i = rng.choices(range(len(cands)), weights=probs)[0]
        tool, args, _ = cands[i]
        trace.append((x, i))
        view.note_call(tool, args)
        view.update(json.loads(getattr(env, tool)(**args)))
    return env.reward, trace, env.metrics


class StructuredPolicy(Policy):
    """The trained network as a policy for the evaluation harness (greedy).

    `path` may end in `?reader=<name>` to play with another reader than the one the checkpoint was
    trained with (the harness's `structured:runs/x.pt?reader=train`); a checkpoint that names none
    was trained with "all"."""

    def __init__(self, path: str):
        self.name = f"structured:{path}"
        path, _, query = path.partition("?")
        if query and not query.startswith("reader="):
            raise ValueError(f"structured:{path}?{query}: the only option is ?reader=<{'|'.join(READERS)}>")
        state = torch.load(path, map_location="cpu", weights_only=True)
        self.model = Scorer(state["dim"], state["hidden"])
        self.model.load_state_dict(state["weights"])
        self.model.eval()
        self.reader = check_reader(query[len("reader=") :] if query else state.get("reader", "all"))

    def begin(self, observation: str) -> None:
        self.view = View(json.loads(observation))

    def observe(self, text: str) -> None:
        if text.startswith('{"'):  # a result; errors cannot happen (only valid calls are candidates)
            self.view.update(json.loads(text))

    def act(self, view):
        cands = candidates(self.view, self.reader)
        with torch.no_grad():
            i = int(torch.argmax(self.model(torch.tensor([c[2] for c in cands]))))
        tool, args, _ = cands[i]
        self.view.note_call(tool, args)
        return tool, args


def export(src: str | Path, dst: str | Path, digits: int = 6) -> dict:
    """Write a checkpoint's weights as the JSON `releaseops_arena.policies.trained` plays without torch.

    `digits` significant digits per weight keep the file small; `greedy_agreement` checks that
    the rounding changes no greedy choice.
    """
    state = torch.load(src, map_location="cpu", weights_only=True)
    w = state["weights"]
    reader = state.get("reader", "all")

    def rounded(t: torch.Tensor):
        return [float(f"{v:.{digits}g}") for v in t.tolist()] if t.dim() == 1 else [rounded(r) for r in t]

    data = {
        "format": FORMAT,
        "source": Path(src).name,
        "reader": reader,
        "known_families": list(READERS[reader]),
        "feature_maps": feature_maps(reader),
        "dim": state["dim"],
        "hidden": state["hidden"],
        "layers": [{"weight": rounded(w[f"net.{k}.weight"]), "bias": rounded(w[f"net.{k}.bias"])} for k in (0, 2, 4)],
    }
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    Path(dst).write_text(json.dumps(data, separators=(",", ":")) + "\n")
    return data


def greedy_agreement(
    model: Scorer, scorer, scenario_list: list[dict], walk: random.Random | None = None, reader: str = DEFAULT_READER
) -> tuple[int, int]:
    """(decisions where the pure-Python scorer picks torch's greedy call, decisions), along torch's
    greedy episodes, or along random calls drawn from `walk` (an untrained model often holds at once)."""
    same = total = 0
    for scenario in scenario_list:
        env = ReleaseOpsToolEnv()
        view = View(json.loads(env.reset(**scenario)))
        while not env.done:
            cands = candidates(view, reader)
            xs = [c[2] for c in cands]
            with torch.no_grad():
                i = int(torch.argmax(model(torch.tensor(xs))))
            same += scorer.best(xs) == i
            total += 1
            tool, args, _ = cands[walk.randrange(len(cands)) if walk else i]
            view.note_call(tool, args)
            view.update(json.loads(getattr(env, tool)(**args)))
    return same, total


def policy_loss(
    model: Scorer,
    traces: list[list],
    advantages: list[float],
    entropy_coef: float,
    reference: Scorer | None = None,
    kl_coef: float = 0.0,
) -> torch.Tensor:
    """-sum A * log pi(a|s) over every step, batched by padding candidate sets, plus
    `kl_coef` * KL(pi || reference) over each step's candidates (GRPO's anchor to its start)."""
    xs, idx, adv = [], [], []
    for trace, a in zip(traces, advantages):
        for x, i in trace:
            xs.append(x)
            idx.append(i)
            adv.append(a)
    n, width, dim = len(xs), max(x.shape[0] for x in xs), xs[0].shape[1]
    batch = torch.zeros(n, width, dim)
    mask = torch.zeros(n, width, dtype=torch.bool)
    for k, x in enumerate(xs):
        batch[k, : x.shape[0]] = x
        mask[k, : x.shape[0]] = True
    logits = model(batch).masked_fill(~mask, -1e9)
    logp = torch.log_softmax(logits, -1)
    chosen = logp[torch.arange(n), torch.tensor(idx)]
    entropy = -(logp.exp() * logp.masked_fill(~mask, 0)).sum(-1)
    loss = -(torch.tensor(adv) * chosen).mean() - entropy_coef * entropy.mean()
    if reference is not None and kl_coef > 0:
        with torch.no_grad():
            ref_logp = torch.log_softmax(reference(batch).masked_fill(~mask, -1e9), -1)
        kl = (logp.exp() * (logp - ref_logp).masked_fill(~mask, 0)).sum(-1)
        loss = loss + kl_coef * kl.mean()
    return loss


def teach(expert: Policy, reader: str) -> Policy:
    """Narrow a planner-like expert's knowledge of the generator to the reader's families and wordings.
    With every family known, the planner weighs the held-out families' sites on train boards too, and
    a clone of it would learn that caution from families it must not know. It keeps its two readings:
    the student's features carry the posterior mixed over who is careful (`trained._planner`), and a
    second look at an approved site is among its candidate calls (`trained.second_looks`)."""
    if isinstance(expert, ReferencePlanner):
        teach_reader(expert, reader)
    return expert


def expert_traces(
    expert: str,
    scenario_list: list[dict],
    reader: str = DEFAULT_READER,
    dropout: float = 0.0,
    seed: int = 0,
    counts: dict | None = None,
    whole: bool = False,
    workers: int = 1,
) -> list[list]:
    """(candidate features, index of the expert's call) for every step of the expert's episodes,
    the features read with `reader` and a `dropout` share of readings withheld; a planner-like
    expert knows what `reader` knows (`teach`). An expert call that is not among the candidates
    cannot be cloned: `counts` (if given) gets the expert's "calls" and the "dropped" ones.
    `workers` processes play one contiguous chunk each, in pool order. Without reading dropout the
    traces are the same for any number of workers; with it, each chunk draws from its own rng."""
    if workers <= 1:
        return _play_expert(expert, scenario_list, reader, dropout, seed, counts, whole)
    size = -(-len(scenario_list) // workers)
    jobs = [
        (expert, scenario_list[k : k + size], reader, dropout, seed, whole, k)
        for k in range(0, len(scenario_list), size)
    ]
    with mp.get_context("spawn").Pool(workers) as pool:  # spawn: torch is loaded here
        parts = pool.starmap(_trace_chunk, jobs, chunksize=1)
    traces = []
    for chunk, chunk_counts in parts:
        traces += [[(torch.from_numpy(x), i) for x, i in trace] for trace in chunk]
        if counts is not None:
            for key, value in chunk_counts.items():
                counts[key] = counts.get(key, 0) + value
    return traces


def _trace_chunk(
    expert: str, scenario_list: list[dict], reader: str, dropout: float, seed: int, whole: bool, first: int
) -> tuple[list[list], dict]:
    """One worker's chunk of `expert_traces`, its features as numpy arrays (plain pickles)."""
    torch.set_num_threads(1)
    counts: dict = {}
    traces = _play_expert(expert, scenario_list, reader, dropout, seed, counts, whole, first)
    return [[(x.numpy(), i) for x, i in trace] for trace in traces], counts


def _play_expert(
    expert: str,
    scenario_list: list[dict],
    reader: str,
    dropout: float,
    seed: int,
    counts: dict | None,
    whole: bool,
    first: int = 0,
) -> list[list]:
    """`expert_traces` in this process; `first` is the index of `scenario_list[0]` in the whole pool
    (the expert's rng is seeded by it)."""
    from releaseops_arena.policies import POLICIES

    traces = []
    drops = random.Random(seed + first)
    for k, scenario in enumerate(scenario_list, first):
        masked = ReadingDropout(dropout, drops, whole)
        # Set up as `releaseops_arena.policies.play` does: the expert's own rng, the truth only if privileged.
        env, policy = ReleaseOpsToolEnv(), POLICIES[expert]()
        policy.rng = random.Random(k)
        teach(policy, reader)
        obs = env.reset(**scenario)
        if policy.privileged:
            policy.truth = TruthReader(env.episode)
        view, shadow = View(json.loads(obs)), View(json.loads(obs))
        policy.begin(obs)
        trace = []
        while not env.done:
            call = policy.act(shadow)
            if call is None:
                break
            tool, args = call
            cands = candidates(view, reader, masked(view))
            match = [i for i, c in enumerate(cands) if c[0] == tool and c[1] == args]
            if match:
                trace.append((torch.tensor([c[2] for c in cands]), match[0]))
            if counts is not None:
                counts["calls"] = counts.get("calls", 0) + 1
                counts["dropped"] = counts.get("dropped", 0) + (not match)
            view.note_call(tool, args)
            try:
                text = getattr(env, tool)(**args)
            except ValueError as exc:
                policy.observe(str({"error": str(exc)}))
                continue
            result = json.loads(text)
            view.update(result)
            shadow.update(result)
            policy.observe(text)
        traces.append(trace)
    return traces


def imitate(
    model: Scorer,
    expert: str,
    episodes: int,
    epochs: int,
    lr: float,
    seed: int,
    difficulty: str | None = "medium",
    reader: str = DEFAULT_READER,
    dropout: float = 0.0,
    counts: dict | None = None,
    whole: bool = False,
    workers: int = 1,
) -> list[float]:
    """Behaviour cloning warm start: maximise the log-probability of the expert's calls
    (`counts` and `workers`: see `expert_traces`)."""
    rng = random.Random(seed)
    pool = list(scenarios("train", episodes, difficulty))
    traces = expert_traces(expert, pool, reader, dropout, seed, counts, whole, workers)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(epochs):
        rng.shuffle(traces)
        for k in range(0, len(traces), 32):
            loss = policy_loss(model, traces[k : k + 32], [1.0] * len(traces[k : k + 32]), 0.0)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
    return losses


# Validation scenarios: `train`-split seeds far above the training pool's, so model
# selection never sees a held-out seed or the unseen family. Choosing among finished runs (seeds,
# recipes) uses fresh seeds again: the run's own best validation is biased upwards by its choice.
TRAIN_POOL = 100_000
VALIDATION_START = 900_000
SELECTION_START, SELECTION_EPISODES = 950_000, 2000


def validation_return(
    model: Scorer, scenario_list: list[dict], reader: str = DEFAULT_READER, dropout: float = 0.0, whole: bool = False
) -> float:
    """Mean greedy return: how the policy would score if training stopped here (with the same
    reading dropout on every validation, so checkpoints face the same withheld readings)."""
    rng = random.Random(0)
    return sum(rollout(model, s, rng, True, reader, dropout, whole)[0] for s in scenario_list) / len(scenario_list)


def compare(
    paths: list[str], episodes: int | None = None, dropout: float = 0.3, whole: bool = False
) -> dict[str, float]:
    """Mean greedy return of each checkpoint on `episodes` fresh `train` seeds from SELECTION_START
    (every difficulty, `dropout` of readings withheld), read with its own reader: the way to pick
    among finished runs without a held-out seed."""
    pool = list(scenarios("train", episodes or SELECTION_EPISODES, None, start=SELECTION_START))
    out = {}
    for path in paths:
        played = StructuredPolicy(str(path))
        rng = random.Random(0)
        out[str(path)] = sum(rollout(played.model, s, rng, True, played.reader, dropout, whole)[0] for s in pool) / len(
            pool
        )
    return out


def train(
    minutes: float = 15.0,
    group: int = 8,
    scenarios_per_step: int = 16,
    lr: float = 1e-3,
    hidden: int = 64,
    difficulty: str | None = None,
    seed: int = 0,
    entropy_coef: float = 0.01,
    max_steps: int | None = None,
    log_every: int = 10,
    out: Path | None = None,
    warm_start: str | None = "planner",
    warm_episodes: int = 3000,
    warm_epochs: int = 6,
    kl_coef: float = 0.05,
    validate_every: int = 50,
    validation_episodes: int = 500,
    callback=None,
    command: str | None = None,
    reader: str = DEFAULT_READER,
    dropout: float = 0.0,
    whole: bool = False,
    workers: int = 1,
) -> dict:
    """GRPO-style training on the `train` split only; returns the learning curve.

    A random network almost never ships (every group scores the same, so
    every advantage is zero); `warm_start` first clones an expert's calls
    (`warm_episodes` train episodes of `difficulty`, `warm_epochs` passes). The
    default clones the reference planner: with its reading among the features,
    3,000 episodes bring the clone within a few hundredths of the planner's
    validation return, where 1,000 without it stayed below the rule.
    `kl_coef` anchors the policy to that start, as GRPO anchors to its
    reference model: without it the policy dropped the rule's deploy check
    before shipping (a rare payoff within a group) and never found it again,
    which is the one habit that carries over to the unseen family.
    Every `validate_every` updates the greedy policy plays `validation_episodes`
    validation scenarios; the best of those checkpoints (the cloned start
    included) is the one returned and saved, because the sampled return swings
    by tenths between updates (0 turns validation off and keeps the last).
    `callback(step, model, validation_return)` is called after each validation.
    `reader` names what the planner's reading among the features knows (trained_policy.READERS;
    "train": the train split's families only); `dropout` withholds the reading of that share of
    proposals in cloning, GRPO and validation alike (`ReadingDropout`). `workers` processes play the
    expert for the clone (`expert_traces`); the rest runs in this one.
    """
    check_reader(reader)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    dim = feature_dim()
    model = Scorer(dim, hidden)
    t0 = time.monotonic()
    cloned: dict = {}
    bc_losses = (
        imitate(
            model,
            warm_start,
            warm_episodes,
            warm_epochs,
            3e-3,
            seed,
            difficulty,
            reader,
            dropout,
            cloned,
            whole,
            workers,
        )
        if warm_start
        else []
    )
    warm_seconds = round(time.monotonic() - t0, 1)
    reference = copy.deepcopy(model).requires_grad_(False)  # the cloned start, also saved as .warm.pt
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    pool = list(scenarios("train", TRAIN_POOL, difficulty))
    held = list(scenarios("train", validation_episodes, difficulty, start=VALIDATION_START)) if validate_every else []
    curve, validation, start, step = [], [], time.monotonic(), 0  # the clock starts after the warm start
    best = (float("-inf"), 0, None)

    def validate() -> None:
        nonlocal best
        score = validation_return(model, held, reader, dropout, whole)
        validation.append({"step": step, "seconds": round(time.monotonic() - start, 1), "mean_return": round(score, 4)})
        if score > best[0]:
            best = (score, step, copy.deepcopy(model.state_dict()))
        if callback is not None:
            callback(step, model, score)

    if held:
        validate()
    while (max_steps is None or step < max_steps) and time.monotonic() - start < minutes * 60:
        traces, advantages, returns = [], [], []
        for scenario in rng.sample(pool, scenarios_per_step):
            runs = [rollout(model, scenario, rng, reader=reader, dropout=dropout, whole=whole) for _ in range(group)]
            rs = torch.tensor([r[0] for r in runs])
            std = float(rs.std())
            adv = ((rs - rs.mean()) / (std + 1e-6)).tolist() if std > 1e-8 else [0.0] * group
            traces += [r[1] for r in runs]
            advantages += adv
            returns += rs.tolist()
        loss = policy_loss(model, traces, advantages, entropy_coef, reference, kl_coef)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        step += 1
        if step % log_every == 0:
            curve.append(
                {
                    "step": step,
                    "seconds": round(time.monotonic() - start, 1),
                    "mean_return": round(sum(returns) / len(returns), 4),
                }
            )
        if held and step % validate_every == 0:
            validate()
    if held and validation[-1]["step"] != step:
        validate()
    last = copy.deepcopy(model.state_dict())
    if held:
        model.load_state_dict(best[2])
    summary = {
        "curve": curve,
        "validation": validation,
        "best_step": best[1] if held else step,
        "steps": step,
        "seconds": round(time.monotonic() - start, 1),
        "warm_start_seconds": warm_seconds,
        "warm_start": warm_start,
        "warm_episodes": warm_episodes,
        "warm_epochs": warm_epochs,
        "entropy_coef": entropy_coef,
        "difficulty": difficulty or "all",
        "seed": seed,
        "command": command,
        "kl_coef": kl_coef,
        "group": group,
        "scenarios_per_step": scenarios_per_step,
        "lr": lr,
        "validate_every": validate_every,
        "validation_episodes": validation_episodes,
        "bc_losses": bc_losses[:1] + bc_losses[-1:],
        "reader": reader,
        "known_families": list(READERS[reader]),
        "reading_dropout": dropout,
        "dropout_whole": whole,
        "expert_calls": cloned.get("calls", 0),
        "expert_calls_dropped": cloned.get("dropped", 0),
    }
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        for path, weights in (
            (out, model.state_dict()),
            (Path(out).with_suffix(".warm.pt"), reference.state_dict()),
            (Path(out).with_suffix(".last.pt"), last),
        ):
            torch.save({"dim": dim, "hidden": hidden, "weights": weights, "reader": reader}, path)
        Path(out).with_suffix(".json").write_text(json.dumps(summary, indent=1))
    return {**summary, "model": model}


# Named, complete recipes for the command line (`--preset`), in its own flags' terms. "published": the
# trained policy the engine ships (policies/trained_policy.json) and docs/learnability.md reports. The
# `agnostic` reading: it knows the train families only and places a site of a mechanism it has not met
# by its request and risk (planner.slot_of), so no reading is withheld; a 12,000-episode clone (about
# seven minutes on a shared core), then GRPO updates, the greedy policy validated on 1,000 train seeds
# every 50 updates and the best checkpoint kept (the clone itself when no update beats it).
PRESETS: dict[str, dict] = {
    "published": {
        "minutes": 12.0,
        "lr": 2e-4,
        "entropy": 0.0,
        "kl": 0.1,
        "reader": "agnostic",
        "reading_dropout": 0.0,
        "dropout_whole": False,
        "warm_episodes": 12000,
        "validation_episodes": 1000,
        "seed": 1,
    },
}
# The command-line flags' names for `train`'s arguments.
TRAIN_ARGUMENT = {"entropy": "entropy_coef", "kl": "kl_coef", "reading_dropout": "dropout", "dropout_whole": "whole"}


def recipe(preset: str) -> dict:
    """A preset as keyword arguments of `train`."""
    return {TRAIN_ARGUMENT.get(k, k): v for k, v in PRESETS[preset].items()}


def register() -> None:
    """Make `structured:<checkpoint.pt>[?reader=...]` a policy of `training.evaluate` in this process
    (and in the worker processes it starts)."""
    from training.evaluate import register_loader

    register_loader("structured:", StructuredPolicy)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--scenarios-per-step", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--kl", type=float, default=0.05, help="KL penalty towards the warm start (0 for none)")
    parser.add_argument(
        "--validate-every",
        type=int,
        default=50,
        help="updates between validations; the best validated checkpoint is kept (0: keep the last)",
    )
    parser.add_argument("--validation-episodes", type=int, default=500)
    parser.add_argument("--difficulty", choices=["easy", "medium", "hard", "all"], default="all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--entropy", type=float, default=0.01, help="entropy bonus")
    parser.add_argument("--warm-start", default="planner", help="expert policy to clone first ('' for none)")
    parser.add_argument("--warm-episodes", type=int, default=3000, help="train episodes of the expert to clone")
    parser.add_argument("--warm-epochs", type=int, default=6)
    parser.add_argument("--hidden", type=int, default=64, help="width of the scorer's two hidden layers")
    parser.add_argument(
        "--workers", type=int, default=1, help="processes that play the expert for the clone (the same traces)"
    )
    parser.add_argument(
        "--reader",
        choices=list(READERS),
        default=DEFAULT_READER,
        help="what the planner's reading among the features knows: 'train' the train split's "
        "families only (a held-out family's own site reads as unknown), 'all' every family",
    )
    parser.add_argument(
        "--reading-dropout",
        type=float,
        default=0.0,
        help="share of proposals whose reading is withheld in cloning, GRPO and validation",
    )
    parser.add_argument(
        "--dropout-whole",
        action="store_true",
        help="reading dropout also hides whether a withheld proposal is a fix and its request kind, "
        "as a held-out mechanism's proposal reads to the train reader",
    )
    parser.add_argument("--out", type=Path, default=Path("runs/structured.pt"))
    parser.add_argument(
        "--compare",
        nargs="+",
        metavar="CHECKPOINT",
        help="play each checkpoint on 2,000 fresh train seeds (reading dropout as "
        "--reading-dropout) and name the best, then exit",
    )
    parser.add_argument(
        "--export",
        nargs=2,
        metavar=("CHECKPOINT", "JSON"),
        type=Path,
        help="write CHECKPOINT's weights as JSON for the torch-free policy `trained`, "
        "check its greedy choices against torch's, and exit",
    )
    parser.add_argument(
        "--preset", choices=list(PRESETS), help="start from a named recipe; flags given as well override it"
    )
    preset = parser.parse_known_args(argv)[0].preset
    if preset:
        parser.set_defaults(**PRESETS[preset])
    args = parser.parse_args(argv)
    if not 0.0 <= args.reading_dropout <= 1.0:
        parser.error(f"--reading-dropout is a share of proposals, from 0 to 1; got {args.reading_dropout}")
    torch.set_num_threads(1)
    if args.compare:
        missing = [c for c in args.compare if not Path(c).is_file()]
        if missing:
            parser.error(f"--compare: no checkpoint at {', '.join(missing)}")
        scores = compare(args.compare, dropout=args.reading_dropout, whole=args.dropout_whole)
        for path, score in scores.items():
            print(f"{score:.4f}  {path}")
        print(f"best on {SELECTION_EPISODES:,} train seeds from {SELECTION_START:,}: {max(scores, key=scores.get)}")
        return
    if args.export:
        from releaseops_arena.policies.trained import load_weights

        src, dst = args.export
        export(src, dst)
        played = StructuredPolicy(str(src))
        same, total = greedy_agreement(
            played.model, load_weights(dst), list(scenarios("heldout_seeds", 120)), reader=played.reader
        )
        print(
            f"{src} -> {dst} ({dst.stat().st_size:,} bytes); greedy choices agree with torch's "
            f"on {same}/{total} decisions (120 held-out episodes, every difficulty)"
        )
        if same != total:
            raise SystemExit("the exported weights change greedy choices: export with more digits")
        return
    result = train(
        args.minutes,
        args.group,
        args.scenarios_per_step,
        args.lr,
        difficulty=None if args.difficulty == "all" else args.difficulty,
        seed=args.seed,
        out=args.out,
        warm_start=args.warm_start or None,
        kl_coef=args.kl,
        entropy_coef=args.entropy,
        warm_episodes=args.warm_episodes,
        warm_epochs=args.warm_epochs,
        validate_every=args.validate_every,
        validation_episodes=args.validation_episodes,
        reader=args.reader,
        dropout=args.reading_dropout,
        whole=args.dropout_whole,
        hidden=args.hidden,
        workers=args.workers,
        command="python -m research.structured_policy " + " ".join(sys.argv[1:] if argv is None else argv),
    )
    print(f"{result['steps']} steps in {result['seconds']} s; kept step {result['best_step']} -> {args.out}")


if __name__ == "__main__":
    main()
