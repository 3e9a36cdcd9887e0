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

from releaseops_arena.baselines import POLICIES

from .collect import collect, load_conversations



def expert_conversations(policy: str = "rule", split: str = "train", n: int = 64, difficulty: str | None = None,
                         data: str | Path | None = None) -> list[list[dict]]:
    """Up to `n` conversations of expert episodes that shipped safely, from a collected dataset
    (`data`) or collected now (four scenarios per wanted episode, into a temporary folder)."""
    if data is not None:
        return load_conversations(Path(data))[:n]
    with tempfile.TemporaryDirectory() as tmp:
        collect(policy, split, n * 4, Path(tmp), difficulty, progress=False)
        return load_conversations(Path(tmp))[:n]


def tool_functions():
    """The tool callables whose schemas the chat template renders (TRL passes bound methods)."""
    from releaseops_arena import ReleaseOpsToolEnv
    from releaseops_arena.tools import TOOL_NAMES

    env = ReleaseOpsToolEnv()
    return [getattr(env, name) for name in TOOL_NAMES]


def warm_start(model_path: str | Path, out: str | Path, policy: str = "rule", episodes: int = 64, epochs: int = 3,
               lr: float = 3e-3, max_length: int = 6144, seed: int = 0, difficulty: str | None = None,
               data: str | Path | None = None) -> dict:
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
    for messages in expert_conversations(policy, n=episodes, difficulty=difficulty, data=data):
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
    parser.add_argument("--data", type=Path, default=None, help="a dataset written by training.collect")
    args = parser.parse_args(argv)
    result = warm_start(args.model, args.out, args.policy, args.episodes, args.epochs, args.lr,
                        difficulty=args.difficulty, data=args.data)
    losses = result["losses"]
    print(f"{result['samples']} episodes, loss {losses[0]:.3f} -> {sum(losses[-10:]) / min(10, len(losses)):.3f}")


if __name__ == "__main__":
    main()
