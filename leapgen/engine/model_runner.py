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
"""

from __future__ import annotations

from typing import Any, Sequence

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


class ModelRunner:
    """Batched forward passes of a Llama-family Hugging Face causal LM.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM in eval mode with the Llama layout (``model.model.layers``
        of ``self_attn.{q,k,v,o}_proj``, ``mlp``, two RMSNorms). Mutated once:
        the weights of its ``nn.Linear`` modules are stored column-major
        (same values and shapes; see :func:`column_major_linears`).

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

    Raises
    ------
    ValueError
        If the model does not have the Llama layout.
    """

    def __init__(self, model: Any):
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

    def forward(self, cache: Any, token_ids: Sequence[int]) -> torch.Tensor:
        """:meth:`batch_forward` of one sequence.

        Returns
        -------
        torch.Tensor
            float32, shape ``(vocab_size,)``: logits of the next token.
        """
        return self.batch_forward([cache], [token_ids])[0]

    @torch.no_grad()
    def batch_forward(self, caches: Sequence[Any], token_lists: Sequence[Sequence[int]]) -> torch.Tensor:
        """Append each sequence's new tokens to its cache in one forward pass
        and return the logits of the token after each sequence's last one.

        Parameters
        ----------
        caches : sequence of KvCache
            One per sequence, distinct; each mutated (the new tokens'
            keys/values appended after ``cache.length``).
        token_lists : sequence of sequence of int
            The new tokens of each sequence, at least one each.

        Returns
        -------
        torch.Tensor
            float32, shape ``(batch, vocab_size)``: a fresh tensor the caller
            may modify in place.

        Raises
        ------
        ValueError
            If the lengths differ, the batch is empty, or a sequence brings no
            token.
        """
        if len(caches) != len(token_lists) or not caches:
            raise ValueError("batch_forward needs as many caches as token lists, at least one")
        counts = [len(t) for t in token_lists]
        if min(counts) == 0:
            raise ValueError("forward needs at least one token per sequence")
        starts = [c.length for c in caches]
        for cache, n in zip(caches, counts):
            cache.reserve(n)
        ids = torch.tensor([t for tl in token_lists for t in tl], dtype=torch.long, device=self.device)  # (N,)
        positions = torch.cat([torch.arange(s, s + n) for s, n in zip(starts, counts)]).to(self.device)  # (N,)
        h = self._base.embed_tokens(ids)[None]  # (1, N, D)
        cos, sin = self._base.rotary_emb(h, positions[None])
        masks = [self._causal_mask(s, n) for s, n in zip(starts, counts)]
        for layer_index, layer in enumerate(self._base.layers):
            h = h + self._attention(layer, layer_index, h, cos, sin, caches, starts, counts, masks)
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        for cache, n in zip(caches, counts):
            cache.length += n
        last = torch.tensor(counts).cumsum(0) - 1  # (B,) index of each sequence's last token
        logits = self.model.lm_head(self._base.norm(h[0, last]))  # (B, V)
        total = sum(counts)
        self.num_forwards += 1
        self.num_tokens_fed += total
        self.last_num_tokens = total
        return logits.float().clone()

    def _causal_mask(self, start: int, n: int) -> torch.Tensor | None:
        """bool ``(n, start + n)``: new token i sees positions <= start + i;
        None for one token (it sees everything)."""
        if n == 1:
            return None
        cols = torch.arange(start + n, device=self.device)
        rows = torch.arange(n, device=self.device)[:, None] + start
        return cols[None, :] <= rows

    def _attention(self, layer: Any, index: int, h: torch.Tensor, cos, sin, caches, starts, counts,
                   masks) -> torch.Tensor:
        """The attention block's output ``(1, N, D)`` (residual not added);
        writes the new keys/values into each cache at layer ``index``."""
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        attn = layer.self_attn
        x = layer.input_layernorm(h)
        n_tok = x.shape[1]
        q = attn.q_proj(x).view(1, n_tok, self.num_heads, self.head_dim)
        k = attn.k_proj(x).view(1, n_tok, self.num_kv_heads, self.head_dim)
        v = attn.v_proj(x).view(1, n_tok, self.num_kv_heads, self.head_dim).transpose(1, 2)
        if getattr(attn, "q_norm", None) is not None:  # Qwen3
            q, k = attn.q_norm(q), attn.k_norm(k)
        q, k = apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)  # (1, H|Hkv, N, hd)
        outs = []
        offset = 0
        for cache, start, n, mask in zip(caches, starts, counts, masks):
            cache.keys[index, :, start : start + n] = k[0, :, offset : offset + n]
            cache.values[index, :, start : start + n] = v[0, :, offset : offset + n]
            keys = cache.keys[index, :, : start + n][None]  # (1, Hkv, T, hd)
            values = cache.values[index, :, : start + n][None]
            outs.append(F.scaled_dot_product_attention(
                q[:, :, offset : offset + n], keys, values, attn_mask=mask,
                enable_gqa=self.num_kv_heads != self.num_heads,
            ))  # (1, H, n, hd)
            offset += n
        o = torch.cat(outs, dim=2).transpose(1, 2).reshape(1, n_tok, self.num_heads * self.head_dim)
        return attn.o_proj(o)
