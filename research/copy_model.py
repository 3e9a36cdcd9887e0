"""A Qwen3-style causal LM with a pointer-generator head, so that a tiny model can copy board ids.

A from-scratch model with one token per board id still emitted ids from its prior
(`p3`, `p2`, ...) instead of the ones on the board: learning to look an id up
through ordinary attention and then reproduce its embedding was too much for it.
Here the next-token distribution mixes the vocabulary with a copy distribution
(See et al. 2017, "Get to the point"):

    p(v | t) = (1 - g_t) p_vocab(v | t) + g_t * sum_{s <= t, ids[s] = v} a_{t,s}

`a_{t,s}` is a softmax, over the earlier positions whose token is a board id, of
`q_t . k_s / sqrt(d)` (projections of the last hidden state) plus a learned
coverage term for ids already acted on since `s`, and `g_t` is a learned gate.
An id is acted on when it comes back in a tool result that is not an error (a
decided proposal's id does; a pending one has not). Mentions in the model's own
calls and in error results do not count: a refused call decided nothing, and an
error such as "p4 is already approved; pending: p1, p7" names the very ids still
to decide (counting those sent the pointer back to decided proposals). `forward`
returns `log p` as its logits: they are valid logits, so
`generate`, sampling with a temperature and TRL's log-prob code all work
unchanged. The last hidden states and the input ids ride on the KV cache, so
cached decoding equals uncached decoding.

With `read_span`, the pointer also reads: each id's key and value add the mean
state of the text that follows it (a proposal's claim, request, refs, risk and
confidence follow its id), and the attention-weighted value joins the state
that predicts the next token. So the tool name, which the call writes before
the id, can depend on the proposal the pointer picks: the one still pending.

TRL's GRPOTrainer replaces a model's forward with a fused LM head that would
bypass the copy distribution; `restore_forward` puts this one back, and it
answers TRL's `fused_lm_head=True` calls itself (per-token log-probs and
entropies, in chunks).

`register()` registers the class with `AutoModelForCausalLM`, so a saved
checkpoint loads by `from_pretrained` (and so `hf:<dir>` evaluation).
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, Qwen3Config, Qwen3ForCausalLM
from transformers.modeling_outputs import CausalLMOutputWithPast
from transformers.utils import ModelOutput

# Past input ids and last hidden states, stored on the cache object under this attribute.
_STATE = "_copy_state"
_TINY = 1e-30  # log of an impossible token: finite, so that gradients stay finite
_CHUNK = 256  # query positions per chunk when TRL asks for per-token log-probs
_ERROR_AT = 4  # `<tool_response>`, newline, `{'`, `error`: how far into a result its error marker sits


class CopyQwen3Config(Qwen3Config):
    """Qwen3's config plus the copy head: its width and the token-id range it may copy (the board ids)."""

    model_type = "copy_qwen3"
    # Not remote code: TRL's reference-model loader (beta > 0) reads this before falling back to
    # AutoModelForCausalLM, where importing this module registered the class.
    auto_map = {}  # noqa: RUF012  (read only)

    def __init__(
        self,
        copy_dim: int = 64,
        copy_token_range: tuple[int, int] = (0, 0),
        coverage_init: float = -2.0,
        read_span: int = 0,
        span_token_range: tuple[int, int] = (0, 0),
        result_token_ids: tuple[int, int, int] = (0, 0, 0),
        **kwargs,
    ):
        self.copy_dim = copy_dim
        self.copy_token_range = list(copy_token_range)
        self.coverage_init = coverage_init
        # read_span > 0: the pointer also reads what follows each id (up to the next id of
        # span_token_range, at most read_span tokens) back into the state that picks the next token.
        self.read_span = read_span
        self.span_token_range = list(span_token_range)
        # (tool response open, tool response close, "error"): only ids inside a tool response that is not
        # an error count as acted on (`result_tokens`); all zeros: every later mention counts (older runs).
        self.result_token_ids = list(result_token_ids)
        super().__init__(**kwargs)


@dataclass
class CopyLogProbOutput(ModelOutput):
    """What TRL's fused LM head returns (`trl.trainer.utils.FusedCausalLMOutput`'s fields it reads)."""

    loss: torch.Tensor | None = None
    log_probs: torch.Tensor | None = None
    entropy: torch.Tensor | None = None
    label_mask: torch.Tensor | None = None


class CopyQwen3ForCausalLM(Qwen3ForCausalLM):
    config_class = CopyQwen3Config

    def __init__(self, config: CopyQwen3Config):
        super().__init__(config)
        h, d = config.hidden_size, config.copy_dim
        self.copy_query = nn.Linear(h, d, bias=False)
        self.copy_key = nn.Linear(h, d, bias=False)
        self.copy_gate = nn.Linear(h, 1)
        self.coverage = nn.Parameter(torch.tensor(float(config.coverage_init)))
        if config.read_span:
            self.span_key = nn.Linear(h, d, bias=False)
            self.span_value = nn.Linear(h, h, bias=False)
        self.temperature = 1.0  # TRL's sampling temperature, for its per-token log-probs (restore_forward)
        self.post_init()

    def _init_weights(self, module):
        super()._init_weights(module)
        if module is self:
            nn.init.constant_(self.coverage, float(self.config.coverage_init))

    # ------------------------------------------------------------------ the copy distribution

    def copyable(self, ids: torch.Tensor) -> torch.Tensor:
        lo, hi = self.config.copy_token_range
        return (ids >= lo) & (ids < hi)

    def mix(self, query: torch.Tensor, qpos: torch.Tensor, ids: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
        """log p(next token) at query states `query` (B, m, H) whose absolute positions are `qpos` (m,),
        given every input id (B, L) and last hidden state (B, L, H) up to the last query."""
        src = self.copyable(ids)  # (B, L)
        count = int(src.sum(-1).max()) if src.numel() else 0
        if count == 0:
            return F.log_softmax(self.lm_head(query).float(), -1)
        # The copyable positions of each row, left-aligned and padded (padding is masked below).
        order = torch.argsort((~src).to(torch.int8), dim=-1, stable=True)[:, :count]  # (B, S)
        real = torch.gather(src, 1, order)
        src_ids = torch.gather(ids, 1, order)
        width = states.size(-1)
        src_states = torch.gather(states, 1, order[..., None].expand(-1, -1, width))
        # Coverage: the next position at which a source's id occurs again (L when it does not).
        L = ids.size(1)
        later = torch.arange(L, device=ids.device)
        again = (
            (ids[:, None, :] == src_ids[:, :, None])
            & (later[None, None, :] > order[:, :, None])
            & self._acted(ids)[:, None, :]
        )
        next_seen = torch.where(again, later, L).min(-1).values  # (B, S)
        visible = real[:, None, :] & (order[:, None, :] <= qpos[None, :, None])  # (B, m, S)
        covered = (next_seen[:, None, :] <= qpos[None, :, None]).float()
        keys = self.copy_key(src_states)[:, None]  # (B, 1, S, d)
        if self.config.read_span:
            span = self._spans(ids, states, order, qpos)  # (B, m, S, H)
            keys = keys + self.span_key(span)
        q = self.copy_query(query)
        scores = (keys @ q[..., None])[..., 0] / math.sqrt(q.size(-1)) + self.coverage * covered
        scores = scores.float().masked_fill(~visible, float("-inf"))
        has = visible.any(-1, keepdim=True)  # (B, m, 1)
        attn = torch.softmax(scores.masked_fill(~has, 0.0), -1) * has
        if self.config.read_span:  # what the pointed-at ids are followed by informs the next token
            query = query + (attn[..., None] * self.span_value(span)).sum(-2).to(query.dtype)
        vocab = F.log_softmax(self.lm_head(query).float(), -1)
        copy = torch.zeros_like(vocab).scatter_add_(-1, src_ids[:, None, :].expand(-1, query.size(1), -1), attn)
        gate = torch.sigmoid(self.copy_gate(query).float()) * has  # no copy where nothing is copyable
        return torch.logaddexp(
            torch.log1p(-gate.clamp(max=1 - 1e-6)) + vocab,
            torch.log(gate.clamp(min=_TINY)) + torch.log(copy.clamp(min=_TINY)),
        )

    def _acted(self, ids: torch.Tensor) -> torch.Tensor:
        """(B, L): the positions at which a mention counts as acted on: inside a tool response whose
        first few tokens are not "error" (causal: only tokens before the position are read)."""
        open_id, close_id, error_id = self.config.result_token_ids
        if not open_id:
            return torch.ones_like(ids, dtype=torch.bool)
        L = ids.size(1)
        pos = torch.arange(L, device=ids.device).expand_as(ids)
        last_open = torch.where(ids == open_id, pos, -1).cummax(-1).values
        last_close = torch.where(ids == close_id, pos, -1).cummax(-1).values
        inside = last_open > last_close
        # An error result reads `{'error': ...}`: "error" within _ERROR_AT tokens of the open, before `pos`.
        errors = torch.cat([ids.new_zeros(ids.size(0), 1), (ids == error_id).long().cumsum(-1)], 1)  # (B, L+1)
        start = last_open.clamp(min=0) + 1
        stop = torch.minimum(start + _ERROR_AT, pos)
        is_error = torch.gather(errors, 1, stop.clamp(min=0)) - torch.gather(errors, 1, torch.minimum(start, stop)) > 0
        return inside & ~is_error

    def _spans(self, ids, states, order, qpos):
        """Mean last hidden state over each source's span: from the source to the next id of
        `span_token_range` (or `read_span` tokens), cut at the query (causal)."""
        lo, hi = self.config.span_token_range
        L = ids.size(1)
        pos = torch.arange(L, device=ids.device)
        starts = (ids >= lo) & (ids < hi)  # (B, L)
        # The first span-starting id after each position (L when none yet).
        nxt = torch.where(starts, pos, L).flip(-1).cummin(-1).values.flip(-1)
        nxt = torch.cat([nxt[:, 1:], torch.full_like(nxt[:, :1], L)], 1)  # strictly after
        end = torch.minimum(torch.gather(nxt, 1, order), order + self.config.read_span)  # (B, S), exclusive
        end = torch.minimum(end[:, None, :], qpos[None, :, None] + 1)  # (B, m, S)
        csum = torch.cat([states.new_zeros(states.size(0), 1, states.size(-1)), states.cumsum(1)], 1)  # (B, L+1, H)
        B, m, S = end.shape
        at_end = torch.gather(csum, 1, end.reshape(B, m * S, 1).expand(-1, -1, states.size(-1))).view(B, m, S, -1)
        at_start = torch.gather(csum, 1, order[..., None].expand(-1, -1, states.size(-1)))[:, None]
        return (at_end - at_start) / (end - order[:, None, :]).clamp(min=1)[..., None].to(states.dtype)

    def states(self, input_ids, attention_mask=None, position_ids=None, cache=None, use_cache=None, **kwargs):
        """(backbone output, last hidden states of the new tokens, all input ids, all last hidden states,
        number of cached positions); the ids and states are kept on `cache` for the next call."""
        past = cache.get_seq_length() if cache is not None else 0
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            cache=cache,
            use_cache=use_cache,
            **kwargs,
        )
        hidden = out.last_hidden_state
        ids, states = input_ids, hidden
        if past:
            state = getattr(cache, _STATE, None)
            if state is None or state[0].size(1) < past:
                raise ValueError(
                    "this cache was filled without the copy head's state; decode with the copy model "
                    "from an empty cache"
                )
            # A cache cropped back (the hf: policy reuses a shared prefix) keeps the first `past` positions.
            ids = torch.cat([state[0][:, :past], ids], 1)
            states = torch.cat([state[1][:, :past], states], 1)
        if cache is not None and use_cache is not False:
            setattr(cache, _STATE, (ids, states))
        return out, hidden, ids, states, past

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        position_ids=None,
        cache=None,
        inputs_embeds=None,
        labels=None,
        use_cache=None,
        logits_to_keep=0,
        fused_lm_head=False,
        past_key_values=None,
        shift_labels=None,
        num_items_in_batch=None,
        **kwargs,
    ):
        if inputs_embeds is not None:
            raise ValueError("the copy head reads input ids; pass input_ids, not inputs_embeds")
        cache = cache if cache is not None else past_key_values
        if fused_lm_head:
            return self._token_logprobs(input_ids, attention_mask, labels, shift_labels, num_items_in_batch, **kwargs)
        out, hidden, ids, states, past = self.states(
            input_ids, attention_mask, position_ids, cache, use_cache, **kwargs
        )
        n = hidden.size(1)
        keep = n if not logits_to_keep else min(int(logits_to_keep), n)
        qpos = torch.arange(past + n - keep, past + n, device=hidden.device)
        logits = self.mix(hidden[:, n - keep :], qpos, ids, states)
        loss = None
        if labels is not None:
            loss = F.nll_loss(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1), ignore_index=-100)
        return CausalLMOutputWithPast(loss=loss, logits=logits, cache=out.cache)

    def _token_logprobs(self, input_ids, attention_mask, labels, shift_labels, num_items_in_batch, **kwargs):
        """TRL's `fused_lm_head=True` contract: log-prob (under `self.temperature`) and entropy of each
        next-token label, zero where the label is -100."""
        kwargs.pop("use_cache", None)
        _, hidden, ids, states, _ = self.states(input_ids, attention_mask, use_cache=False, **kwargs)
        if shift_labels is None:
            hidden, labels = hidden[:, :-1], labels[:, 1:]
        else:
            labels = shift_labels
        mask = labels != -100
        log_probs = hidden.new_zeros(labels.shape, dtype=torch.float32)
        entropy = torch.zeros_like(log_probs)
        wanted = mask.any(0).nonzero().squeeze(-1)
        for chunk in wanted.split(_CHUNK):
            lp = self.mix(hidden[:, chunk], chunk, ids, states)
            lp = F.log_softmax(lp / self.temperature, -1) if self.temperature != 1.0 else lp
            picked = lp.gather(-1, labels[:, chunk].clamp(min=0)[..., None])[..., 0]
            ent = -(lp.exp() * lp).sum(-1)
            log_probs[:, chunk] = picked
            entropy[:, chunk] = ent.detach()
        log_probs, entropy = log_probs * mask, entropy * mask
        loss = -log_probs.sum() / (mask.sum().clamp(min=1) if num_items_in_batch is None else num_items_in_batch)
        return CopyLogProbOutput(loss=loss, log_probs=log_probs, entropy=entropy, label_mask=mask)

    def restore_forward(self, temperature: float = 1.0) -> None:
        """Undo TRL's fused-LM-head patch (an instance attribute over this class's forward)."""
        self.temperature = temperature
        self.forward = types.MethodType(type(self).forward, self)

    def logprobs_at(self, hidden: torch.Tensor, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """log p(next token) at `positions` of one sequence, from its hidden states (L, H) and ids (L,)."""
        return self.mix(hidden[positions][None], positions, ids[None], hidden[None])[0]


def copy_model_from(
    config: Qwen3Config,
    copy_token_range: tuple[int, int],
    copy_dim: int = 64,
    read_span: int = 0,
    span_token_range: tuple[int, int] = (0, 0),
) -> CopyQwen3ForCausalLM:
    """A randomly initialised copy model with `config`'s body."""
    cfg = CopyQwen3Config(
        copy_dim=copy_dim,
        copy_token_range=copy_token_range,
        read_span=read_span,
        span_token_range=span_token_range,
        **config.to_diff_dict(),
    )
    return CopyQwen3ForCausalLM(cfg)


def result_tokens(tokenizer) -> tuple[int, int, int]:
    """`result_token_ids` for `tokenizer`: the tool-response markers and the token of an error result's key."""
    marks = tokenizer.convert_tokens_to_ids(["<tool_response>", "</tool_response>"])
    error = tokenizer(str({"error": ""}), add_special_tokens=False)["input_ids"]
    key = [i for i in error if tokenizer.convert_ids_to_tokens(i).strip("Ġ'\"{:") == "error"]
    if None in marks or tokenizer.unk_token_id in marks or len(key) != 1:
        raise ValueError(
            "the tokenizer needs <tool_response> tokens and one token for 'error' "
            "(training.tiny_model.build_tokenizer's vocabulary has them)"
        )
    return marks[0], marks[1], key[0]


def count_results(checkpoint) -> None:
    """Make a saved copy model's coverage count only ids in tool results that are not errors."""
    from transformers import AutoTokenizer

    config = CopyQwen3Config.from_pretrained(checkpoint)
    config.result_token_ids = list(result_tokens(AutoTokenizer.from_pretrained(checkpoint)))
    config.save_pretrained(checkpoint)


def register() -> None:
    """Let `AutoModelForCausalLM.from_pretrained` load a saved copy model (idempotent). Every research
    entry point that loads one calls this first; the training modules know nothing of this head."""
    AutoConfig.register(CopyQwen3Config.model_type, CopyQwen3Config, exist_ok=True)
    AutoModelForCausalLM.register(CopyQwen3Config, CopyQwen3ForCausalLM, exist_ok=True)


# `training.evaluate`'s policy name for a saved copy model: `copy:<checkpoint>`.
POLICY_PREFIX = "copy:"


def load_policy(checkpoint: str):
    """The greedy LLM policy of a saved copy model, this head registered first (in a spawned worker too)."""
    from training.llm_policy import LLMPolicy

    register()
    return LLMPolicy(checkpoint)


def build_pointer_model(
    tokenizer,
    hidden: int = 96,
    layers: int = 2,
    seed: int = 0,
    qk_gain: float = 1.0,
    copy_head: bool = False,
    read_span: int = 0,
):
    """The tiny model of `training.tiny_model` with this pointer-generator head; with `read_span` the
    pointer also reads up to that many tokens after each id, up to the next proposal id."""
    import torch

    from training.tiny_model import MAX_PROPOSAL_ID, id_token_range, initialise, qwen3_config

    torch.manual_seed(seed)
    lo, hi = id_token_range(tokenizer)
    proposals = (hi - MAX_PROPOSAL_ID, hi)  # id_vocabulary lists the proposal ids last
    if tokenizer.convert_ids_to_tokens(proposals[0]) != "p1":  # the span reader keys on proposal ids
        raise ValueError(
            f"{tokenizer.name_or_path or 'this tokenizer'} is not one `build_tokenizer` wrote: "
            "its id vocabulary must end with the proposal ids p1..p299"
        )
    model = copy_model_from(
        qwen3_config(tokenizer, hidden, layers), (lo, hi), read_span=read_span, span_token_range=proposals
    )
    return initialise(model, tokenizer, qk_gain, copy_head)
