"""A tiny Qwen3-style model and tokenizer built offline, for CPU smoke runs and tests.

No hub access is needed: a byte-level BPE tokenizer is trained on text the
environment renders (observations, tool results, tool calls), carries TRL's
Qwen3 chat template byte for byte (so TRL recognises it and attaches its
tool-call parser), and a Qwen3ForCausalLM of a few hundred thousand parameters
is initialised from a config.

    python -m training.tiny_model --out artifacts/tiny-qwen3
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from releaseops_arena.baselines import POLICIES, play
from releaseops_arena.splits import scenarios
from releaseops_arena.tools import tool_schemas

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
                  "<tool_response>", "</tool_response>", "<think>", "</think>"]


def qwen3_chat_template() -> str:
    """TRL's own copy of the Qwen3 template (identity-compared by TRL)."""
    from importlib.resources import files

    return (files("trl") / "chat_templates" / "qwen3.jinja").read_text()


def corpus(episodes: int = 120) -> list[str]:
    """Text the model will read and write: boards, results, errors, tool calls, tool schemas."""
    texts = [json.dumps(tool_schemas()), qwen3_chat_template()]
    rng = random.Random(0)
    for i, scenario in enumerate(scenarios("train", episodes)):
        policy = POLICIES[("oracle", "rule", "random")[i % 3]]()
        run = play(policy, scenario, rng_seed=i)
        texts.append(run["observation"])
        for step in run["steps"]:
            texts.append(json.dumps({"name": step["tool"], "arguments": step["arguments"]}))
            texts.append(step.get("result") or step["error"])
        texts.append(str({"error": rng.choice(["unknown", "invalid"])}))
    return texts


def build_tokenizer(vocab_size: int = 2048):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   additional_special_tokens=SPECIAL_TOKENS[1:])
    fast.chat_template = qwen3_chat_template()
    return fast


def build_model(tokenizer, hidden: int = 96, layers: int = 2, seed: int = 0):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, head_dim=hidden // 4, max_position_embeddings=8192,
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def build(out: Path, vocab_size: int = 2048, hidden: int = 96, layers: int = 2) -> Path:
    """Write a tokenizer + randomly initialised model that `from_pretrained(out)` loads."""
    tokenizer = build_tokenizer(vocab_size)
    model = build_model(tokenizer, hidden, layers)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out)
    model.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("artifacts/tiny-qwen3"))
    parser.add_argument("--vocab-size", type=int, default=2048)
    parser.add_argument("--hidden", type=int, default=96)
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args(argv)
    path = build(args.out, args.vocab_size, args.hidden, args.layers)
    print(path)


if __name__ == "__main__":
    main()
