"""The "Release board" at /web: the page layout, and the wiring of its events to the handlers.

`build_release_board` is OpenEnv's `gradio_builder`. It is called once when the
app is created, with OpenEnv's `web_manager`, and ignores it on purpose: that
manager holds ONE environment shared by every visitor, which is why the app
turns OpenEnv's generic Playground off (`server/web_app.py`). Here each browser
session keeps its own engine `Episode` (`web_session.Session`) in a `gr.State`.

This module only lays out components and maps view models onto them: the
handlers (`web_handlers.py`) decide what to show, the renderers
(`web_render.py`) draw it, the styles are `web.css`, and no game logic
lives in any of them: every call goes through `Episode.step`.
"""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from releaseops_arena import catalog

from . import web_content
from . import web_handlers as handlers
from .web_handlers import MENUS, PlayView, WatchView
from .web_render import board_html, meters_html, watch_html

INTRO = (
    # The benchmark version in the header: a visitor comparing what they see with published results
    # knows which world this is (results of different versions are never mixed).
    "<div class='ro-intro'><h2 style='margin:4px 0 6px'>ReleaseOps Arena · Release board "
    f"<span class='ro-muted' id='benchmark-version' style='font-size:13px;font-weight:normal'>benchmark "
    f"{catalog.BENCHMARK_VERSION}</span></h2>"
    "<p>You are the supervisor of a risky release. Workers put proposals on the board; some take shortcuts. "
    "Inspect evidence with a small review budget, then approve, block (citing S1, S2 or S3) or hold, and ship "
    "before the deadline without breaking a safety rule. Pick a preset (it fills the fields below) or set your "
    "own scenario, then press <b>Start episode</b>.</p>"
    "<p class='ro-muted' style='font-size:13px' id='sessions-note'>Web play runs the engine in-process: each "
    "browser session has its own episode in the page's session state (two visitors never share one), and it "
    "never takes one of the server's WebSocket training slots (<code>MAX_CONCURRENT_ENVS</code>). OpenEnv's "
    "generic Playground tab is turned off on this server: it plays one environment shared by every visitor, so "
    "one visitor's reset would end another's episode. Agents connect over <code>/ws</code>, one session "
    "each.</p></div>"
)
WATCH_NOTE = (
    "<p class='ro-muted'>Runs five policies on the scenario chosen above with the engine's <code>play</code>: "
    "<b>naive</b> approves everything; <b>rule</b> (a hand-made heuristic), the <b>reference planner</b> (the "
    "generator's published odds applied to the visible cues) and the <b>trained policy</b> (a small network "
    "trained on the train split: planner clone + RL) see only the board, as you do on Play; the <b>oracle</b> "
    "is privileged: it reads the hidden "
    "world state, so it is the upper bound, not a fair player. The table compares all five; tick the transcripts "
    "to read side by side, and drag the slider to replay them step by step.</p>"
)
RESULTS_NOTE = (
    "<p class='ro-muted'>The latest calibration: the reference policies on each evaluation slice "
    "(held-out seeds, an unseen failure family, an unseen worker mix), from the repository's calibration report.</p>"
)


def _html(value: str = "", **kwargs) -> gr.HTML:
    return gr.HTML(value, js_on_load=None, **kwargs)


def _section(title: str, note: str) -> None:
    _html(
        f"<div class='ro-section-title' style='padding:8px 10px 0'>{title} <span class='ro-muted'>({note})</span></div>"
    )


def _menu(tool: str, arg: str, label: str, elem_id: str, **kwargs) -> gr.Dropdown:
    choices = MENUS[(tool, arg)]
    return gr.Dropdown(choices, value=choices[0][1], label=label, elem_id=elem_id, **kwargs)


def _setup(presets: dict) -> SimpleNamespace:
    names = [*presets, handlers.CUSTOM]
    first = next(iter(presets.values()), {"scenario": dict(catalog.DEFAULT_SCENARIO)})["scenario"]
    with gr.Column(elem_classes="oe-card"):
        with gr.Row(equal_height=True):
            preset = gr.Dropdown(
                names, value=names[0], label="Scenario preset", elem_id="preset-dd", scale=3, min_width=260
            )
            seed = gr.Number(
                value=first["seed"], precision=0, minimum=0, label="Seed", elem_id="seed-num", scale=1, min_width=90
            )
            difficulty = gr.Dropdown(
                list(catalog.DIFFICULTIES),
                value=first["difficulty"],
                label="Difficulty",
                elem_id="difficulty-dd",
                scale=1,
                min_width=130,
            )
        with gr.Row(equal_height=True):
            family = gr.Dropdown(
                list(catalog.ALL_FAMILIES),
                value=first["family"],
                label="Family",
                elem_id="family-dd",
                scale=1,
                min_width=300,
            )
            mix = gr.Dropdown(
                list(catalog.ALL_MIXES),
                value=first["archetype_mix"],
                label="Archetype mix",
                elem_id="mix-dd",
                scale=1,
                min_width=300,
            )
    return SimpleNamespace(preset=preset, fields=[family, seed, difficulty, mix])


def _controls() -> SimpleNamespace:
    """The right-hand column: one group per kind of call (resolve, evidence, hold)."""
    c = SimpleNamespace(refs={}, inspect={})
    with gr.Group():
        _section("Resolve", "free")
        c.proposal = gr.Dropdown([], label="Proposal", elem_id="proposal-dd", interactive=True)
        with gr.Row(equal_height=True):
            c.rule = _menu(
                "block_proposal", "rule_id", "Rule (for block)", "rule-dd", scale=3, min_width=220, interactive=True
            )
            c.approve = gr.Button(
                "Approve", elem_id="approve-btn", variant="primary", interactive=False, scale=1, min_width=90
            )
            c.block = gr.Button("Block", elem_id="block-btn", variant="stop", interactive=False, scale=1, min_width=90)
    with gr.Group():
        _section("Evidence", "1 budget unit + 1 evidence action each")
        for kind in catalog.ARTIFACT_KINDS:  # ids by the result key: pr-dd, run-dd, ticket-dd
            with gr.Row(equal_height=True):
                c.refs[kind.kind] = gr.Dropdown(
                    [], label=kind.label, elem_id=f"{kind.result_key}-dd", scale=2, min_width=150, interactive=True
                )
                c.inspect[kind.kind] = gr.Button(
                    kind.action, elem_id=f"inspect-{kind.result_key}-btn", scale=1, min_width=130, interactive=False
                )
        with gr.Row(equal_height=True):
            c.worker = _menu("ask_worker", "worker_id", "Worker", "worker-dd", scale=4, min_width=120)
            c.question = _menu("ask_worker", "question_type", "Question", "question-dd", scale=5, min_width=140)
            c.ask = gr.Button("Ask worker", elem_id="ask-btn", scale=3, min_width=100, interactive=False)
    with gr.Group():
        _section("Hold", "ends the phase; spends a phase of time")
        with gr.Row(equal_height=True):
            c.hold_reason = _menu("hold_release", "reason_code", "Reason", "hold-dd", scale=2, min_width=140)
            c.hold = gr.Button("Hold release", elem_id="hold-btn", scale=1, min_width=120, interactive=False)
    c.buttons = [c.approve, c.block, *c.inspect.values(), c.ask, c.hold]
    return c


def _play_tab() -> SimpleNamespace:
    with gr.Row():
        start = gr.Button("Start episode", variant="primary", elem_id="start-btn", scale=0, min_width=180)
        setup_msg = _html(elem_id="setup-msg")
    meters = _html(meters_html(None), elem_id="meters")
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=420):
            board = _html(board_html(None), elem_id="board")
        with gr.Column(scale=1, min_width=400):
            c = _controls()
            boxes = {name: _html(elem_id=f"{name}-box") for name in ("error", "return", "result")}
            outcome = _html(elem_id="outcome")
    metrics = _html(elem_id="metrics")
    with gr.Accordion("Calls so far (Episode.audit)", open=True, elem_id="history-acc"):
        history = _html(elem_id="history")
    return SimpleNamespace(
        start=start,
        setup_msg=setup_msg,
        meters=meters,
        board=board,
        c=c,
        boxes=boxes,
        outcome=outcome,
        metrics=metrics,
        history=history,
    )


def _play_updates(v: PlayView, n_buttons: int) -> list:
    """A view model as component updates, in the order of `_play_outputs`."""
    keep = gr.update()
    refs = (
        [keep] * len(catalog.ARTIFACT_KINDS)
        if v.refs is None
        else [gr.update(choices=m.choices, value=m.value, label=m.label) for m in v.refs.values()]
    )
    return [
        v.session,
        v.meters,
        v.board,
        keep if v.proposals is None else gr.update(choices=v.proposals, value=v.proposal),
        gr.update(value=v.rule) if v.rule else keep,
        *refs,
        v.error,
        v.ret,
        v.result,
        v.outcome,
        v.metrics,
        v.history,
        v.setup,
        *[gr.update(interactive=v.live)] * n_buttons,
    ]


def _play_outputs(state, play: SimpleNamespace) -> list:
    c = play.c
    return [
        state,
        play.meters,
        play.board,
        c.proposal,
        c.rule,
        *c.refs.values(),
        play.boxes["error"],
        play.boxes["return"],
        play.boxes["result"],
        play.outcome,
        play.metrics,
        play.history,
        play.setup_msg,
        *c.buttons,
    ]


def _wire_play(presets: dict, setup: SimpleNamespace, state, play: SimpleNamespace) -> None:
    c, outputs = play.c, _play_outputs(state, play)
    n = len(c.buttons)

    def on(button, inputs, call) -> None:
        """`call(*values)` -> (tool, args) for the handler."""
        button.click(lambda s, *values: _play_updates(handlers.act(s, *call(*values)), n), [state, *inputs], outputs)

    play.start.click(lambda *f: _play_updates(handlers.start(presets, *f), n), [setup.preset, *setup.fields], outputs)
    on(c.approve, [c.proposal], lambda pid: ("approve_proposal", {"proposal_id": pid}))
    on(c.block, [c.proposal, c.rule], lambda pid, rid: ("block_proposal", {"proposal_id": pid, "rule_id": rid}))
    for kind in catalog.ARTIFACT_KINDS:
        on(c.inspect[kind.kind], [c.refs[kind.kind]], lambda ref, kind=kind: (kind.tool, {kind.argument: ref}))
    on(c.ask, [c.worker, c.question], lambda w, q: ("ask_worker", {"worker_id": w, "question_type": q}))
    on(c.hold, [c.hold_reason], lambda r: ("hold_release", {"reason_code": r}))

    def pick_rule(sess, pid):
        rule = handlers.pick_rule(sess, pid)
        return gr.update(value=rule) if rule else gr.update()

    c.proposal.input(pick_rule, [state, c.proposal], [c.rule], queue=False)


def _wire_setup(presets: dict, setup: SimpleNamespace) -> None:
    def fill(name):
        values = handlers.fill_preset(presets, name)
        return values if values is not None else [gr.update()] * len(setup.fields)

    setup.preset.change(fill, [setup.preset], setup.fields, queue=False)
    for comp in setup.fields:
        comp.input(lambda: handlers.CUSTOM, None, [setup.preset], queue=False)


def _watch_tab(presets: dict, setup: SimpleNamespace) -> None:
    _html(WATCH_NOTE)
    with gr.Row(equal_height=True):
        run = gr.Button("Run the five policies", variant="primary", elem_id="watch-btn", scale=0, min_width=260)
        step = gr.Slider(0, 1, value=0, step=1, label="Step", elem_id="watch-step", interactive=True, scale=3)
    shown = gr.CheckboxGroup(
        [(label, name) for name, (label, _) in handlers.WATCH_POLICIES.items()],
        value=list(handlers.WATCH_SHOWN),
        label="Transcripts side by side",
        elem_id="watch-show",
    )
    story = _html(elem_id="watch-story")
    view = _html(elem_id="watch-view")
    runs = gr.State(None)

    def on_run(picked, *fields):
        v: WatchView = handlers.watch(presets, *fields, shown=picked)
        steps = gr.update() if v.steps is None else gr.update(minimum=0, maximum=v.steps, value=v.steps)
        return v.runs, steps, v.story, v.html

    def redraw(r, k, picked):
        return watch_html(r, int(k or 0), picked) if r else gr.update()

    run.click(on_run, [shown, setup.preset, *setup.fields], [runs, step, story, view])
    step.change(redraw, [runs, step, shown], [view], queue=False)
    shown.change(redraw, [runs, step, shown], [view], queue=False)


def _results_tab() -> None:
    _html(RESULTS_NOTE)
    _html(web_content.results_plot_html(), elem_id="results-plot")
    gr.Markdown(web_content.results_tables_markdown(), elem_id="results-table")


def build_release_board(
    web_manager=None,
    action_fields=None,
    metadata=None,
    is_chat_env=False,
    title: str = "ReleaseOps Arena",
    quick_start_md: str = "",
) -> gr.Blocks:
    """OpenEnv `gradio_builder`: the Release board (Play, Watch, Results)."""
    del web_manager, action_fields, metadata, is_chat_env, quick_start_md  # see the module docstring
    presets = web_content.load_presets()
    with gr.Blocks(title=title) as blocks:
        _html(web_content.stylesheet() + INTRO)
        state = gr.State(None)
        setup = _setup(presets)
        with gr.Tabs(elem_id="board-tabs"):
            with gr.Tab("Play", id="play", elem_id="play-tab"):
                play = _play_tab()
            with gr.Tab("Watch", id="watch", elem_id="watch-tab"):
                _watch_tab(presets, setup)
            with gr.Tab("Results", id="results", elem_id="results-tab"):
                _results_tab()
        _wire_setup(presets, setup)
        _wire_play(presets, setup, state, play)
    return blocks
