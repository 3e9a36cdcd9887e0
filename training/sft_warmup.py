"""Supervised warm start: teach a model the tool-calling format on expert episodes.

A randomly initialised (or small) model never emits a well-formed tool call,
so GRPO would see no reward signal. This renders episodes of an expert policy
(the `rule` baseline by default, which uses visible information only) as the
exact conversation TRL builds during GRPO (the observation appended to the
user prompt, each call an assistant `tool_calls` turn, each result a `tool`
turn, errors as TRL's `{'error': ...}`) and fine-tunes on assistant tokens.

    python -m training.sft_warmup --model artifacts/tiny-qwen3 --out artifacts/tiny-sft --episodes 64
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from releaseops_arena.baselines import POLICIES, play
from releaseops_arena.splits import scenarios

from .make_dataset import SYSTEM_PROMPT



def conversation(run: dict) -> list[dict]:
    """One played episode as chat messages, formatted the way TRL's tool loop formats them."""
    messages = [{"role": "user", "content": SYSTEM_PROMPT + run["observation"]}]
    for step in run["steps"]:
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": step["tool"], "arguments": step["arguments"]}}]})
        content = step["result"] if "result" in step else str({"error": step["error"]})
        messages.append({"role": "tool", "name": step["tool"], "content": content})
    return messages


def expert_conversations(policy: str = "rule", split: str = "train", n: int = 64, difficulty: str | None = None,
                         only_safe: bool = True) -> list[list[dict]]:
    """Conversations of `n` expert episodes (by default only those that shipped safely)."""
    out = []
    for i, scenario in enumerate(scenarios(split, n * 4, difficulty)):
        run = play(POLICIES[policy](), scenario, rng_seed=i)
        if only_safe and run["metrics"]["outcome"] != "safe_ship":
            continue
        out.append(conversation(run))
        if len(out) == n:
            break
    return out


def tool_functions():
    """The tool callables whose schemas the chat template renders (TRL passes bound methods)."""
    from releaseops_arena import ReleaseOpsToolEnv
    from releaseops_arena.tools import TOOL_NAMES

    env = ReleaseOpsToolEnv()
    return [getattr(env, name) for name in TOOL_NAMES]


def warm_start(model_path: str | Path, out: str | Path, policy: str = "rule", episodes: int = 64, epochs: int = 3,
               lr: float = 3e-3, max_length: int = 6144, seed: int = 0, difficulty: str | None = None) -> dict:
    """Fine-tune on assistant tokens of expert conversations; save to `out`. Returns loss history."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import get_training_chat_template

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path)
    # Render with the template TRL trains GRPO with (prefix-preserving, with generation markers).
    template = get_training_chat_template(tokenizer) or tokenizer.chat_template
    tools = tool_functions()
    samples = []
    for messages in expert_conversations(policy, n=episodes, difficulty=difficulty):
        enc = tokenizer.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=True,
                                            return_dict=True, return_assistant_tokens_mask=True)
        ids, mask = enc["input_ids"][:max_length], enc["assistant_masks"][:max_length]
        samples.append((torch.tensor(ids), torch.tensor(mask, dtype=torch.bool)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    history = []
    rng = random.Random(seed)
    for _ in range(epochs):
        rng.shuffle(samples)
        for ids, mask in samples:
            labels = ids.clone()
            labels[~mask] = -100
            loss = model(input_ids=ids[None], labels=labels[None]).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
            history.append(float(loss.detach()))
    Path(out).mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {"losses": history, "samples": len(samples)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="hub id or local path")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--policy", default="rule", choices=sorted(POLICIES))
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--difficulty", choices=["easy", "medium", "hard"], default=None)
    args = parser.parse_args(argv)
    result = warm_start(args.model, args.out, args.policy, args.episodes, args.epochs, args.lr,
                        difficulty=args.difficulty)
    losses = result["losses"]
    print(f"{result['samples']} episodes, loss {losses[0]:.3f} -> {sum(losses[-10:]) / min(10, len(losses)):.3f}")


if __name__ == "__main__":
    main()
