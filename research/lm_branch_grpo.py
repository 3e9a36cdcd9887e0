"""Branch-point GRPO for the LM study's copy models: each group is sampled at the call that goes wrong.

    python -m research.lm_branch_grpo runs/lm_seed6/sft_seed6 --out runs/lm_seed6/branch --minutes 25

The study's GRPO (`research.pointer_grpo`, TRL's trainer) samples whole episodes at the sampling
temperature and gives one return to every token of an episode. The greedy warm starts lose almost
only by refusal loops: one refused call (an argument of another tool, a rule the risk does not
allow) repeated until the engine cuts the episode, while episodes sampled at temperature 1 refuse
far more calls than the greedy policy does, so few groups contrast the greedy failure with a way out.

Here a group shares the current greedy episode up to one turn: the turn of its first refused call
and (unless `--no-before`) the turn before it (for a failure without a refusal, a random turn and the last one; for a
`--keep-share` of the safe ships, a random turn, so a good call is kept). `--samples` calls are
sampled at that turn at `--temperature` and each episode is finished greedily, as the policy is
evaluated; a sample equal to the greedy call keeps the greedy return without a replay. The group's
normalised returns are the advantages of that one turn's tokens (REINFORCE with the group's mean as
baseline, on-policy, one update per `--groups` groups, no ratio, clip or KL term).

With `--guide` the planner's call at that turn joins each group as one more member, written as the model
writes a call and finished greedily by the model like the samples (off-policy guidance, as in LUFFY
(Yan et al., 2025), without its importance weighting): where no sample finds the way out of a refused call, the
planner's may, and the group's returns, not the planner, decide whether it is raised or lowered. The planner
reads only the public view the model's prompt renders.

Train-split tasks only, from `--start` (by default 300000, far past the selection's validation tasks at
100000), never a held-out task.

It leaves `checkpoint-<update>/` folders, the final model and run.json (`global_step`) as TRL's
trainer does, so `research.lm_select` chooses among them on validation.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from pathlib import Path

from releaseops_arena.policies import play
from releaseops_arena.policies.planner import ReferencePlanner
from releaseops_arena.splits import task_scenario
from research import copy_model
from research.lm_recovery import first_refusal
from training.llm_policy import LLMPolicy

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")


class BranchPolicy(LLMPolicy):
    """The greedy policy, which records each turn's prompt and tokens and can be forced to one call at one turn."""

    def __init__(self, checkpoint: str, temperature: float):
        super().__init__(checkpoint)
        self.sample_temperature = temperature
        self.branch: int | None = None  # the turn (1-based) whose tokens are `forced`
        self.forced: list[int] | None = None
        self.guide_turn: int | None = None  # the turn whose call is the planner's (`--guide`)
        self.guided: list[int] | None = None  # the planner's call there, as this model's tokens
        self.branch_prompt: list[int] | None = None  # the prompt the forced turn was decoded from

    def begin(self, observation: str) -> None:
        super().begin(observation)
        self.observation = observation
        self.turn_log: list[tuple[list[int], list[int]]] = []  # (prompt ids, completion ids) per turn
        self.call_turns: list[int] = []  # the turn each call came from

    def _decode(self, ids: list[int]) -> list[int]:
        if self.turns == self.branch:
            out, self.branch_prompt = list(self.forced), ids
        else:
            out = super()._decode(ids)
        self.turn_log.append((ids, out))
        return out

    def act(self, view):
        if self.guide_turn is not None and self.turns + 1 == self.guide_turn and not self.queue:
            self.guided = self.planner_tokens(view)
            if self.guided is not None:
                self.branch, self.forced = self.guide_turn, self.guided
        call = super().act(view)
        if call is not None:
            self.call_turns.append(self.turns)
        return call

    def planner_tokens(self, view) -> list[int] | None:
        """The planner's call on this view, written as this model writes a call: the assistant turn the warm
        start was trained on, up to its end-of-turn token. The planner reads only the public view; it starts
        fresh here (its memory of the approvals it would have made is empty), so the call is a proposal that
        the group's returns judge like any sample. None when the planner has no call or the rendering does not
        extend this turn's prompt."""
        planner = ReferencePlanner()
        planner.begin(self.observation)
        planner.rng = random.Random(0)
        call = planner.act(view)
        if call is None:
            return None
        tool, args = call
        turn = {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": tool, "arguments": dict(args)}}],
        }
        render = dict(tools=self.tools, chat_template=self.template, tokenize=False)
        prompt = self.tokenizer.apply_chat_template(self.messages, add_generation_prompt=True, **render)
        full = self.tokenizer.apply_chat_template(self.messages + [turn], **render)
        ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        whole = self.tokenizer(full, add_special_tokens=False)["input_ids"]
        if whole[: len(ids)] != ids or self.tokenizer.eos_token_id not in whole[len(ids) :]:
            return None
        out = whole[len(ids) :]
        return out[: out.index(self.tokenizer.eos_token_id) + 1]

    def sample(self, ids: list[int], k: int) -> list[list[int]]:
        """`k` completions of the prompt `ids`, sampled at the policy's sampling temperature."""
        self.temperature, self.stochastic = self.sample_temperature, True
        try:
            return [super(BranchPolicy, self)._decode(ids) for _ in range(k)]
        finally:
            self.temperature, self.stochastic = 0.0, False

    def forget_cache(self) -> None:
        """Drop the key/value cache (stale once the weights change)."""
        self._cache, self._cached = self._new_cache(), []


def branch_turns(
    run: dict, turns: int, call_turns: list[int], rng: random.Random, keep_share: float, before: bool = True
) -> list[int]:
    """The turns a greedy episode is branched at: its first refused call's turn and (if `before`) the one before;
    for a failure without a refusal a random turn and the last; for a safe ship, a random turn with probability
    `keep_share`."""
    if turns == 0:
        return []
    refused = first_refusal(run)
    if refused is not None:
        b = call_turns[refused]
        return [t for t in ((b - 1, b) if before else (b,)) if t >= 1]
    if run["metrics"]["outcome"] != "safe_ship":
        return sorted({rng.randint(1, turns), turns})
    return [rng.randint(1, turns)] if rng.random() < keep_share else []


def advantages(returns: list[float]) -> list[float]:
    """GRPO's group-normalised advantages: (return - group mean) / (group std + 1e-4)."""
    mean = sum(returns) / len(returns)
    std = (sum((r - mean) ** 2 for r in returns) / len(returns)) ** 0.5
    return [(r - mean) / (std + 1e-4) for r in returns]


def guided(policy: BranchPolicy, scenario: dict, turn: int, prompt: list[int]) -> tuple[list[int], float] | None:
    """The planner's call at `turn` of the greedy episode and the return of the episode it leads to, finished
    greedily; None when the planner has no call there or the replay did not reach the same prompt."""
    policy.guide_turn, policy.branch_prompt = turn, None
    try:
        ret = play(policy, scenario)["return"]
        out = policy.guided
    finally:
        policy.guide_turn = policy.guided = policy.branch = policy.forced = None
    if out is None or policy.branch_prompt != prompt:
        return None
    return out, ret


def group(
    policy: BranchPolicy, scenario: dict, turn: int, greedy_return: float, samples: int, guide: bool = False
) -> dict | None:
    """One group at `turn` of the greedy episode `policy` just played; None when every sample scored the same.
    With `guide`, the planner's call at that turn joins the group as one more member (`planner_tokens`)."""
    prompt, greedy = policy.turn_log[turn - 1]
    outs = policy.sample(prompt, samples)
    scored: dict[tuple[int, ...], float] = {tuple(greedy): greedy_return}
    for out in outs:
        if tuple(out) not in scored:
            policy.branch, policy.forced = turn, out
            try:
                scored[tuple(out)] = play(policy, scenario)["return"]
            finally:
                policy.branch, policy.forced = None, None
    planner = None
    if guide:
        hit = guided(policy, scenario, turn, prompt)
        if hit is not None:
            planner = hit[0]
            scored.setdefault(tuple(planner), hit[1])
            outs = [*outs, planner]
    returns = [scored[tuple(out)] for out in outs]
    if len(set(returns)) == 1:
        return None
    weights: dict[tuple[int, ...], float] = {}
    for out, a in zip(outs, advantages(returns)):
        weights[tuple(out)] = weights.get(tuple(out), 0.0) + a / len(outs)
    out = {"prompt": prompt, "completions": weights, "returns": returns}
    if planner is not None:
        out["planner"] = {"return": scored[tuple(planner)], "best": scored[tuple(planner)] >= max(returns)}
    return out


def update(policy: BranchPolicy, optimizer, groups: list[dict], clip: float = 1.0) -> float:
    """One optimizer step on `groups`: minus the advantage-weighted mean log-prob of each sampled turn."""
    torch = policy.torch
    model = policy.model
    model.train()
    optimizer.zero_grad()
    total = 0.0
    for g in groups:
        p = len(g["prompt"])
        for out, weight in g["completions"].items():
            if not out or weight == 0.0:
                continue
            logits = model(input_ids=torch.tensor([g["prompt"] + list(out)])).logits[0, p - 1 : p - 1 + len(out)]
            logp = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(out).unsqueeze(-1)).mean()
            loss = -weight * logp / len(groups)
            loss.backward()
            total += float(loss.detach())
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    model.eval()
    policy.forget_cache()
    return total


def save(policy: BranchPolicy, source: Path, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    policy.model.save_pretrained(folder)
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copy(source / name, folder / name)


def train(args: argparse.Namespace) -> dict:
    import torch

    copy_model.register()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    policy = BranchPolicy(str(args.model), args.temperature)
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=args.lr, weight_decay=0.0)
    args.out.mkdir(parents=True, exist_ok=True)
    log = (args.out / "log.jsonl").open("w")
    started, task, updates, pending = time.monotonic(), args.start, 0, []
    window = {"episodes": 0, "safe_ship": 0, "return": 0.0, "groups": 0, "flat": 0, "planner": 0, "planner_best": 0}
    while time.monotonic() - started < args.minutes * 60 and (args.updates is None or updates < args.updates):
        scenario = task_scenario("train", task, args.difficulty)
        task += 1
        run = play(policy, scenario)
        turn_log, call_turns = list(policy.turn_log), list(policy.call_turns)
        window["episodes"] += 1
        window["safe_ship"] += run["metrics"]["outcome"] == "safe_ship"
        window["return"] += run["return"]
        for turn in branch_turns(run, len(turn_log), call_turns, rng, args.keep_share, args.before):
            policy.turn_log = turn_log  # the greedy episode's turns, not the last replay's
            g = group(policy, scenario, turn, run["return"], args.samples, args.guide)
            window["groups"] += 1
            window["flat"] += g is None
            if g is not None and "planner" in g:
                window["planner"] += 1
                window["planner_best"] += g["planner"]["best"]
            if g is not None:
                pending.append(g)
        if len(pending) >= args.groups:
            loss = update(policy, optimizer, pending[: args.groups])
            pending = pending[args.groups :]
            updates += 1
            row = {
                "update": updates,
                "task": task,
                "minutes": round((time.monotonic() - started) / 60, 2),
                "loss": round(loss, 5),
                "greedy_safe_ship": round(window["safe_ship"] / window["episodes"], 3),
                "greedy_return": round(window["return"] / window["episodes"], 3),
                "groups": window["groups"],
                "flat_groups": window["flat"],
                **({"planner_groups": window["planner"], "planner_best": window["planner_best"]} if args.guide else {}),
            }
            log.write(json.dumps(row) + "\n")
            log.flush()
            print(json.dumps(row), flush=True)
            window = {k: 0 for k in window}
            window["return"] = 0.0
            if updates % args.save_every == 0:
                save(policy, args.model, args.out / f"checkpoint-{updates}")
    save(policy, args.model, args.out)
    run_info = {
        "method": "branch-point GRPO (research.lm_branch_grpo)" + (", planner-guided" if args.guide else ""),
        "model": str(args.model),
        "global_step": updates,
        "tasks": {"split": "train", "difficulty": args.difficulty, "start": args.start, "end": task},
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "minutes": round((time.monotonic() - started) / 60, 2),
    }
    (args.out / "run.json").write_text(json.dumps(run_info, indent=1))
    return run_info


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model", type=Path, help="a copy-model checkpoint folder (the LM study's sft_seed<k>/)")
    p.add_argument("--out", type=Path, required=True, help="output folder (checkpoints, log.jsonl, run.json)")
    p.add_argument("--minutes", type=float, default=25.0, help="wall-clock budget")
    p.add_argument("--updates", type=int, default=None, help="stop after this many updates (default: the budget)")
    p.add_argument("--samples", type=int, default=8, help="sampled calls per group")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature at the branch turn")
    p.add_argument("--groups", type=int, default=4, help="groups per optimizer step")
    p.add_argument("--lr", type=float, default=3e-5)
    p.add_argument("--keep-share", type=float, default=0.25, help="share of safe ships branched at a random turn")
    p.add_argument(
        "--no-before",
        dest="before",
        action="store_false",
        help="branch a refused call only at its own turn, not also at the turn before",
    )
    p.add_argument(
        "--guide",
        action="store_true",
        help="add the planner's call at the branch turn to each group, judged by its return like a sample",
    )
    p.add_argument("--save-every", type=int, default=10, help="updates between checkpoints")
    p.add_argument("--start", type=int, default=300_000, help="first train-split task")
    p.add_argument("--difficulty", choices=["easy", "medium", "hard"], default="easy")
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.samples < 2:
        p.error(f"--samples {args.samples}: a group needs at least 2")
    if not (args.model / "config.json").is_file():
        p.error(f"{args.model}: not a checkpoint folder (no config.json)")
    return train(args)


if __name__ == "__main__":
    main()
