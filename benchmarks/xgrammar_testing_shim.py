"""``xgrammar.testing``'s helpers rebuilt on ``leapgen.xgrammar``'s public API,
for ``xgrammar_suite.py`` (which puts this file on the path of xgrammar's own
tests when they run against leapgen).

The helpers follow xgrammar's definitions (``python/xgrammar/testing.py``):
``_get_matcher_from_grammar`` (an empty vocabulary, no cache,
``terminate_without_stop_token=True``), ``_is_grammar_accept_string``, the
bitmask readers. Helpers that read xgrammar internals (its normalized EBNF
printers, rule ids, FSM dumps) have no public equivalent: they raise
NotImplementedError, so only the tests that call them fail.
"""

import torch

import leapgen.xgrammar as xgr


def _get_matcher_from_grammar(grammar, **kwargs):
    compiled = xgr.GrammarCompiler(xgr.TokenizerInfo([]), cache_enabled=False).compile_grammar(grammar)
    return xgr.GrammarMatcher(compiled, terminate_without_stop_token=True, **kwargs)


def _get_matcher_from_grammar_and_tokenizer_info(grammar, tokenizer_info=None, **kwargs):
    if tokenizer_info is None:
        tokenizer_info = xgr.TokenizerInfo([])
    compiled = xgr.GrammarCompiler(tokenizer_info, cache_enabled=False).compile_grammar(grammar)
    return xgr.GrammarMatcher(compiled, **kwargs)


def _is_grammar_accept_string(grammar, input_str, *, debug_print=False, print_time=False, require_termination=True):
    matcher = _get_matcher_from_grammar(grammar)
    if not matcher.accept_string(input_str):
        return False
    return True if not require_termination else matcher.is_terminated()


def _words(bitmask, index) -> list[int]:
    """The unsigned 32-bit words of row ``index`` of an int32 bitmask."""
    row = bitmask[index] if bitmask.dim() == 2 else bitmask
    return [int(w) & 0xFFFFFFFF for w in row.tolist()]


def _get_masked_tokens_from_bitmask(bitmask, vocab_size, index=0):
    words = _words(bitmask, index)
    return [i for i in range(vocab_size) if not (words[i // 32] >> (i % 32)) & 1]


def _is_single_token_bitmask(bitmask, vocab_size, index=0):
    words = _words(bitmask, index)
    ones = [i for i in range(vocab_size) if (words[i // 32] >> (i % 32)) & 1]
    return (True, ones[0]) if len(ones) == 1 else (False, -1)


def bool_mask_to_bitmask(bool_mask):
    m = bool_mask.to(torch.int32)
    pad = (32 - bool_mask.shape[1] % 32) % 32
    if pad:
        m = torch.nn.functional.pad(m, (0, pad), value=1)
    m = m.view(bool_mask.shape[0], -1, 32)
    weights = torch.tensor([1 << i for i in range(32)], dtype=torch.int64).to(torch.int32)
    return (m * weights).sum(dim=2).to(torch.int32)


def bitmask_to_bool_mask(bit_mask, vocab_size=None):
    if vocab_size is None:
        vocab_size = bit_mask.shape[1] * 32
    out = torch.zeros((bit_mask.shape[0], vocab_size), dtype=torch.bool)
    for i in range(vocab_size):
        out[:, i] = (bit_mask[:, i // 32] & (1 << (i % 32))) != 0
    return out


def _traverse_draft_tree(retrieve_next_token, retrieve_next_sibling, draft_tokens, matcher, bitmask, time_threshold=-1.0):
    return matcher.traverse_draft_tree(retrieve_next_token, retrieve_next_sibling, draft_tokens, bitmask, time_threshold)


def _internal(name: str):
    """A stand-in for an internal helper: raises NotImplementedError naming it."""
    def refuse(*args, **kwargs):
        raise NotImplementedError(f"xgrammar.testing.{name} reads xgrammar internals")
    return refuse


for _n in ["_json_schema_to_ebnf", "_regex_to_ebnf", "_ebnf_to_grammar_no_normalization", "_is_rule_fsm_accept_string",
           "_get_allow_empty_rule_ids", "_generate_range_regex", "_generate_float_regex", "_print_grammar_fsms",
           "GrammarFunctor"]:
    globals()[_n] = _internal(_n)
