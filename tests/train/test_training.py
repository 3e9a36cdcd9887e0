"""CPU smoke tests of the training pipeline: a tiny offline model, SFT warm start, GRPO, evaluation.

Over 400 lines: one smoke path (build, warm start, GRPO, evaluate) whose tests share their fixtures.
"""

import json

import pytest

from releaseops_arena import ReleaseOpsToolEnv
from tests.live_server import run_live_server
from training import train_grpo
from training.evaluate import evaluate
from training.sft_warmup import warm_start
from training.tiny_model import build

SEVEN = [
    "approve_proposal",
    "ask_worker",
    "block_proposal",
    "hold_release",
    "inspect_ci_run",
    "inspect_pr_diff",
    "inspect_ticket",
]


@pytest.fixture(scope="session")
def tiny_sft(tmp_path_factory):
    """A ~360k-parameter Qwen3-style model with an offline BPE tokenizer, warmed up on rule episodes."""
    root = tmp_path_factory.mktemp("tiny")
    base = build(root / "base")
    # 8 epochs: with 5 the tiny model's tool calling depends on chance details of its BPE
    # vocabulary (a change in the tool schemas' key order once left it calling no tool at all).
    warm = warm_start(base, root / "sft", policy="rule", episodes=24, epochs=8, difficulty="easy")
    assert warm["losses"][-1] < warm["losses"][0] / 4  # it learned the format
    return str(root / "sft")


def grpo_args(model, out, *extra):
    return train_grpo.parser().parse_args(
        [
            "--model",
            model,
            "--cpu",
            "--steps",
            "2",
            "--num-generations",
            "4",
            "--batch-size",
            "4",
            "--max-completion-length",
            "1536",
            "--max-tool-calls",
            "12",
            "--rows",
            "16",
            "--difficulty",
            "easy",
            "--lr",
            "1e-4",
            "--no-save",
            "--output-dir",
            str(out),
            *extra,
        ]
    )


def step_logs(history):
    return [h for h in history if "episode/finished" in h]


def test_grpo_in_process_discovers_the_seven_tools_and_trains_on_the_environment_reward(tiny_sft, tmp_path):
    result = train_grpo.train(grpo_args(tiny_sft, tmp_path))
    assert result["tools"] == SEVEN
    logs = step_logs(result["log_history"])
    assert len(logs) == 2
    for log in logs:
        for key in (
            "episode/safe_ship",
            "episode/unsafe_ship",
            "episode/missed_deadline",
            "episode/finished",
            "tools/call_frequency",
            "tools/failure_frequency",
        ):
            assert key in log, key
        assert -20 < log["reward"] < 2
    # The environment's own reward (get_reward) is the only reward: the logging function adds nothing.
    for log in logs:
        assert log["reward"] == pytest.approx(log["rewards/ReleaseOpsToolEnv/mean"], abs=1e-5)
    assert any(log["tools/call_frequency"] > 0 for log in logs)
    assert json.loads((tmp_path / "log_history.json").read_text()) == result["log_history"]


def test_grpo_against_a_live_server_closes_every_session(tiny_sft, tmp_path):
    from websockets.sync.client import connect

    # The trainer fills every slot from one address: the operator lifts the per-address share.
    with run_live_server(env={"MAX_CONCURRENT_ENVS": "4", "MAX_SESSIONS_PER_CLIENT": "0"}) as url:
        result = train_grpo.train(grpo_args(tiny_sft, tmp_path, "--env-url", url, "--steps", "1"))
        assert result["tools"] == SEVEN
        assert len(step_logs(result["log_history"])) == 1
        # Every slot is free again: the run closed its sessions.
        sockets = [connect(url.replace("http", "ws") + "/ws") for _ in range(4)]
        try:
            for ws in sockets:
                ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
                assert json.loads(ws.recv())["type"] == "observation"
        finally:
            for ws in sockets:
                ws.close()


def test_training_fails_fast_when_the_server_is_too_small(tiny_sft, tmp_path):
    with run_live_server(env={"MAX_CONCURRENT_ENVS": "2"}) as url:
        with pytest.raises(Exception, match="capacity"):
            train_grpo.train(grpo_args(tiny_sft, tmp_path, "--env-url", url))


def test_a_checkpoint_is_evaluated_by_the_same_harness(tiny_sft):
    result = evaluate(f"hf:{tiny_sft}", "heldout_seeds", 3, "easy", progress=False)
    m = result["metrics"]
    assert m["episodes"] == 3
    # The harness reports what the checkpoint really did: replaying it by hand on the same
    # scenarios gives the same returns, episode by episode.
    from releaseops_arena.policies import play
    from releaseops_arena.splits import scenarios
    from training.evaluate import make_policy

    by_hand = [
        play(make_policy(f"hf:{tiny_sft}"), s, i * 7919)["return"]
        for i, s in enumerate(scenarios("heldout_seeds", 3, "easy"))
    ]
    assert [e["episode_return"] for e in result["episodes"]] == pytest.approx(by_hand)


def _trainer_without_reward_funcs(model_path, out, factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    args = grpo_args(model_path, out, "--steps", "1")
    return GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_path),
        args=train_grpo.build_config(args, str(out)),
        train_dataset=train_grpo.load_dataset(None, 8, "easy"),
        processing_class=AutoTokenizer.from_pretrained(model_path),
        environment_factory=factory,
    )


class _Recorded(ReleaseOpsToolEnv):
    seen: list = []

    def get_reward(self) -> float:
        value = super().get_reward()
        _Recorded.seen.append((value, self._episode.episode_return, self.done, self.terminated or self.truncated))
        return value


def test_grpo_trains_in_process_with_the_environment_owning_the_reward(tiny_sft, tmp_path):
    _Recorded.seen.clear()
    trainer = _trainer_without_reward_funcs(tiny_sft, tmp_path, _Recorded)
    assert sorted(t.__name__ for t in trainer.tools) == SEVEN  # get_reward is not a tool
    trainer.train()
    assert len(_Recorded.seen) == 4  # one call per rollout
    for value, engine_return, done, ended in _Recorded.seen:
        assert value == engine_return and done and ended  # an unfinished rollout was cut by the engine
    logged = [h for h in trainer.state.log_history if "rewards/_Recorded/mean" in h][0]
    assert logged["reward"] == pytest.approx(sum(v for v, *_ in _Recorded.seen) / 4, abs=1e-4)


def test_grpo_trains_remotely_with_the_server_scoring_unfinished_episodes(tiny_sft, tmp_path):
    from client import RemoteReleaseOpsToolEnv, close_all

    seen = []

    class Recorded(RemoteReleaseOpsToolEnv):
        def get_reward(self) -> float:
            value = super().get_reward()
            seen.append((value, self.metrics.get("episode_return"), self.done))
            return value

    with run_live_server(env={"MAX_CONCURRENT_ENVS": "4", "MAX_SESSIONS_PER_CLIENT": "0"}) as url:
        trainer = _trainer_without_reward_funcs(tiny_sft, tmp_path, lambda: Recorded(url))
        assert sorted(t.__name__ for t in trainer.tools) == SEVEN
        try:
            trainer.train()
        finally:
            close_all()
    assert len(seen) == 4
    for value, server_return, done in seen:
        assert done and value == pytest.approx(server_return)  # the server ended and scored every episode


def test_an_unfinished_episode_is_scored_once_in_the_engine_the_same_in_process_and_remote(live_server):
    from client import make_remote_env_factory

    scenario = {"family": "qa_undercalls_p1_checkout_bug", "seed": 4, "difficulty": "easy"}
    local, remote = ReleaseOpsToolEnv(), make_remote_env_factory(live_server)()
    for env in (local, remote):
        env.reset(**scenario)
        env.hold_release("awaiting_fix")
        assert not env.done
    assert remote.get_reward() == pytest.approx(local.get_reward())
    assert local.truncated and remote.truncated and not local.terminated
    assert local.metrics["terminal_reason"] == remote.metrics["terminal_reason"] == "abandoned"
    assert local.get_reward() == local.reward  # idempotent: scored once


def test_collected_episodes_load_as_a_dataset_resume_and_warm_start_the_tiny_model(tmp_path):
    from datasets import load_dataset

    from training.collect import collect
    from training.tool_calls import CLOSING_TURN, tools_column

    out = tmp_path / "rule-easy"
    first = collect("rule", "train", 3, out, "easy", progress=False)
    again = collect("rule", "train", 6, out, "easy", progress=False)  # an interrupted run, resumed
    assert (first["collected"], again["collected"], again["skipped"], again["episodes"]) == (3, 3, 3, 6)
    rows = load_dataset("json", data_files=str(out / "results.jsonl"), split="train")
    assert len(rows) == 6
    assert {"messages", "tools", "reward", "tool_trace", "metrics", "task", "verify_metrics"} <= set(rows.column_names)
    for row in rows:
        assert sum(row["verify_metrics"]["reward_breakdown"].values()) == pytest.approx(row["reward"])
        assert [m["role"] for m in row["messages"][:3]] == ["system", "user", "assistant"]
        assert row["messages"][-1] == CLOSING_TURN and row["messages"][-2]["role"] == "tool"  # ends TRL's loop
        assert len(row["tool_trace"]) == (len(row["messages"]) - 3) // 2
        assert row["tools"] == tools_column()
    assert json.loads((out / "metadata.json").read_text())["episodes"] == 6
    assert load_dataset(str(out), split="train")["episode_id"] == rows["episode_id"]  # the folder loads by its card
    warm = warm_start(build(tmp_path / "base"), tmp_path / "warm", data=out, episodes=6, epochs=3)
    k = warm["samples"]
    assert k >= 1
    assert sum(warm["losses"][-k:]) < sum(warm["losses"][:k]) / 2  # the last epoch's loss is under half the first's


def test_collected_episodes_carry_the_benchmark_and_prompt_versions_and_never_mix_with_others(tmp_path):
    from openenv.core.harness.collect import RolloutSerializer

    from releaseops_arena.brief import PROMPT_VERSION
    from releaseops_arena.catalog import BENCHMARK_VERSION
    from training.collect import collect

    out = tmp_path / "rule"
    collect("rule", "train", 2, out, "easy", progress=False)
    meta = json.loads((out / "metadata.json").read_text())
    versions = (meta["benchmark_version"], meta["prompt_version"])
    assert versions == (BENCHMARK_VERSION, PROMPT_VERSION) == ("v3", "brief-1")
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["task"]["benchmark_version"], r["task"]["prompt_version"]) for r in records] == [
        (BENCHMARK_VERSION, PROMPT_VERSION)
    ] * 2
    assert collect("rule", "train", 2, out, "easy", progress=False)["skipped"] == 2  # same versions: resumes
    for key, other, message in [
        ("benchmark_version", "v2", "benchmark version v2, not v3"),
        ("prompt_version", "brief-0", "prompt version brief-0, not brief-1"),
        ("prompt_version", None, "prompt version unversioned, not brief-1"),
    ]:
        (out / "metadata.json").write_text(json.dumps({**meta, key: other}))
        with pytest.raises(ValueError, match=f"{message}: collect into a new directory"):
            collect("rule", "train", 4, out, "easy", progress=False)
    # Directories interrupted before their metadata, their first record from before versions were stamped.
    for key, message in [
        ("benchmark_version", "benchmark version unversioned"),
        ("prompt_version", "prompt version unversioned"),
    ]:
        old = tmp_path / f"old-{key}"
        RolloutSerializer(old).write_episode(_unversioned_record(records[0], key))
        with pytest.raises(ValueError, match=message):
            collect("rule", "train", 2, old, "easy", progress=False)


def _unversioned_record(record: dict, key: str):
    from openenv.core.harness.collect import EpisodeRecord

    task = {k: v for k, v in record["task"].items() if k != key}
    return EpisodeRecord(**{**{k: v for k, v in record.items() if k != "tools"}, "task": task})


# ------------------------------------------------- the LM learnability experiment's pieces

import re  # noqa: E402

ID_PATTERN = re.compile(r"\b(?:pr_\d+|ci_run_\d+|ticket_\d+|p\d+)\b")


@pytest.fixture(scope="module")
def id_tokenizer():
    from training.tiny_model import build_tokenizer

    return build_tokenizer()


def _board_texts(policy: str, n: int, difficulty: str):
    from releaseops_arena.policies import POLICIES, play
    from releaseops_arena.splits import scenarios

    for i, scenario in enumerate(scenarios("train", n, difficulty)):
        run = play(POLICIES[policy](), scenario, rng_seed=i)
        # Results only: an error may echo an id the policy made up (the random policy's `ticket_0`).
        yield run["observation"] + "".join(s["result"] for s in run["steps"] if "result" in s)


def test_every_id_the_generator_can_draw_is_one_token_that_round_trips(id_tokenizer):
    from training.tiny_model import id_vocabulary

    vocabulary = id_vocabulary()
    assert len(vocabulary) == len(set(vocabulary)) == 900 + 900 + 9000 + 299
    encoded = id_tokenizer(vocabulary, add_special_tokens=False)["input_ids"]
    assert all(len(ids) == 1 for ids in encoded), [v for v, ids in zip(vocabulary, encoded) if len(ids) != 1][:5]
    assert [id_tokenizer.decode(ids) for ids in encoded] == vocabulary
    # Ids drawn by the generator on real boards are in the vocabulary and stay one token in context
    # (a short id is never matched inside a longer one: p1 in p17, pr_349 in a word).
    for text in _board_texts("random", 12, "hard"):
        for ref in ID_PATTERN.findall(text):
            assert ref in set(vocabulary), ref
        ids = id_tokenizer(text, add_special_tokens=False)["input_ids"]
        assert id_tokenizer.decode(ids) == text
        tokens = set(id_tokenizer.convert_ids_to_tokens(ids))
        assert set(ID_PATTERN.findall(text)) <= tokens
    pieces = id_tokenizer.convert_ids_to_tokens(
        id_tokenizer('"p17","p1_x",pr_3490', add_special_tokens=False)["input_ids"]
    )
    assert "p17" in pieces and "p1" not in pieces and "pr_349" not in pieces


def test_warm_start_data_is_trls_own_tool_loop_conversation(id_tokenizer, tmp_path):
    """Replaying each collected episode the way TRL's GRPO tool loop does (prompt + reset observation,
    the parsed assistant message, `{"role": "tool", "name", "content": str(result)}` or
    `{"error": str(exc)}`, until an assistant turn without a call) gives the same messages; and the warm
    start's assistant tokens, parsed by TRL's response parser, give back exactly those tool calls, then
    the closing turn without one. (tests/train/test_sft_ready.py runs TRL's own GRPO loop on them.)"""
    from trl.chat_template_utils import add_response_schema, get_training_chat_template

    from releaseops_arena.brief import prompt_messages
    from releaseops_arena.splits import task_scenario
    from training.collect import collect, load_conversations
    from training.sft_warmup import encode, tool_functions

    collect("oracle", "train", 4, tmp_path, "easy", progress=False)
    conversations = load_conversations(tmp_path, only_safe=False)
    assert len(conversations) == 4
    tokenizer = add_response_schema(id_tokenizer)
    template = get_training_chat_template(tokenizer)
    assert template is not None  # TRL recognised the chat template
    for index, messages in enumerate(conversations):
        env = ReleaseOpsToolEnv()
        prompt = prompt_messages()  # a dataset row's prompt; TRL appends the reset's board to its last message
        board = env.reset(**task_scenario("train", index, "easy"))
        replay = [*prompt[:-1], {**prompt[-1], "content": prompt[-1]["content"] + board}]
        for message in messages[len(prompt) :]:
            if message["role"] != "assistant":
                continue
            replay.append(message)
            if not message.get("tool_calls"):  # a turn without a call ends TRL's tool loop
                break
            for call in message["tool_calls"]:
                fn = call["function"]
                try:
                    result = getattr(env, fn["name"])(**fn["arguments"])
                except Exception as exc:
                    result = {"error": str(exc)}
                replay.append({"role": "tool", "name": fn["name"], "content": str(result)})
        assert replay == messages
        ((ids, mask),) = encode(tokenizer, [messages])
        ids, mask = ids.tolist(), mask.tolist()
        spans, start = [], None
        for t, m in enumerate(mask + [0]):
            if m and start is None:
                start = t
            elif not m and start is not None:
                spans.append((tokenizer.decode(ids[:start]), tokenizer.decode(ids[start:t])))
                start = None
        turns = [m for m in messages if m["role"] == "assistant"]
        assert len(spans) == len(turns)
        for (prompt, text), expected in zip(spans, turns):
            parsed = tokenizer.parse_response(text, prefix=prompt)
            if expected.get("tool_calls"):
                got = [{"type": "function", "function": c["function"]} for c in parsed["tool_calls"]]
                assert got == expected["tool_calls"]
            else:  # the closing turn: no call, so TRL's loop stops there
                assert parsed == {"role": "assistant", "content": expected["content"]}
    assert sorted(f.__name__ for f in tool_functions()) == SEVEN  # the schemas the warm start renders


def test_the_lm_pieces_are_deterministic_under_a_seed(id_tokenizer, tmp_path):
    import torch

    from research.lm_learnability import warm_conversations
    from training.sft_warmup import warm_start
    from training.tiny_model import build_model

    a, b, c = (build_model(id_tokenizer, seed=s).state_dict() for s in (0, 0, 1))
    assert all(torch.equal(a[k], b[k]) for k in a) and not all(torch.equal(a[k], c[k]) for k in a)
    base = tmp_path / "base"
    build_model(id_tokenizer, seed=0).save_pretrained(base)
    id_tokenizer.save_pretrained(base)
    conversations = warm_conversations("oracle", 2)
    assert conversations == warm_conversations("oracle", 2)
    runs = [
        warm_start(base, tmp_path / f"sft{i}", conversations=conversations, epochs=2, seed=s)["losses"]
        for i, s in enumerate((0, 0, 1))
    ]
    assert runs[0] == runs[1] and runs[0] != runs[2] and len(runs[0]) == 4


def _summary(calls: float, ret: tuple[float, float, float], invalid: float = 0.05, finished: float = 0.8) -> dict:
    interval = lambda r: {"rate": r, "ci95": [max(0, r - 0.05), min(1, r + 0.05)], "n": 100}  # noqa: E731
    return {
        "episodes": 100,
        "calls_per_episode": {"mean": calls, "ci95": [calls - 0.3, calls + 0.3]},
        "invalid_rate": interval(invalid),
        "finished": interval(finished),
        "safe_ship": interval(0.5),
        "unsafe_ship": interval(0.1),
        "missed_deadline": interval(0.4),
        "mean_return": {"mean": ret[1], "ci95": [ret[0], ret[2]]},
    }


def test_grpo_counts_as_a_gain_only_with_separate_intervals_and_calls_kept():
    from research.lm_learnability import verdict

    before = _summary(8.0, (0.1, 0.2, 0.3))
    assert verdict(before, _summary(7.5, (0.35, 0.45, 0.55)))["targets"]["grpo_gain"]
    assert not verdict(before, _summary(7.5, (0.25, 0.35, 0.45)))["targets"]["grpo_gain"]  # intervals overlap
    fewer = verdict(before, _summary(3.0, (0.35, 0.45, 0.55)))
    assert fewer["calls_collapse"] and not fewer["targets"]["grpo_gain"]  # a gain from calling fewer tools
    assert verdict(_summary(8.0, (0.1, 0.2, 0.3), invalid=0.05, finished=0.6), before)["targets"] == {
        "sft_valid_calls_90": True,
        "sft_finished_50": True,
        "grpo_gain": False,
    }
    assert not verdict(_summary(8.0, (0, 0, 0), invalid=0.2, finished=0.3), before)["targets"]["sft_finished_50"]


def test_the_report_section_shows_every_measured_number():
    from research.lm_learnability import markdown, verdict

    before, after = _summary(8.0, (0.1, 0.2, 0.3)), _summary(7.25, (0.35, 0.45, 0.55), invalid=0.02)
    settings = {
        "hidden": 192,
        "layers": 3,
        "warm_policy": "oracle",
        "num_generations": 8,
        "grpo_lr": 1e-4,
        "recovery": 0.5,
        "select_episodes": 100,
        "select_start": 100_000,
    }
    results = {
        "config": {
            "minutes": 60,
            "seed": 0,
            "n_eval": 100,
            "split": "heldout_seeds",
            "difficulty": "easy",
            "settings": settings,
            "vocab": 13000,
            "parameters": 3_500_000,
            "warm_start_episodes": 1500,
        },
        "stages": {"build": {"wall_s": 5.0, "cpu_s": 4.5}, "sft": {"wall_s": 900.0, "cpu_s": 880.5}},
        "sft": {"steps": 1200, "loss_first": 9.5, "loss_last": 0.12, "seed": 1},
        "grpo": {"steps": 40},
        "warm_starts": [
            {"seed": 0, "steps": 1100, "loss_last": 0.31, "validation": _summary(6.0, (-0.4, -0.3, -0.2))},
            {"seed": 1, "steps": 1200, "loss_last": 0.12, "validation": before},
        ],
        "eval": {"warm start (SFT)": before, "SFT + GRPO": after},
        **verdict(before, after),
        "variants": [
            {
                "name": "v1",
                "note": "byte-level BPE",
                "valid_calls": "14",
                "finished": "0",
                "calls_per_episode": "9.1",
                "mean_return": "-2.1",
                "measured_with": "60 episodes",
            }
        ],
    }
    text = markdown(results)
    for expected in (
        "7.25 [6.95, 7.55]",
        "2.0 [0, 7]",
        "0.450 [0.350, 0.550]",
        "sft 900.0 / 880.5",
        "3.5M",
        "1500 oracle episodes",
        "1200 steps",
        "byte-level BPE",
        "50% of their blocks first tried",
        "seed 1 was kept for its mean return on 100 train-split validation tasks (easy, tasks 100000-100099",
        "seed 0: 1100 steps, loss 0.3100, return -0.300 [-0.400, -0.200], valid calls 95.0%",
        "GRPO raises mean return with non-overlapping intervals, calls per episode not collapsed: met",
    ):
        assert expected in text, expected


def test_the_cached_greedy_decoding_of_the_hf_policy_is_what_generate_gives(id_tokenizer, tmp_path):
    """The policy keeps its key/value cache across turns and episodes and cuts it back where a new
    prompt differs; its tokens must be exactly model.generate's greedy tokens."""
    from tests.lm_checks import assert_hf_policy_decodes_as_generate
    from training.tiny_model import build_model

    build_model(id_tokenizer, hidden=64, layers=2, seed=3).save_pretrained(tmp_path)
    id_tokenizer.save_pretrained(tmp_path)
    assert_hf_policy_decodes_as_generate(tmp_path)


def test_a_call_written_without_its_arguments_is_refused_by_the_engine_and_the_episode_goes_on(id_tokenizer, tmp_path):
    """A model's call with no "arguments" (or no name) once broke the chat template on the next turn's
    prompt and so the whole evaluation; it must reach the engine as an empty call, which refuses it."""
    from releaseops_arena.splits import task_scenario
    from training.llm_policy import LLMPolicy
    from training.tiny_model import build_model

    build_model(id_tokenizer, hidden=32, layers=1, seed=3).save_pretrained(tmp_path)
    id_tokenizer.save_pretrained(tmp_path)
    policy = LLMPolicy(str(tmp_path), max_new_tokens=4)
    env = ReleaseOpsToolEnv()
    policy.begin(env.reset(**task_scenario("heldout_seeds", 0, "easy")))
    written = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "approve_proposal"}}, {}]}
    real, policy._generate = policy._generate, lambda: written
    assert policy.act(None) == ("approve_proposal", {})
    with pytest.raises(ValueError, match="proposal_id"):  # the engine names what is missing
        env._call_tool("approve_proposal")
    policy.observe("error: missing argument proposal_id")
    assert policy.act(None) == ("None", {})  # the call with no name at all: refused as an unknown tool
    policy.observe("error: unknown tool")
    policy._generate = real
    policy.act(None)  # the next prompt renders both calls and the model answers


def _rank_stops(rank: int, init: str, late_rank: int, out) -> None:
    """One gloo rank of the time-limit check: only `late_rank`'s clock is past the deadline."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    try:
        limit = train_grpo.TimeLimit(1.0, clock=lambda: 1e9 if rank == late_rank else 0.0)
        control = type("Control", (), {"should_training_stop": False})()
        limit.deadline = 60.0  # what on_train_begin sets from a clock at 0
        limit.on_step_end(None, None, control)
        out.put((rank, control.should_training_stop))
    finally:
        dist.destroy_process_group()


def test_every_data_parallel_rank_stops_at_the_step_the_first_late_rank_does(tmp_path):
    # A rank that stopped alone would leave the other waiting in the next gradient all-reduce forever.
    import torch.multiprocessing as mp

    for late in (0, 1):
        context = mp.get_context("spawn")
        out = context.Queue()
        procs = [
            context.Process(target=_rank_stops, args=(r, f"file://{tmp_path}/rdv{late}", late, out)) for r in (0, 1)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=120)
        assert all(p.exitcode == 0 for p in procs)
        assert sorted(out.get(timeout=5) for _ in procs) == [(0, True), (1, True)]


def test_grpo_runs_on_two_data_parallel_cpu_ranks_and_saves_one_model(tiny_sft, tmp_path):
    from research.lm_learnability import data_parallel_grpo

    args = [
        "--model",
        tiny_sft,
        "--cpu",
        "--steps",
        "1",
        "--num-generations",
        "4",
        "--batch-size",
        "4",
        "--max-completion-length",
        "1536",
        "--max-tool-calls",
        "12",
        "--rows",
        "16",
        "--difficulty",
        "easy",
        "--lr",
        "1e-4",
        "--output-dir",
        str(tmp_path / "ddp"),
    ]
    history = data_parallel_grpo(args, 2)
    logs = step_logs(history)
    assert len(logs) == 1
    # 2 ranks x 4 completions: the logged frequencies are means over both ranks' rollouts
    assert logs[0]["reward"] == pytest.approx(logs[0]["rewards/ReleaseOpsToolEnv/mean"], abs=1e-5)
    assert (tmp_path / "ddp" / "model.safetensors").exists()
    result = evaluate(f"hf:{tmp_path / 'ddp'}", "heldout_seeds", 1, "easy", progress=False)
    assert result["metrics"]["episodes"] == 1  # the saved model loads and plays


def test_an_evaluation_split_over_worker_processes_plays_the_same_episodes(tiny_sft):
    from research.lm_learnability import evaluation

    assert evaluation(tiny_sft, 4, workers=2) == evaluation(tiny_sft, 4, workers=1)
