"""Supervised warm start: teach a model the tool-calling format on expert episodes.

A randomly initialised (or small) model never emits a well-formed tool call,
so GRPO would see no reward signal. This fine-tunes on the assistant tokens of
expert episodes in OpenEnv's collect format (`training/collect.py`: the exact
conversation TRL builds during GRPO): a dataset collected before (`--data`),
or episodes of `--policy` (the `rule` baseline by default, which uses visible
information only) collected on the fly.

    python -m training.collect --policy planner --split train -n 256 --difficulty easy --out data/planner-easy
    python -m training.sft_warmup --model artifacts/tiny-qwen3 --out artifacts/tiny-sft --data data/planner-easy
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path

from releaseops_arena.policies import POLICIES

from .collect import collect, load_conversations
from .tool_calls import CLOSING_TURN, tool_functions


def expert_conversations(
    policy: str = "rule",
    split: str = "train",
    n: int = 64,
    difficulty: str | None = None,
    data: str | Path | None = None,
) -> list[list[dict]]:
    """Up to `n` conversations of expert episodes that shipped safely, from a collected dataset
    (`data`) or collected now (four scenarios per wanted episode, into a temporary folder)."""
    if data is not None:
        return load_conversations(Path(data))[:n]
    with tempfile.TemporaryDirectory() as tmp:
        collect(policy, split, n * 4, Path(tmp), difficulty, progress=False)
        return load_conversations(Path(tmp))[:n]


def closed(messages: list[dict]) -> list[dict]:
    """A finished episode's conversation with the closing turn appended (once). Collected episodes
    carry it already (`training.tool_calls.CLOSING_TURN`: the turn without a call that ends TRL's tool
    loop); this closes conversations built otherwise."""
    return messages if messages[-1] == CLOSING_TURN else [*messages, CLOSING_TURN]


def encode(
    tokenizer, conversations: list[list[dict]], max_length: int = 6144, tools: list | None = None
) -> list[tuple]:
    """(input ids, assistant mask) per conversation, rendered with the template TRL trains GRPO with
    (prefix-preserving, with generation markers), so the warm start sees exactly GRPO's tokens.
    `tools`: as the chat template takes them; by default `tool_functions()`, in TRL's order, as a
    collected dataset's `tools` column is."""
    import torch
    from trl.chat_template_utils import get_training_chat_template

    template = get_training_chat_template(tokenizer) or tokenizer.chat_template
    tools = tool_functions() if tools is None else tools
    samples = []
    for messages in conversations:
        enc = tokenizer.apply_chat_template(
            messages,
            tools=tools,
            chat_template=template,
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=True,
        )
        mask = unlearn_refused(messages, enc["assistant_masks"])
        ids, mask = enc["input_ids"][:max_length], mask[:max_length]
        samples.append((torch.tensor(ids), torch.tensor(mask, dtype=torch.bool)))
    return samples


def refused(messages: list[dict]) -> list[bool]:
    """Per assistant turn: whether the environment refused its call (the next turn is an error result)."""
    return [
        m["role"] == "assistant"
        and i + 1 < len(messages)
        and messages[i + 1]["role"] == "tool"
        and str(messages[i + 1]["content"]).startswith("{'error'")
        for i, m in enumerate(messages)
        if m["role"] == "assistant"
    ]


def unlearn_refused(messages: list[dict], mask: list[int]) -> list[int]:
    """The assistant mask without the turns the environment refused: a warm start learns the recovery
    after an error (`research/recovery.py`), never the refused call itself. The template marks each
    assistant turn as one run of ones, in order."""
    flags = refused(messages)
    if not any(flags):
        return list(mask)
    runs, start = [], None
    for t, on in enumerate([*mask, 0]):
        if on and start is None:
            start = t
        elif not on and start is not None:
            runs.append((start, t))
            start = None
    if len(runs) != len(flags):
        raise ValueError(f"{len(runs)} assistant spans in the rendered conversation for {len(flags)} assistant turns")
    out = list(mask)
    for (a, b), drop in zip(runs, flags):
        if drop:
            out[a:b] = [0] * (b - a)
    return out


def shared_prefix(samples: list[tuple]) -> int:
    """Length of the token prefix every sample opens with (the system turn with the tool schemas)."""
    first = samples[0][0]
    n = min(len(s[0]) for s in samples)
    for ids, *_ in samples[1:]:
        same = (ids[:n] == first[:n]).int()
        n = int(same.cumprod(0).sum())
    return n


def assistant_loss(model, ids, mask, prefix: int = 0, also=None):
    """Mean next-token loss on the assistant tokens (and on the tokens `also` marks).

    The output layer runs on those positions alone: with a vocabulary of some 13k tokens it would
    otherwise cost more than the whole body. The first `prefix` tokens (the system turn every
    conversation shares, two thirds of a tiny model's sequence) are run without gradient and
    attended through the cache; the loss is the same, the step about twice as fast."""
    import torch
    import torch.nn.functional as F
    from transformers import DynamicCache

    cache = head = None
    if prefix:
        with torch.no_grad():
            out = model.model(input_ids=ids[None, :prefix], past_key_values=DynamicCache(), use_cache=True)
            cache, head = out.past_key_values, out.last_hidden_state[0]
    hidden = model.model(input_ids=ids[None, prefix:], past_key_values=cache, use_cache=prefix > 0).last_hidden_state[0]
    wanted = mask if also is None else mask | also
    targets = wanted[1:].nonzero().squeeze(-1)  # position t predicts token t + 1
    targets = targets[targets >= prefix]
    if hasattr(model, "logprobs_at"):  # a pointer-generator (research/copy_model.py) copies from every position
        full = hidden if head is None else torch.cat([head, hidden])
        return F.nll_loss(model.logprobs_at(full, ids, targets), ids[targets + 1])
    logits = model.lm_head(hidden[targets - prefix])
    return F.cross_entropy(logits.float(), ids[targets + 1])


def warm_start(
    model_path: str | Path,
    out: str | Path,
    policy: str = "rule",
    episodes: int = 64,
    epochs: int = 3,
    lr: float = 3e-3,
    max_length: int = 6144,
    seed: int = 0,
    difficulty: str | None = None,
    data: str | Path | None = None,
    conversations: list[list[dict]] | None = None,
    max_minutes: float | None = None,
    copy_tokens: set[int] | None = None,
    clock=None,
) -> dict:
    """Fine-tune on assistant tokens of expert conversations (given, or see `expert_conversations`);
    save to `out`. The learning rate is constant, or, with `max_minutes`, warms up over 3% of the run
    and decays on a cosine, the run's progress being the larger of steps done and time used (`clock`:
    this process's CPU time by default, so that a run paused with SIGSTOP keeps its budget; pass
    `time.monotonic` for wall time when torch uses several threads). With `copy_tokens` (token
    ids, such as the board ids) the loss also covers every such token anywhere in the conversation:
    a tool result echoes the call's id, a claim names the ref its card lists, so the environment's
    own text teaches the copying a call needs, at many more positions than the calls alone.
    Returns the loss history."""
    import math
    import time

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path)
    if conversations is None:
        conversations = expert_conversations(policy, n=episodes, difficulty=difficulty, data=data)
    samples = encode(tokenizer, conversations, max_length)
    if copy_tokens:
        table = torch.zeros(len(tokenizer), dtype=torch.bool)
        table[list(copy_tokens)] = True
        samples = [(ids, mask, table[ids]) for ids, mask in samples]
    else:
        samples = [(ids, mask, None) for ids, mask in samples]
    prefix = max(0, shared_prefix(samples) - 1) if len(samples) > 1 else 0
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    history = []
    rng = random.Random(seed)
    total = epochs * len(samples)
    clock = clock or time.process_time
    start, step, stopped = clock(), 0, False
    for _ in range(epochs):
        rng.shuffle(samples)
        for ids, mask, also in samples:
            progress = step / total
            if max_minutes:
                progress = max(progress, (clock() - start) / (60 * max_minutes))
            if progress >= 1:
                stopped = True
                break
            if max_minutes:
                scale = min(1.0, progress / 0.03) * 0.5 * (1 + math.cos(math.pi * progress))
                for group in optimizer.param_groups:
                    group["lr"] = lr * max(scale, 0.02)
            loss = assistant_loss(model, ids, mask, prefix, also)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
            history.append(float(loss.detach()))
            step += 1
        if stopped:
            break
    Path(out).mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {"losses": history, "samples": len(samples), "steps": step, "seconds": round(clock() - start, 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="hub id or local path")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--policy", default="rule", choices=sorted(POLICIES))
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--difficulty", choices=["easy", "medium", "hard"], default=None)
    parser.add_argument("--data", type=Path, default=None, help="a dataset written by training.collect")
    args = parser.parse_args(argv)
    result = warm_start(
        args.model,
        args.out,
        args.policy,
        args.episodes,
        args.epochs,
        args.lr,
        difficulty=args.difficulty,
        data=args.data,
    )
    losses = result["losses"]
    print(f"{result['samples']} episodes, loss {losses[0]:.3f} -> {sum(losses[-10:]) / min(10, len(losses)):.3f}")


if __name__ == "__main__":
    main()
