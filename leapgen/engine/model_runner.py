"""Run the model forward over the new tokens of several sequences at once.

One responsibility: ``batch_forward(caches, token_lists) -> next-token logits``
for a batch whose sequences each bring any number of new tokens (a prefill, a
one-token decode, a jump-forward *extend* of k tokens after a crop), in ONE
forward pass.

How: the new tokens of all sequences are packed into one row of ``N`` tokens
(no padding, as vLLM's varlen batches). Embeddings, projections, MLPs and
norms, where nearly all the FLOPs are, run once over the ``(N, hidden)``
block; only attention is per sequence, each against its own
:class:`~leapgen.engine.kv_cache.KvCache` (a causal mask offset by what the
cache already holds). The layers' own modules (``q_proj``, ``mlp``,
``input_layernorm``, ``rotary_emb``, ...) of the Hugging Face model are called,
so the weights and their numerics are the model's; the code covers the Llama
family layout (Llama, SmolLM2, Mistral, Qwen2/3).

Prompt tokens may run in a lower precision (``prefill_dtype``): on a CPU
with native bfloat16 matrix units (AMX, AVX512-BF16) a bfloat16 GEMM over a
prefill's hundreds of rows is ~10x faster than float32 (measured: 7 vs 71 ms
for 5,760 x 576 x 1,536 on 1 thread), while at the few rows of a decode step
it is slower (the weights are reordered at every call). So the rows of prompt
tokens run their projections and MLP on bfloat16 copies of the weights and
attend in bfloat16 (separate attention calls from generated rows), and every
generated token (decode, jump-forward extend) runs wholly in the model's
float32; norms, rotary embeddings, the residual stream, the KV cache and the
lm_head stay float32 for all. A token's precision depends on its role only;
llama.cpp makes a similar split between prompt processing (GEMM) and
generation (GEMV) kernels. The price: a bfloat16 GEMM's rounding depends on
its row count (oneDNN picks its blocking by shape), so a prompt's KV varies
slightly with the other prompts prefilled in the same step and with where a
prefix-cache hit splits it, and greedy outputs can differ between such runs
(as in vLLM or SGLang without batch-invariant kernels). Generated tokens, and
everything under ``prefill_dtype="float32"``, are unaffected.
"""

from __future__ import annotations

import operator
import threading
import weakref
from typing import Any, NamedTuple, Sequence

import torch
import torch.nn.functional as F


def column_major_linears(model: torch.nn.Module) -> None:
    """Store every ``nn.Linear`` weight of ``model`` column-major: the same
    ``(out, in)`` tensor, as the transpose of a contiguous ``(in, out)`` one.

    ``F.linear(x, W)`` computes ``x @ W.T``; with ``W.T`` contiguous the CPU
    GEMM reads the weights as they lie instead of repacking them at every
    call, which for the few rows of a decode batch (2-32) roughly halves the
    projection and lm_head time (measured on AVX-512 with MKL, 1 thread).
    Idempotent; tied weights (lm_head = embed_tokens) are converted once.

    Parameters
    ----------
    model : torch.nn.Module
        Mutated in place (parameter storage only; values unchanged).
    """
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Linear) and module.weight.is_contiguous() and module.weight.dim() == 2:
                module.weight.data = module.weight.data.t().contiguous().t()


def native_low_precision_dtype(model_dtype: torch.dtype, device: torch.device) -> torch.dtype | None:
    """bfloat16 where a float32 model on the CPU can run it natively, else None.

    Parameters
    ----------
    model_dtype : torch.dtype
        The model's parameter dtype.
    device : torch.device
        Where the model runs.

    Returns
    -------
    torch.dtype or None
        ``torch.bfloat16`` for a float32 model on a CPU whose oneDNN has
        native bfloat16 kernels (AVX512-BF16 or AMX); None otherwise (GPUs,
        models already in a 16-bit dtype, CPUs that would emulate bfloat16).
    """
    if model_dtype != torch.float32 or device.type != "cpu":
        return None
    try:
        native = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()) and torch.backends.mkldnn.is_available()
    except (AttributeError, RuntimeError):
        native = False
    return torch.bfloat16 if native else None


_DTYPE_NAMES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _prefill_dtype(value: Any, model_dtype: torch.dtype, device: torch.device) -> torch.dtype | None:
    if value is None or (isinstance(value, torch.dtype) and value.is_floating_point):
        return value
    if isinstance(value, str) and value == "auto":
        return native_low_precision_dtype(model_dtype, device)
    if isinstance(value, str) and value in _DTYPE_NAMES:
        return _DTYPE_NAMES[value]
    raise ValueError(f"prefill_dtype must be 'auto', one of {sorted(_DTYPE_NAMES)} or a floating torch dtype, "
                     f"got {value!r}")


def _prompt_counts(num_prompt: Any, counts: Sequence[int]) -> list[int]:
    """``num_prompt`` as one int per sequence, clipped to ``[0, count]``."""
    try:
        values = [operator.index(p) for p in num_prompt]
    except TypeError:
        raise ValueError(f"num_prompt must be a sequence of ints, got {num_prompt!r}") from None
    if len(values) != len(counts):
        raise ValueError(f"num_prompt needs one count per sequence: {len(values)} for {len(counts)} sequences")
    return [min(max(p, 0), n) for p, n in zip(values, counts)]


def _has_gated_mlp(base: Any) -> bool:
    """Every layer has the Llama gated MLP without biases."""
    names = ("gate_proj", "up_proj", "down_proj")
    return all(hasattr(layer.mlp, "act_fn")
               and all(getattr(getattr(layer.mlp, n, None), "bias", 0) is None for n in names)
               for layer in base.layers)


class _LowLayer(NamedTuple):
    """One layer's projection weights in the prefill dtype, column-major
    (as :func:`column_major_linears`):
    q, k and v stacked ``(q+k+v, hidden)``."""

    qkv: torch.Tensor
    qkv_bias: torch.Tensor | None
    o: torch.Tensor
    o_bias: torch.Tensor | None
    gate: torch.Tensor
    up: torch.Tensor
    down: torch.Tensor

    @classmethod
    def of(cls, layer: Any, dtype: torch.dtype) -> "_LowLayer":
        attn, mlp = layer.self_attn, layer.mlp

        def weight(*linears):
            return torch.cat([lin.weight.detach() for lin in linears]).to(dtype).t().contiguous().t()

        def bias(*linears):
            if all(lin.bias is None for lin in linears):
                return None
            return torch.cat([lin.bias.detach() if lin.bias is not None else lin.weight.new_zeros(lin.out_features)
                              for lin in linears]).to(dtype)

        qkv = (attn.q_proj, attn.k_proj, attn.v_proj)
        return cls(weight(*qkv), bias(*qkv), weight(attn.o_proj), bias(attn.o_proj),
                   weight(mlp.gate_proj), weight(mlp.up_proj), weight(mlp.down_proj))


_LOW_LAYERS: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()
_LOW_LAYERS_LOCK = threading.Lock()


def _low_layers(model: Any, dtype: torch.dtype) -> list[_LowLayer]:
    """The layers' weight copies in ``dtype``, made once per model and weight
    values (runners over one model, e.g. an engine per grammar backend, share
    them; an in-place edit or ``load_state_dict`` bumps a parameter's version,
    and the next runner copies again)."""
    layers = model.model.layers
    signature = tuple((p.data_ptr(), p._version) for p in layers.parameters())
    with _LOW_LAYERS_LOCK:
        per_dtype = _LOW_LAYERS.setdefault(model, {})
        got = per_dtype.get(dtype)
        if got is None or got[0] != signature:
            got = per_dtype[dtype] = (signature, [_LowLayer.of(layer, dtype) for layer in layers])
        return got[1]


class ModelRunner:
    """Batched forward passes of a Llama-family Hugging Face causal LM.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM in eval mode with the Llama layout (``model.model.layers``
        of ``self_attn.{q,k,v,o}_proj``, ``mlp``, two RMSNorms). Mutated once:
        the weights of its ``nn.Linear`` modules are stored column-major
        (same values and shapes; see :func:`column_major_linears`).
    prefill_dtype : str, torch.dtype or None, default "auto"
        Precision of the projections and attention of prompt tokens (module
        docstring): "auto" (:func:`native_low_precision_dtype`), "bfloat16",
        "float32", a torch dtype, or None (the model's). Costs a copy of the
        layers' linear weights in that dtype (about half the float32 model
        for bfloat16), made once per model and shared by its runners. They
        are taken when the runner is built: a runner does not see later edits
        of the weights (build a new one).

    Attributes
    ----------
    num_forwards : int
        Forward passes run so far.
    num_tokens_fed : int
        Tokens fed to the model so far (prefill, decode and extend together).
    last_num_tokens : int
        Tokens fed by the most recent forward pass (all sequences).
    vocab_size : int
        Width of the model's logits (``config.vocab_size``); may exceed the
        tokenizer's vocabulary (padding rows).
    prefill_dtype : torch.dtype or None
        The prompt tokens' dtype in effect (None: the model's).

    Raises
    ------
    ValueError
        If the model does not have the Llama layout, or ``prefill_dtype`` is
        not one of the values above.
    """

    def __init__(self, model: Any, *, prefill_dtype: Any = "auto"):
        self.model = model
        cfg = model.config
        base = getattr(model, "model", None)
        if base is None or not hasattr(base, "layers") or not hasattr(base, "rotary_emb"):
            raise ValueError(f"unsupported model layout ({type(model).__name__}); expected the Llama family")
        self._base = base
        column_major_linears(model)
        self.vocab_size = int(cfg.vocab_size)
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.num_layers = int(cfg.num_hidden_layers)
        self.num_heads = int(cfg.num_attention_heads)
        self.num_kv_heads = int(getattr(cfg, "num_key_value_heads", None) or self.num_heads)
        self.head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // self.num_heads)
        self.num_forwards = 0
        self.num_tokens_fed = 0
        self.last_num_tokens = 0
        prefill_dtype = _prefill_dtype(prefill_dtype, self.dtype, self.device)
        self.prefill_dtype = prefill_dtype if prefill_dtype != self.dtype and _has_gated_mlp(base) else None
        self._low = [] if self.prefill_dtype is None else _low_layers(model, self.prefill_dtype)

    def new_cache(self) -> Any:
        """An empty KV cache for one sequence.

        Returns
        -------
        leapgen.engine.kv_cache.KvCache
        """
        from leapgen.engine.kv_cache import KvCache

        return KvCache(self.num_layers, self.num_kv_heads, self.head_dim, dtype=self.dtype, device=self.device)

    @staticmethod
    def cache_length(cache: Any) -> int:
        """Number of tokens whose keys/values ``cache`` holds."""
        return int(cache.length)

    @staticmethod
    def crop(cache: Any, length: int) -> None:
        """Drop the KV entries of every token at position >= ``length``
        (mutates ``cache``; see :meth:`KvCache.crop`).

        Raises
        ------
        ValueError
            If ``length`` < 0.
        """
        cache.crop(length)

    def forward(self, cache: Any, token_ids: Sequence[int], num_prompt: int = 0) -> torch.Tensor:
        """:meth:`batch_forward` of one sequence.

        Returns
        -------
        torch.Tensor
            float32, shape ``(vocab_size,)``: logits of the next token.
        """
        return self.batch_forward([cache], [token_ids], (num_prompt,))[0]

    @torch.no_grad()
    def batch_forward(self, caches: Sequence[Any], token_lists: Sequence[Sequence[int]],
                      num_prompt: Sequence[int] | None = None,
                      num_logits: Sequence[int] | None = None) -> torch.Tensor:
        """Append each sequence's new tokens to its cache in one forward pass
        and return the logits of the token after each sequence's last one.

        Parameters
        ----------
        caches : sequence of KvCache
            One per sequence, distinct; each mutated (the new tokens'
            keys/values appended after ``cache.length``).
        token_lists : sequence of sequence of int
            The new tokens of each sequence, at least one each.
        num_prompt : sequence of int or None, default None
            How many of each sequence's new tokens, from the first, are prompt
            tokens: they run in :attr:`prefill_dtype` (clipped to
            ``[0, len(tokens)]``). None: all tokens are generated ones (the
            model's dtype).
        num_logits : sequence of int or None, default None
            How many of each sequence's last positions to return logits of
            (each in ``[1, len(tokens)]``; for log-probabilities of fed
            tokens). None: one each.

        Returns
        -------
        torch.Tensor
            float32, a fresh tensor the caller may modify in place: shape
            ``(batch, vocab_size)``, the logits of the token after each
            sequence's last one; with ``num_logits``, ``(sum(num_logits),
            vocab_size)``, each sequence's rows in position order (its next
            token's row last), sequences in order.

        Raises
        ------
        ValueError
            If the lengths differ, the batch is empty, a sequence brings no
            token, or ``num_prompt`` / ``num_logits`` is not one valid int
            per sequence.
        """
        if len(caches) != len(token_lists) or not caches:
            raise ValueError("batch_forward needs as many caches as token lists, at least one")
        counts = [len(t) for t in token_lists]
        if min(counts) == 0:
            raise ValueError("forward needs at least one token per sequence")
        if num_prompt is not None:
            num_prompt = _prompt_counts(num_prompt, counts)
        if num_logits is not None and (len(num_logits) != len(counts)
                                       or any(not 1 <= k <= n for k, n in zip(num_logits, counts))):
            raise ValueError(f"num_logits must be one int in [1, tokens] per sequence, got {list(num_logits)}")
        starts = [c.length for c in caches]
        for cache, n in zip(caches, counts):
            cache.reserve(n)
        ids = torch.tensor([t for tl in token_lists for t in tl], dtype=torch.long, device=self.device)  # (N,)
        positions = torch.cat([torch.arange(s, s + n) for s, n in zip(starts, counts)]).to(self.device)  # (N,)
        h = self._base.embed_tokens(ids)[None]  # (1, N, D)
        cos, sin = self._base.rotary_emb(h, positions[None])
        split = self._row_split(counts, num_prompt)
        segments = self._attention_segments(starts, counts, num_prompt if split is not None else None)
        for layer_index, layer in enumerate(self._base.layers):
            h = h + self._attention(layer, layer_index, h, cos, sin, caches, starts, counts, segments, split)
            h = h + self._mlp(layer.mlp, layer_index, layer.post_attention_layernorm(h), split)
        for cache, n in zip(caches, counts):
            cache.length += n
        ends = torch.tensor(counts).cumsum(0)  # (B,) one past each sequence's last token
        if num_logits is None:
            rows = ends - 1
        else:
            rows = torch.cat([torch.arange(int(e) - k, int(e)) for e, k in zip(ends, num_logits)])
        logits = self.model.lm_head(self._base.norm(h[0, rows]))  # (B or sum(num_logits), V)
        total = sum(counts)
        self.num_forwards += 1
        self.num_tokens_fed += total
        self.last_num_tokens = total
        return logits.float().clone()

    def _row_split(self, counts: Sequence[int], num_prompt: Sequence[int] | None):
        """None when every row runs in the model's dtype; else ``(low, high)``:
        the packed row indices (int64) of prompt tokens and of the others
        (``high`` None when there are none)."""
        if self.prefill_dtype is None or num_prompt is None or not any(num_prompt):
            return None
        low = torch.zeros(sum(counts), dtype=torch.bool)
        offset = 0
        for n, p in zip(counts, num_prompt):
            low[offset : offset + p] = True
            offset += n
        if bool(low.all()):
            return low.nonzero()[:, 0].to(self.device), None
        return low.nonzero()[:, 0].to(self.device), (~low).nonzero()[:, 0].to(self.device)

    @staticmethod
    def _by_rows(x: torch.Tensor, split, low_fn, high_fn, width: int) -> torch.Tensor:
        """``(1, N, width)``: ``low_fn`` over the prompt rows of ``x``
        ``(1, N, in)``, ``high_fn`` over the others (see :meth:`_row_split`);
        both map ``(n, in)`` to ``(n, width)`` in ``x``'s dtype."""
        low, high = split
        if high is None:
            return low_fn(x[0])[None]
        out = x.new_empty((1, x.shape[1], width))
        out[0, low] = low_fn(x[0, low])
        out[0, high] = high_fn(x[0, high])
        return out

    def _mlp(self, mlp: Any, index: int, x: torch.Tensor, split) -> torch.Tensor:
        """The gated MLP ``down(act(gate(x)) * up(x))``; prompt rows wholly
        in :attr:`prefill_dtype`."""
        if split is None:
            return mlp(x)
        low = self._low[index]

        def low_fn(rows: torch.Tensor) -> torch.Tensor:
            rows = rows.to(self.prefill_dtype)
            return F.linear(mlp.act_fn(F.linear(rows, low.gate)) * F.linear(rows, low.up), low.down).to(x.dtype)

        return self._by_rows(x, split, low_fn, mlp, x.shape[-1])

    def _attention_segments(self, starts, counts, num_prompt) -> list[list[tuple]]:
        """Per sequence, its new rows' attention calls: ``(row offset in the
        sequence's block, rows, cache position of the first, mask, low)``;
        prompt rows (``low``: in the prefill dtype) and generated rows attend
        in separate calls, so a row's precision is its role's alone."""
        out = []
        for i, (start, n) in enumerate(zip(starts, counts)):
            p = 0 if num_prompt is None else num_prompt[i]
            parts = [(0, p, True)] if p else []
            if n > p:
                parts.append((p, n - p, False))
            out.append([(off, m, start + off, self._causal_mask(start + off, m), low) for off, m, low in parts])
        return out

    def _causal_mask(self, start: int, n: int) -> torch.Tensor | None:
        """bool ``(n, start + n)``: new token i sees positions <= start + i;
        None for one token (it sees everything) and for an empty cache
        (``is_causal`` then: the same attention, and the kernel skips the
        masked blocks)."""
        if n == 1 or start == 0:
            return None
        cols = torch.arange(start + n, device=self.device)
        rows = torch.arange(n, device=self.device)[:, None] + start
        return cols[None, :] <= rows

    def _attention(self, layer: Any, index: int, h: torch.Tensor, cos, sin, caches, starts, counts,
                   segments, split) -> torch.Tensor:
        """The attention block's output ``(1, N, D)`` (residual not added);
        writes the new keys/values into each cache at layer ``index``."""
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        attn = layer.self_attn
        x = layer.input_layernorm(h)
        n_tok = x.shape[1]
        if split is None:
            q, k, v = attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)
        else:
            low = self._low[index]
            q, k, v = self._by_rows(
                x, split, lambda rows: F.linear(rows.to(self.prefill_dtype), low.qkv, low.qkv_bias).to(rows.dtype),
                lambda rows: torch.cat([attn.q_proj(rows), attn.k_proj(rows), attn.v_proj(rows)], dim=-1),
                low.qkv.shape[0],
            ).split([self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim,
                     self.num_kv_heads * self.head_dim], dim=-1)
        q = q.view(1, n_tok, self.num_heads, self.head_dim)
        k = k.view(1, n_tok, self.num_kv_heads, self.head_dim)
        v = v.view(1, n_tok, self.num_kv_heads, self.head_dim).transpose(1, 2)
        if getattr(attn, "q_norm", None) is not None:  # Qwen3
            q, k = attn.q_norm(q), attn.k_norm(k)
        q, k = apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)  # (1, H|Hkv, N, hd)
        outs = []
        offset = 0
        for cache, start, n, parts in zip(caches, starts, counts, segments):
            cache.keys[index, :, start : start + n] = k[0, :, offset : offset + n]
            cache.values[index, :, start : start + n] = v[0, :, offset : offset + n]
            for row, m, pos, mask, low in parts:
                keys = cache.keys[index, :, : pos + m][None]  # (1, Hkv, T, hd)
                values = cache.values[index, :, : pos + m][None]
                queries = q[:, :, offset + row : offset + row + m]
                if low:
                    queries, keys, values = (t.to(self.prefill_dtype) for t in (queries, keys, values))
                outs.append(F.scaled_dot_product_attention(
                    queries, keys, values, attn_mask=mask, is_causal=mask is None and m > 1,
                    enable_gqa=self.num_kv_heads != self.num_heads,
                ).to(q.dtype))  # (1, H, m, hd)
            offset += n
        o = torch.cat(outs, dim=2).transpose(1, 2).reshape(1, n_tok, self.num_heads * self.head_dim)
        if split is None:
            return attn.o_proj(o)
        low = self._low[index]
        return self._by_rows(o, split,
                             lambda rows: F.linear(rows.to(self.prefill_dtype), low.o, low.o_bias).to(rows.dtype),
                             attn.o_proj, h.shape[-1])
