"""The "Release board" at /web: the page layout, and the wiring of its events to the handlers.

`build_release_board` is OpenEnv's `gradio_builder`. It is called once when the
app is created, with OpenEnv's `web_manager`, and ignores it on purpose: that
manager holds ONE environment shared by every visitor, which is why the app
turns OpenEnv's generic Playground off (`server/web_app.py`). Here each browser
session keeps its own engine `Episode` (`web_session.Session`) in a `gr.State`.

This module only lays out components and maps view models onto them: the
handlers (`web_handlers.py`) decide what to show, the renderers
(`web_render.py`) draw it, replays of collect files are `web_replay.py`, the
styles are `web.css`, and no game logic lives in any of them: every call goes
through `Episode.step`. Every call button sends the values shown selected, and
carries every menu's pick so the reply keeps them (`handlers.Picks`).
Over 400 lines: the page's texts and the wiring of its three tabs, kept in one place.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import gradio as gr
from gradio.utils import get_upload_folder

from releaseops_arena import catalog

from . import web_content, web_replay
from . import web_handlers as handlers
from . import web_session as limits
from .web_handlers import BUTTONS, GROUPS, MENUS, Picks, PlayView, WatchView
from .web_queue import HEAVY, bound_board
from .web_render import board_html, meters_html, watch_html

TITLE = "ReleaseOps Arena · Release board"
UPLOADS = Path(get_upload_folder()).resolve()  # where Gradio keeps what its upload route received
# The heavy events (Watch, reading an upload, a replay) run one at a time on one queue, and a session
# may have one of them queued or running (web_queue.bound_board refuses the next one at once).
HEAVY_EVENT = {"concurrency_id": HEAVY, "concurrency_limit": 1}
# The story, first: what a supervisor is, the two demo seeds, the headline numbers.
INTRO = (
    # The benchmark version in the header: a visitor comparing what they see with published results
    # knows which world this is (results of different versions are never mixed).
    "<div class='ro-intro'><h1 class='ro-title'>ReleaseOps Arena "
    f"<span class='ro-muted' id='benchmark-version'>benchmark {catalog.BENCHMARK_VERSION}</span></h1>"
    # On a phone the story is folded behind one line, so that the preset, the seed and Start fit the first
    # screen (web.css: `.ro-lede` and the summary show only there; wider screens unfold the story).
    "<p class='ro-lede'><b>AI agents now do release work</b>, and some take shortcuts: you supervise them. "
    "Pick a seed below and press <b>Start episode</b>.</p>"
    "<details class='ro-more' id='story-more'><summary>What a supervisor is, Seed A and B, the headline "
    "numbers</summary>"
    "<div class='ro-story'><div class='ro-story-text'>"
    "<p id='what-supervisor'><b>AI agents now do release work</b>: fix CI, triage tickets, ship. Some take "
    "shortcuts. A <b>supervisor</b> is the agent that checks their proposals before they land: with a small review "
    "budget and a deadline, it inspects evidence, then approves, blocks (citing a safety rule) or holds. Approve "
    "everything and unsafe code ships; inspect everything and the budget or the clock runs out. This environment "
    "trains and scores that judgement.</p>"
    "<div class='ro-seeds'>"
    "<div class='ro-seed' id='story-seed-a'><b>Seed A: intervention matters.</b> The CI fixer says the payment "
    "build is green; its diff disables a payment test. The naive supervisor approves and ships unsafe; a "
    "supervisor that inspects the diff blocks it and ships safely.</div>"
    "<div class='ro-seed' id='story-seed-b'><b>Seed B: restraint matters.</b> Three review units, a lot in sight. "
    "Inspecting everything spends them on harmless work and the shortcut ships; approving the docs-only change "
    "unchecked keeps them for the risk, and the release ships safely.</div></div>"
    "<p class='ro-muted' style='font-size:13px'><b>Play</b> a seed yourself, <b>Watch</b> the baselines (or your "
    "own model's episodes) play it, or read the <b>Results</b>.</p></div>"
    "<div class='ro-story-chart'>{headline}</div></div></details></div>"
)
# Operator notes, in a collapsed "About this server".
ABOUT = (
    "<div class='ro-muted' style='font-size:13px' id='sessions-note'><p>Web play runs the engine in-process: each "
    "browser session has its own episode in the page's session state (two visitors never share one), and it "
    "never takes one of the server's WebSocket training slots (<code>MAX_CONCURRENT_ENVS</code>). OpenEnv's "
    "generic Playground tab is turned off on this server: it plays one environment shared by every visitor, so "
    "one visitor's reset would end another's episode. Agents connect over <code>/ws</code>, one session "
    "each. The board needs a single worker (with more, <code>/web</code> answers 503).</p>"
    f"<p>Trajectory uploads on Watch: up to {web_replay.MAX_BYTES // (1024 * 1024)} MB, "
    f"the first {web_replay.MAX_EPISODES} episodes of a file. <code>{web_replay.REPLAY_DIR_ENV}</code> (unset by "
    "default) offers the collect files under that folder of the server as well.</p></div>"
)
WATCH_NOTE = (
    "<p class='ro-muted'>Runs six policies on the scenario chosen above with the engine's <code>play</code>: "
    "<b>naive</b> approves everything; <b>inspect everything</b> spends the evidence it can first; <b>rule</b> (a "
    "hand-made heuristic), the <b>reference planner</b> (the generator's published odds applied to the visible "
    "cues) and the <b>trained policy</b> (a small network trained on the train split) see only the board, as you "
    "do on Play; the <b>oracle</b> reads the hidden world state: the upper bound, not a fair player. Each call "
    "reads as a sentence (raw JSON one click away); drag the slider to replay step by step.</p>"
)
REPLAY_NOTE = (
    "<p class='ro-muted'>Replay your own model's episodes: upload a <code>results.jsonl</code> written by "
    "<code>python -m training.collect</code> (any policy, an LLM's included; up to "
    f"{web_replay.MAX_BYTES // (1024 * 1024)} MB). Pick an episode: it is played again through the engine, "
    "beside the baselines on the same task.</p>"
)
RESULTS_NOTE = (
    "<p class='ro-muted'>The latest calibration: the reference policies on each evaluation slice "
    "(held-out seeds, an unseen failure family, an unseen worker mix). Bars: safe-ship rate.</p>"
)


class ReleaseBoard(gr.Blocks):
    """The board's Blocks: its own page title and upload limit. OpenEnv sets `title` to its generic display
    title after building, and `gr.mount_gradio_app` resets `max_file_size` to its argument (None: no limit),
    so both are fixed here rather than set."""

    @property
    def title(self) -> str:
        return TITLE

    @title.setter
    def title(self, value) -> None:
        pass

    @property
    def max_file_size(self) -> int:
        return web_replay.MAX_BYTES

    @max_file_size.setter
    def max_file_size(self, value) -> None:
        pass


def _state() -> gr.State:
    """Per-session state that Gradio deletes once unused for WEB_SESSION_IDLE_S (it keeps it forever otherwise)."""
    return gr.State(None, time_to_live=limits.WEB_SESSION_IDLE_S)


def _html(value: str = "", **kwargs) -> gr.HTML:
    return gr.HTML(value, js_on_load=None, **kwargs)


def _section(title: str, note: str) -> None:
    _html(f"<div class='ro-section-title'>{title} <span class='ro-muted'>({note})</span></div>", padding=False)


def _menu(tool: str, arg: str, label: str, elem_id: str, **kwargs) -> gr.Dropdown:
    choices = MENUS[(tool, arg)]
    return gr.Dropdown(choices, value=choices[0][1], label=label, elem_id=elem_id, **kwargs)


def _setup(presets: dict) -> SimpleNamespace:
    names = [*presets, handlers.CUSTOM]
    first = next(iter(presets.values()), {"scenario": dict(catalog.DEFAULT_SCENARIO)})["scenario"]
    with gr.Column(elem_classes="oe-card", elem_id="setup-card"):
        with gr.Row(equal_height=True):
            preset = gr.Dropdown(
                names, value=names[0], label="Scenario preset", elem_id="preset-dd", scale=3, min_width=240
            )
            # No `minimum`: gradio would refuse a negative seed with an exception (a toast, an error on every
            # output, a traceback in the log); no `precision`: gradio would round 2.5 to seed 2 and 1e30 to a
            # 31-digit integer. The handler says what a seed must be, beside the field (handlers.seed_of).
            seed = gr.Number(value=first["seed"], label="Seed", elem_id="seed-num", scale=1, min_width=110)
            difficulty = gr.Dropdown(
                list(catalog.DIFFICULTIES),
                value=first["difficulty"],
                label="Difficulty",
                elem_id="difficulty-dd",
                scale=1,
                min_width=130,
            )
        msg = _html(elem_id="setup-msg", padding=False)
        with gr.Row(equal_height=True):
            family = gr.Dropdown(
                list(catalog.ALL_FAMILIES), value=first["family"], label="Family", elem_id="family-dd", min_width=240
            )
            mix = gr.Dropdown(
                list(catalog.ALL_MIXES),
                value=first["archetype_mix"],
                label="Archetype mix",
                elem_id="mix-dd",
                min_width=240,
            )
    return SimpleNamespace(preset=preset, fields=[family, seed, difficulty, mix], msg=msg)


def _controls() -> SimpleNamespace:
    """The right-hand column: one group per kind of call (resolve, evidence, hold), each with its own message
    line right under its buttons (why a button is disabled, or what the engine said about the last call)."""
    c = SimpleNamespace(refs={}, inspect={}, notes={})
    with gr.Group(elem_classes="ro-group"):
        _section("Resolve", "free")
        c.proposal = gr.Dropdown([], label="Proposal", elem_id="proposal-dd", interactive=True)
        with gr.Row(equal_height=True):
            c.rule = _menu(
                "block_proposal", "rule_id", "Rule (for block)", "rule-dd", scale=3, min_width=200, interactive=True
            )
        with gr.Row(equal_height=True):
            c.approve = gr.Button("Approve", elem_id="approve-btn", variant="primary", interactive=False, min_width=120)
            c.block = gr.Button("Block", elem_id="block-btn", variant="stop", interactive=False, min_width=120)
        c.notes["resolve"] = _html(elem_id="resolve-msg", padding=False)
    with gr.Group(elem_classes="ro-group"):
        _section("Evidence", "1 budget unit + 1 evidence action each")
        for kind in catalog.ARTIFACT_KINDS:  # ids by the result key: pr-dd, run-dd, ticket-dd
            with gr.Row(equal_height=True):
                c.refs[kind.kind] = gr.Dropdown(
                    [], label=kind.label, elem_id=f"{kind.result_key}-dd", scale=2, min_width=160, interactive=True
                )
                c.inspect[kind.kind] = gr.Button(
                    kind.action, elem_id=f"inspect-{kind.result_key}-btn", scale=1, min_width=140, interactive=False
                )
        with gr.Row(equal_height=True):
            c.worker = _menu("ask_worker", "worker_id", "Worker", "worker-dd", scale=4, min_width=140)
            c.question = _menu("ask_worker", "question_type", "Question", "question-dd", scale=5, min_width=160)
            c.ask = gr.Button("Ask worker", elem_id="ask-btn", scale=3, min_width=120, interactive=False)
        c.notes["evidence"] = _html(elem_id="evidence-msg", padding=False)
    with gr.Group(elem_classes="ro-group"):
        _section("Hold", "ends the phase; spends a phase of time")
        with gr.Row(equal_height=True):
            c.hold_reason = _menu("hold_release", "reason_code", "Reason", "hold-dd", scale=2, min_width=160)
            c.hold = gr.Button("Hold release", elem_id="hold-btn", scale=1, min_width=140, interactive=False)
        c.notes["hold"] = _html(elem_id="hold-msg", padding=False)
    c.buttons = dict(zip(BUTTONS, [c.approve, c.block, *c.inspect.values(), c.ask, c.hold]))
    return c


def _play_tab() -> SimpleNamespace:
    with gr.Row():
        start = gr.Button("Start episode", variant="primary", elem_id="start-btn", scale=0, min_width=180)
    meters = _html(meters_html(None), elem_id="meters")
    with gr.Row(equal_height=False, elem_classes="ro-play-row"):
        with gr.Column(scale=1, min_width=300):
            board = _html(board_html(None), elem_id="board")
        with gr.Column(scale=1, min_width=300):
            c = _controls()
            boxes = {name: _html(elem_id=f"{name}-box") for name in ("return", "result")}
            outcome = _html(elem_id="outcome")
    metrics = _html(elem_id="metrics")
    with gr.Accordion("Calls so far (Episode.audit)", open=True, elem_id="history-acc"):
        history = _html(elem_id="history")
    return SimpleNamespace(
        start=start, meters=meters, board=board, c=c, boxes=boxes, outcome=outcome, metrics=metrics, history=history
    )


def _menu_update(menu) -> dict:
    return gr.update() if menu is None else gr.update(choices=menu.choices, value=menu.value, label=menu.label)


def _play_updates(v: PlayView, setup_msg: bool = True) -> list:
    """A view model as component updates, in the order of `_play_outputs`. A kept view (a refused Start)
    leaves every component as it is but the message beside the setup fields."""
    if v.kept:
        return [v.setup if i == SETUP_MSG else gr.update() for i in range(PLAY_OUTPUTS)]
    refs = [_menu_update(None if v.refs is None else v.refs[k.kind]) for k in catalog.ARTIFACT_KINDS]
    enabled = v.enabled or {}
    return [
        v.session,
        v.meters,
        v.board,
        _menu_update(v.proposal),
        *refs,
        *[v.notes.get(g, "") for g in GROUPS],
        v.ret,
        v.result,
        v.outcome,
        v.metrics,
        v.history,
        v.setup if setup_msg else gr.update(),
        *[gr.update(interactive=bool(enabled.get(key))) for key in BUTTONS],
    ]


# Where the setup message sits in `_play_outputs`: after the state, meters, board, the proposal and artifact
# menus, the group notes and the five boxes (return, result, outcome, metrics, history); the buttons follow.
SETUP_MSG = 4 + len(catalog.ARTIFACT_KINDS) + len(GROUPS) + 5
PLAY_OUTPUTS = SETUP_MSG + 1 + len(BUTTONS)


def _play_outputs(state, play: SimpleNamespace, setup: SimpleNamespace) -> list:
    c = play.c
    return [
        state,
        play.meters,
        play.board,
        c.proposal,
        *c.refs.values(),
        *[c.notes[g] for g in GROUPS],
        play.boxes["return"],
        play.boxes["result"],
        play.outcome,
        play.metrics,
        play.history,
        setup.msg,
        *c.buttons.values(),
    ]


def _wire_play(presets: dict, setup: SimpleNamespace, state, play: SimpleNamespace) -> None:
    c, outputs = play.c, _play_outputs(state, play, setup)
    assert len(outputs) == PLAY_OUTPUTS and outputs[SETUP_MSG] is setup.msg  # a kept view's one update lands there
    menus = [c.proposal, *c.refs.values()]  # every call carries what the visitor has selected in these

    def on(button, inputs, call) -> None:
        """`call(*values)` -> (tool, args) for the handler: the arguments are the values shown selected."""

        def click(s, proposal, *rest):
            refs, values = rest[: len(c.refs)], rest[len(c.refs) :]
            picks = Picks(proposal, dict(zip(c.refs, refs)))
            return _play_updates(handlers.act(s, *call(*values), picks=picks), setup_msg=False)

        button.click(click, [state, *menus, *inputs], outputs)

    def start(running, *fields):
        return _play_updates(handlers.start(presets, *fields, running=running))

    play.start.click(start, [state, setup.preset, *setup.fields], outputs)
    on(c.approve, [c.proposal], lambda pid: ("approve_proposal", {"proposal_id": pid}))
    on(c.block, [c.proposal, c.rule], lambda pid, rid: ("block_proposal", {"proposal_id": pid, "rule_id": rid}))
    for kind in catalog.ARTIFACT_KINDS:
        on(c.inspect[kind.kind], [c.refs[kind.kind]], lambda ref, kind=kind: (kind.tool, {kind.argument: ref}))
    on(c.ask, [c.worker, c.question], lambda w, q: ("ask_worker", {"worker_id": w, "question_type": q}))
    on(c.hold, [c.hold_reason], lambda r: ("hold_release", {"reason_code": r}))

    # Picking a proposal names the rules its tags allow in the Rule menu's label; it never changes the rule.
    def hint(sess, pid):
        return gr.update(label=handlers.rule_hint(sess.board() if sess else None, pid))

    c.proposal.change(hint, [state, c.proposal], [c.rule], queue=False)


def _wire_setup(presets: dict, setup: SimpleNamespace) -> None:
    def fill(name):
        """A preset fills the fields (and a message about the old fields goes); Custom keeps both as they are,
        so a message about the field just edited is never cleared by the switch to Custom."""
        values = handlers.fill_preset(presets, name)
        if values is None:
            return [gr.update()] * (len(setup.fields) + 1)
        return [*values, ""]

    setup.preset.change(fill, [setup.preset], [*setup.fields, setup.msg], queue=False)
    for comp in setup.fields:
        comp.input(lambda: handlers.CUSTOM, None, [setup.preset], queue=False)


def _watch_tab(presets: dict, setup: SimpleNamespace) -> None:
    _html(WATCH_NOTE)
    with gr.Row(equal_height=True):
        run = gr.Button("Run the policies", variant="primary", elem_id="watch-btn", scale=0, min_width=220)
        step = gr.Slider(0, 1, value=0, step=1, label="Step", elem_id="watch-step", interactive=True, min_width=200)
    choices = [(label, name) for name, (label, _) in handlers.WATCH_POLICIES.items()]
    shown = gr.CheckboxGroup(
        choices,
        value=handlers.shown_for(presets, next(iter(presets), None)),
        label="Transcripts side by side",
        elem_id="watch-show",
    )
    with gr.Accordion("Replay your model's episodes", open=False, elem_id="replay-acc"):
        _html(REPLAY_NOTE)
        with gr.Row(equal_height=True):
            upload = gr.File(
                label=f"results.jsonl (up to {web_replay.MAX_BYTES // (1024 * 1024)} MB)",
                file_types=[".jsonl", ".json", ".txt"],
                file_count="single",
                elem_id="replay-file",
                min_width=240,
            )
            episode = gr.Dropdown([], label="Episode", elem_id="replay-dd", interactive=True, min_width=240)
        root, files, note = web_replay.server_files()
        on_server = gr.Dropdown(
            files,
            value=None,
            label=f"Or a file on this server ({web_replay.REPLAY_DIR_ENV})",
            elem_id="replay-server-dd",
            visible=bool(root) or bool(note),
            interactive=True,
            info=note or None,
        )
        replay_msg = _html(elem_id="replay-msg")
    story = _html(elem_id="watch-story")
    view = _html(elem_id="watch-view")
    runs = _state()
    # The collect file's path, not its records: parsed, 5 MB of JSON is tens of MB per session. The
    # file is read again for each episode picked, while the upload lasts (WEB_UPLOAD_TTL_S).
    source = _state()

    def show(v: WatchView, picked):
        if v.runs is None:  # refused (a bad seed): the transcripts shown stay, and the message says why
            return gr.update(), gr.update(), gr.update(), gr.update(), v.setup, gr.update()
        steps = gr.update() if v.steps is None else gr.update(minimum=0, maximum=v.steps, value=v.steps)
        offered = choices
        if v.runs and handlers.REPLAY in v.runs:
            offered = [(v.runs[handlers.REPLAY]["label"], handlers.REPLAY), *choices]
        return v.runs, steps, v.story, v.html, v.setup, gr.update(choices=offered, value=picked)

    outputs = [runs, step, story, view, setup.msg, shown]

    def on_run(picked, *fields):
        picked = [name for name in picked or [] if name in handlers.WATCH_POLICIES]  # a replay's column goes
        return show(handlers.watch(presets, *fields, shown=picked), picked)

    def redraw(r, k, picked):
        """Unprocessed values (`preprocess=False`): the slider's bounds change with each run, and gradio would
        refuse a position past the new maximum that the page sends as the bounds change (an error toast)."""
        try:
            k = int(float(k or 0))
        except (TypeError, ValueError, OverflowError):
            k = 0
        picked = [p for p in picked if isinstance(p, str)] if isinstance(picked, list) else []
        return watch_html(r, k, picked) if r else gr.update()

    def on_preset(name):
        """A new preset: the old story and table are stale, so they go; the preset's transcripts are ticked."""
        return None, gr.update(value=0), "", "", gr.update(choices=choices, value=handlers.shown_for(presets, name))

    def records_of(path) -> list[dict]:
        """A collect file's records; a ReplayError says why not (an expired upload included)."""
        try:
            return web_replay.read_records(path)
        except FileNotFoundError:
            raise web_replay.ReplayError(
                f"the upload has expired (uploads are kept {limits.WEB_UPLOAD_TTL_S / 60:.0f} min): upload it again"
            ) from None
        except OSError as exc:
            raise web_replay.ReplayError(f"cannot read the file: {exc.strerror or exc}") from None

    def read(path):
        """Read a collect file: (its path, episode menu, message); the path None when the file is refused."""
        try:
            recs = records_of(path)
        except web_replay.ReplayError as exc:
            message = handlers.setup_error_html(f"Cannot replay this file: {exc}", "replay-error")
            return None, gr.update(choices=[], value=None), message
        labels = [(web_replay.episode_label(i, r), str(i)) for i, r in enumerate(recs)]
        note = f"<div class='ro-info' id='replay-ok'>{len(recs)} episode(s) read: pick one to replay.</div>"
        return str(path), gr.update(choices=labels, value=None), note

    def on_upload(path):
        """An upload; a bad one is cleared from the upload, and the message says what is wrong. Only a file
        Gradio received through the upload route is read: a client can name any path in the event's data."""
        if not path:
            return None, gr.update(choices=[], value=None), "", gr.update()
        if not Path(path).resolve().is_relative_to(UPLOADS):
            message = handlers.setup_error_html("Cannot replay this file: upload it with the button", "replay-error")
            return None, gr.update(choices=[], value=None), message, None
        kept, menu, message = read(path)
        return kept, menu, message, gr.update() if kept else None

    def on_server_file(name):
        if not name:
            return None, gr.update(choices=[], value=None), ""
        try:
            return read(web_replay.server_file(name))
        except web_replay.ReplayError as exc:
            return None, gr.update(choices=[], value=None), handlers.setup_error_html(str(exc), "replay-error")

    def on_episode(path, index, picked):
        if not path or index in (None, ""):
            return gr.update(), gr.update(), gr.update(), gr.update(), gr.update(), gr.update(), gr.update()
        try:
            recs = records_of(path)
            record = recs[int(index)]
        except (web_replay.ReplayError, ValueError, IndexError) as exc:
            message = handlers.setup_error_html(f"Cannot replay this episode: {exc}", "replay-error")
            return gr.update(), gr.update(), gr.update(), gr.update(), gr.update(), gr.update(), message
        v, note = handlers.replay(record, picked or handlers.WATCH_SHOWN)
        return (*show(v, v.shown), note)

    run.click(on_run, [shown, setup.preset, *setup.fields], outputs, **HEAVY_EVENT)
    step.change(redraw, [runs, step, shown], [view], queue=False, preprocess=False)
    shown.change(redraw, [runs, step, shown], [view], queue=False, preprocess=False)
    setup.preset.change(on_preset, [setup.preset], [runs, step, story, view, shown], queue=False)
    upload.upload(on_upload, [upload], [source, episode, replay_msg, upload], **HEAVY_EVENT)
    on_server.input(on_server_file, [on_server], [source, episode, replay_msg], **HEAVY_EVENT)
    episode.input(on_episode, [source, episode, shown], [*outputs, replay_msg], **HEAVY_EVENT)


def _results_tab() -> None:
    _html(RESULTS_NOTE)
    _html(web_content.results_html(), elem_id="results-table")


def build_release_board(
    web_manager=None,
    action_fields=None,
    metadata=None,
    is_chat_env=False,
    title: str = TITLE,
    quick_start_md: str = "",
) -> gr.Blocks:
    """OpenEnv `gradio_builder`: the Release board (its story, then Play, Watch, Results)."""
    del web_manager, action_fields, metadata, is_chat_env, quick_start_md, title  # see the module docstring
    presets = web_content.load_presets()
    # delete_cache: Gradio also deletes uploads older than WEB_UPLOAD_TTL_S (checked each minute), and all of
    # them when the server stops (web_app.UploadQuota deletes them on time and counts them).
    with ReleaseBoard(title=TITLE, delete_cache=(60, int(limits.WEB_UPLOAD_TTL_S))) as blocks:
        _html(web_content.stylesheet() + INTRO.replace("{headline}", web_content.headline_html()), elem_id="intro")
        state = _state()
        setup = _setup(presets)
        with gr.Tabs(elem_id="board-tabs"):
            with gr.Tab("Play", id="play", elem_id="play-tab"):
                play = _play_tab()
            with gr.Tab("Watch", id="watch", elem_id="watch-tab"):
                _watch_tab(presets, setup)
            with gr.Tab("Results", id="results", elem_id="results-tab"):
                _results_tab()
        # Operator notes, below the board: a visitor comes to play, an operator scrolls for them.
        with gr.Accordion("About this server", open=False, elem_id="about-acc"):
            _html(ABOUT)
        _wire_setup(presets, setup)
        _wire_play(presets, setup, state, play)
    # Gradio checks that a file an event names was uploaded by a user only for a launched app
    # (processing_utils._check_allowed); a mounted one never launches, so it would copy any path a
    # client names into its cache. The board is served only mounted: it counts as launched.
    blocks.has_launched = True
    bound_board(blocks)  # the queue, threads and sessions, bounded (web_session's WEB_* limits)
    return blocks
