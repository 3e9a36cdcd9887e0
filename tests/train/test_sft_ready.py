"""Collected episodes are SFT-ready: TRL's `SFTTrainer` renders a record into the very tokens TRL's GRPO
tool loop builds for the same episode, and the dataset folder (with its card) loads and pushes as is.

The GRPO side is TRL's own code: a `GRPOTrainer` with `environment_factory=ReleaseOpsToolEnv` runs
`_generate_and_score_completions` on the record's dataset row (reset, prompt tokens, tool loop, tool
suffixes, response parsing), with only the model's sampling replaced by a stub that emits, at each turn,
the SFT sequence's tokens from the context GRPO built up to the next end-of-turn token. The stub
asserts that GRPO's context is a prefix of the SFT sequence; the test then checks that GRPO ends with
the whole sequence, the same messages and the same verified reward.
"""

import json

import pytest

pytest.importorskip("trl")

# Small and fast: two oracle episodes (clean calls) and one random-policy episode (refused calls,
# `{'error': ...}` results), on a tiny offline model whose weights play no part.
EPISODES = {"oracle": 2, "random": 1}


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    from training.collect import collect, hub_folder
    from training.tiny_model import build

    root = tmp_path_factory.mktemp("sft_ready")
    folders = {}
    for policy, n in EPISODES.items():
        collect(policy, "train", n, root / policy, "easy", progress=False)
        folders[policy] = hub_folder(root / policy)
    return {"base": build(root / "base"), "folders": folders, "root": root}


def _sft_rows(tokenizer, model, dataset, out, think: bool):
    """SFTTrainer's prepared rows (input_ids, labels) for `dataset`, as it trains on them."""
    from trl import SFTConfig, SFTTrainer

    if not think:  # SFTTrainer reads template options from a row's `chat_template_kwargs`
        dataset = dataset.map(lambda row: {"chat_template_kwargs": {"enable_thinking": False}})
    sft = SFTTrainer(
        model=model,
        processing_class=tokenizer,
        train_dataset=dataset,
        args=SFTConfig(output_dir=str(out), assistant_only_loss=True, max_length=None, use_cpu=True, report_to="none"),
    )
    return sft.train_dataset


def _grpo(tokenizer, model, out, think: bool):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from releaseops_arena import ReleaseOpsToolEnv
    from training.make_dataset import rows

    return GRPOTrainer(
        model=model,
        reward_funcs=[],
        processing_class=tokenizer,
        environment_factory=ReleaseOpsToolEnv,
        train_dataset=Dataset.from_list(rows("train", 2, "easy")),
        args=GRPOConfig(
            output_dir=str(out),
            use_cpu=True,
            report_to="none",
            num_generations=2,
            per_device_train_batch_size=2,
            max_completion_length=8192,
            max_tool_calling_iterations=1000,
            chat_template_kwargs=None if think else {"enable_thinking": False},
        ),
    )


def _grpo_replay(grpo, row: dict, sft_ids: list[int], eos: int):
    """TRL's GRPO generation for `row` (two generations), the model emitting `sft_ids` turn by turn.
    Returns (prompt messages, prompt ids, completion ids, tool mask, completions) of the first."""

    def sample(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        out = []
        for context in prompt_ids:
            context = list(context)
            assert sft_ids[: len(context)] == context, f"GRPO's context leaves the SFT tokens by token {len(context)}"
            end = sft_ids.index(eos, len(context))  # the model stops at its end-of-turn token
            out.append(sft_ids[len(context) : end + 1])
        return out, None

    seen = {}

    def spy(prompts):  # TRL's own `_generate`, its input and output kept
        seen["prompts"] = [list(p) for p in prompts]
        seen["result"] = type(grpo)._generate(grpo, prompts)
        return seen["result"]

    grpo._generate_single_turn = sample
    grpo._generate = spy
    grpo._generate_and_score_completions([row, row])
    prompt_ids, completion_ids, tool_mask, completions = seen["result"][:4]
    assert completion_ids[0] == completion_ids[1] and completions[0] == completions[1]  # the stub is deterministic
    return seen["prompts"][0], list(prompt_ids[0]), list(completion_ids[0]), list(tool_mask[0]), completions[0]


@pytest.mark.filterwarnings("ignore:You are using 'environment_factory'")
@pytest.mark.parametrize("think", [True, False], ids=["thinking", "no_think"])
def test_sft_trainer_renders_a_record_into_the_tokens_the_grpo_tool_loop_shows_the_model(collected, tmp_path, think):
    from datasets import load_dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import get_json_schema

    from training.tool_calls import tools_column

    tokenizer = AutoTokenizer.from_pretrained(collected["base"])
    model = AutoModelForCausalLM.from_pretrained(collected["base"])
    grpo = _grpo(tokenizer, model, tmp_path / "grpo", think)
    # The `tools` column is what TRL derives from the environment, in its order (the prompt renders them in order).
    assert [get_json_schema(tool) for tool in grpo._env_tools[None]] == tools_column()
    errors = []
    for policy, folder in collected["folders"].items():
        # As a user loads it (the card names the data file). `datasets` 5.2 caches a local folder by its
        # name and config, not its contents, so a folder of the same name from an earlier run would be
        # read back from the cache: the download mode makes this run's rows the ones loaded.
        dataset = load_dataset(str(folder), split="train", download_mode="force_redownload")
        assert len(dataset) == EPISODES[policy] and all(row["tools"] == tools_column() for row in dataset)
        prepared = _sft_rows(tokenizer, model, dataset, tmp_path / f"sft-{policy}", think)
        for record, sft_row in zip(dataset, prepared, strict=True):
            errors += _same_episode(tokenizer, grpo, record, sft_row["input_ids"], sft_row["labels"], think)
    assert errors  # the random policy's refused calls came through TRL's `{"error": ...}` path


def _same_episode(tokenizer, grpo, record, sft_ids, labels, think) -> list[str]:
    """Checks one record against TRL's GRPO replay of its task; returns its error results."""
    from releaseops_arena.brief import BOARD_LEAD, prompt_messages
    from training.make_dataset import rows
    from training.sft_warmup import encode
    from training.tool_calls import CLOSING_TURN

    index = record["task"]["index"]
    eos, newline = tokenizer.eos_token_id, tokenizer.encode("\n", add_special_tokens=False)
    prompt, prompt_ids, completion_ids, tool_mask, completions = _grpo_replay(
        grpo, rows("train", index + 1, "easy")[index], sft_ids, eos
    )
    grpo_ids = prompt_ids + completion_ids
    # The same tokens: GRPO's completion stops at the closing turn's end-of-turn token, after which the
    # rendered conversation has the template's newline (trained on, as after every assistant turn below).
    assert grpo_ids[-1] == eos and sft_ids == grpo_ids + newline
    # The same conversation: the record's messages are GRPO's prompt (the brief, the board appended to the
    # user turn) and its completions, ending on the closing turn, without a call.
    assert prompt[0] == prompt_messages()[0] and prompt[1]["content"].startswith(BOARD_LEAD)
    assert [*prompt, *completions] == record["messages"]
    assert completions[-1] == CLOSING_TURN
    # The same episode: the environment TRL drove scored it as the collector did.
    assert grpo.environments[0].get_reward() == pytest.approx(record["reward"])
    # SFT trains on every token the model generates in GRPO, and beyond them only on template glue that
    # GRPO puts in the prompt or a tool turn's suffix: the newline after each end-of-turn token (and,
    # without thinking, the empty think block that ends each generation prompt). Never on a tool result.
    trained = [label != -100 for label in labels]
    generated = [0] * len(prompt_ids) + tool_mask + [0]  # the last: the newline after the closing turn
    assert all(t for t, g in zip(trained, generated) if g)
    glue = tokenizer.decode([tok for tok, t, g in zip(sft_ids, trained, generated) if t and not g])
    calls = sum(1 for m in completions if m.get("tool_calls"))
    block = "" if think else "<think>\n\n</think>\n\n"
    assert glue == block + ("\n" + block) * calls + "\n"
    errors = [m["content"] for m in completions if m["role"] == "tool" and m["content"].startswith("{'error'")]
    if think:
        # The project's warm start (training/sft_warmup.py) encodes a record with its tools as SFTTrainer
        # does, and masks the same tokens but the calls the environment refused (it learns the recovery,
        # not the mistake).
        ((ids, mask),) = encode(tokenizer, [record["messages"]], tools=record["tools"])
        assert ids.tolist() == sft_ids
        assert all(t for t, m in zip(trained, mask.tolist()) if m)
        assert (mask.tolist() == trained) == (not errors)
    return errors


def test_the_dataset_folder_loads_with_its_card(collected):
    import yaml
    from datasets import load_dataset

    from releaseops_arena.brief import PROMPT_VERSION
    from releaseops_arena.catalog import BENCHMARK_VERSION
    from training.collect import hub_folder
    from training.tool_calls import tools_column

    folder = hub_folder(collected["folders"]["oracle"], repo_id="someone/releaseops-oracle")
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "metadata.json", "results.jsonl"]
    card = (folder / "README.md").read_text()
    _, front, body = card.split("---\n", 2)
    meta = yaml.safe_load(front)
    assert meta["configs"] == [{"config_name": "default", "data_files": [{"split": "train", "path": "results.jsonl"}]}]
    assert meta["license"] == "apache-2.0" and {"openenv", "tool-calling", "sft"} <= set(meta["tags"])
    assert (meta["benchmark_version"], meta["prompt_version"]) == (BENCHMARK_VERSION, PROMPT_VERSION)
    for schema in tools_column():
        assert f"| `{schema['function']['name']}` |" in body
    assert "**Episodes:** 2" in body and 'load_dataset("someone/releaseops-oracle"' in body  # OpenEnv's card, kept
    # The card's configs: metadata.json is not data (a fresh read: `datasets` caches a folder by its name).
    rows = load_dataset(str(folder), split="train", download_mode="force_redownload")
    assert len(rows) == 2 and {"messages", "tools", "reward", "task"} <= set(rows.column_names)
    assert rows[0]["tools"] == tools_column()
    assert rows[0]["task"]["prompt_version"] == PROMPT_VERSION
    assert json.loads((folder / "metadata.json").read_text())["prompt_version"] == PROMPT_VERSION


def test_push_to_hub_uploads_the_folder_with_openenvs_push_to_hf_hub(tmp_path, monkeypatch):
    import huggingface_hub
    from openenv.core.harness import collect as harness

    from training import collect

    calls, pushed = [], []

    class FakeApi:  # the upload: the only part that needs the Hub
        def __init__(self, token=None):
            calls.append(("init", token))

        def create_repo(self, **kwargs):
            calls.append(("create_repo", kwargs))

        def upload_folder(self, **kwargs):
            folder = kwargs["folder_path"]
            calls.append(("upload_folder", kwargs, open(f"{folder}/README.md").read()))

    original = harness.push_to_hf_hub

    def spy(output_dir, repo_id, **kwargs):
        pushed.append((output_dir, repo_id, kwargs))
        return original(output_dir, repo_id, **kwargs)

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setattr(harness, "push_to_hf_hub", spy)
    out = tmp_path / "rule"
    collect.main(
        [
            "--policy",
            "rule",
            "-n",
            "1",
            "--difficulty",
            "easy",
            "--out",
            str(out),
            "--push-to-hub",
            "someone/releaseops-rule",
            "--private",
        ]
    )
    assert [(str(d), r, k["private"]) for d, r, k in pushed] == [(str(out), "someone/releaseops-rule", True)]
    assert calls[1] == (
        "create_repo",
        {"repo_id": "someone/releaseops-rule", "repo_type": "dataset", "private": True, "exist_ok": True},
    )
    name, upload, readme = calls[2]
    assert name == "upload_folder" and upload["folder_path"] == str(out)
    assert (upload["repo_id"], upload["repo_type"]) == ("someone/releaseops-rule", "dataset")
    # OpenEnv writes its card just before the upload; the uploaded one is ours (which keeps OpenEnv's as its body).
    assert readme == collect.dataset_card(out, "someone/releaseops-rule") == (out / "README.md").read_text()
    assert "license: apache-2.0" in readme and "# OpenEnv rollouts" in readme
