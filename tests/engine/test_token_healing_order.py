"""Token healing over the token index's byte order (read from the index's disk cache in a new
process, not sorted again): the same extensions as a brute-force prefix scan of the vocabulary."""

from __future__ import annotations

import random

import pytest

from leapgen.engine.token_healing import TokenHealing


def _extensions_by_scan(token_bytes, special, token: int) -> set[int]:
    """The oracle: every non-special token whose bytes strictly extend ``token``'s, by a scan."""
    prefix = token_bytes[token]
    if not prefix:
        return set()
    return {i for i, b in enumerate(token_bytes)
            if i not in special and len(b) > len(prefix) and b.startswith(prefix)}


@pytest.mark.parametrize("family", ["smollm2", "gpt2", "llama2"])
def test_healing_from_the_index_order_finds_the_scans_extensions(family, grammar_compiler):
    compiler = grammar_compiler(family)
    info = compiler.tokenizer_info
    order = compiler.token_index.ids_in_byte_order()
    if order is None:
        pytest.skip("numba is not installed: the token index keeps no byte order")
    keys = [info.token_bytes[i] for i in order.tolist()]
    assert keys == sorted(keys)
    healing = TokenHealing(info.token_bytes, info.special_token_ids, order)
    sorted_here = TokenHealing(info.token_bytes, info.special_token_ids)
    special = info.special_token_ids
    tokens = random.Random(0).sample(range(info.vocab_size), 300)
    tokens += [i for i, b in enumerate(info.token_bytes) if b in (b"a", b" ", b"{", b'"', b"1")]
    for t in tokens:
        want = _extensions_by_scan(info.token_bytes, special, t)
        got = healing.extensions(t).tolist()
        assert len(got) == len(set(got)) and set(got) == want, (family, t, info.token_bytes[t])
        assert got == sorted_here.extensions(t).tolist()
