"""A tiny Qwen3-style model and tokenizer built offline, for CPU runs and tests.

No hub access is needed: a BPE tokenizer is trained on text the environment
renders (observations, tool results, tool calls, the rendered tool schemas),
carries TRL's Qwen3 chat template byte for byte (so TRL recognises it and
attaches its tool-call parser), and a Qwen3ForCausalLM is initialised from a
config.

Every id the generator can draw (`pr_100`..`pr_999`, `ci_run_100`..`ci_run_999`,
`ticket_1000`..`ticket_9999` from the catalogue's prefixes and digit counts,
and proposal ids `p1`..`p{MAX_PROPOSAL_ID}`) is one token of its own, so that
copying an id off the board is a single-token lookup rather than a spelling
task (v1's byte-level BPE split `ticket_9690` into pieces and 86% of its warm
start's calls were invalid). The pre-tokenizer keeps `snake_case` names whole,
so tool and field names compress to a token or two.

    python -m training.tiny_model --out artifacts/tiny-qwen3
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from releaseops_arena.catalog import ARTIFACT_KINDS
from releaseops_arena.policies import POLICIES, play
from releaseops_arena.splits import scenarios
from releaseops_arena.tools import tool_schemas

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]
# Proposal ids grow by 1-3 per proposal (scenario_builder._next_pid); episodes are capped at
# rewards.MAX_TOOL_CALLS calls and the largest id seen over 2,400 random, blocking, holding and
# naive episodes was p26, so 299 leaves a wide margin.
MAX_PROPOSAL_ID = 299
# Words, numbers and punctuation runs, each with its leading space; underscores stay inside words.
PRE_TOKEN_PATTERN = r" ?[A-Za-z_]+| ?[0-9]+| ?[^\sA-Za-z0-9_]+|\s+"


def id_vocabulary() -> list[str]:
    """Every artifact and proposal id the scenario generator can put on a board."""
    ids = [f"{kind.prefix}{n}" for kind in ARTIFACT_KINDS for n in range(10 ** (kind.digits - 1), 10**kind.digits)]
    return ids + [f"p{n}" for n in range(1, MAX_PROPOSAL_ID + 1)]


def id_token_ids(tokenizer) -> set[int]:
    """The token ids of the board ids (one each with `build_tokenizer`'s vocabulary)."""
    ids = tokenizer.convert_tokens_to_ids(id_vocabulary())
    return {i for i in ids if i is not None and i != tokenizer.unk_token_id}


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


def _rendered_tools() -> str:
    """The system turn every conversation opens with (the tool schemas as the template renders them)."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    from .tool_calls import tool_functions

    renderer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()))
    renderer.chat_template = qwen3_chat_template()
    return renderer.apply_chat_template([{"role": "user", "content": ""}], tools=tool_functions(), tokenize=False)


def build_tokenizer(vocab_size: int = 2048, id_tokens: bool = True):
    """`id_tokens=False` gives v1's plain byte-level BPE (ids split into pieces), for comparison."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    if id_tokens:
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(PRE_TOKEN_PATTERN), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    texts = corpus() + ([_rendered_tools()] * 20 if id_tokens else [])  # the schemas open every prompt
    tok.train_from_iterator(texts, trainer=trainer)
    if id_tokens:
        # single_word: `p1` must not match inside `p17` or a longer word.
        tok.add_tokens([AddedToken(i, single_word=True, normalized=False) for i in id_vocabulary()])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:],
    )
    fast.chat_template = qwen3_chat_template()
    return fast


def id_token_range(tokenizer) -> tuple[int, int]:
    """The board ids' token ids, which `build_tokenizer` adds last and so lie in one range."""
    ids = sorted(id_token_ids(tokenizer))
    if not ids or ids[-1] - ids[0] + 1 != len(ids):
        raise ValueError("the board ids are not one contiguous token range; build the tokenizer with id_tokens=True")
    return ids[0], ids[-1] + 1


def qwen3_config(tokenizer, hidden: int = 96, layers: int = 2):
    """A tiny Qwen3 configuration over `tokenizer`'s vocabulary."""
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden // 4,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def initialise(model, tokenizer, qk_gain: float = 1.0, copy_head: bool = False):
    """`qk_gain` initialises Qwen3's query/key norms: with unit gains an attention logit stays under
    sqrt(head_dim), too flat to single out one id among a board's thousand tokens.

    `copy_head` starts the last layer's first head as a copier: its values and output map the first
    head_dim coordinates of the residual onto themselves, so with tied embeddings whatever token it
    attends to already gets a high logit, and training only has to learn where to look (from a
    random start it must learn both at once, and a tiny model kept guessing the commonest id)."""
    import torch

    config = model.config
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_norm.weight.fill_(qk_gain)
            layer.self_attn.k_norm.weight.fill_(qk_gain)
        if copy_head:
            attn, d = model.model.layers[-1].self_attn, config.head_dim
            eye = torch.eye(d, config.hidden_size)
            attn.v_proj.weight[:d] = eye  # key/value head 0, shared by query heads 0 and 1
            attn.o_proj.weight[:, :d] = eye.T  # query head 0's output
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def build_model(
    tokenizer, hidden: int = 96, layers: int = 2, seed: int = 0, qk_gain: float = 1.0, copy_head: bool = False
):
    """A randomly initialised tiny Qwen3 (seeded), see `initialise`."""
    import torch
    from transformers import Qwen3ForCausalLM

    torch.manual_seed(seed)
    return initialise(Qwen3ForCausalLM(qwen3_config(tokenizer, hidden, layers)), tokenizer, qk_gain, copy_head)


def save(out: Path, tokenizer, model) -> Path:
    """Write a tokenizer and model that `from_pretrained(out)` loads."""
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out)
    model.save_pretrained(out)
    return out


def build(
    out: Path,
    vocab_size: int = 2048,
    hidden: int = 96,
    layers: int = 2,
    id_tokens: bool = True,
    seed: int = 0,
    qk_gain: float = 1.0,
    copy_head: bool = False,
) -> Path:
    """Write a tokenizer + randomly initialised model that `from_pretrained(out)` loads."""
    tokenizer = build_tokenizer(vocab_size, id_tokens)
    return save(out, tokenizer, build_model(tokenizer, hidden, layers, seed, qk_gain, copy_head))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("artifacts/tiny-qwen3"))
    parser.add_argument("--vocab-size", type=int, default=2048)
    parser.add_argument("--hidden", type=int, default=96)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--no-id-tokens", action="store_true", help="v1's byte-level BPE, ids split into pieces")
    args = parser.parse_args(argv)
    path = build(args.out, args.vocab_size, args.hidden, args.layers, not args.no_id_tokens)
    print(path)


if __name__ == "__main__":
    main()
