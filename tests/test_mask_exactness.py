"""Mask exactness on real vocabularies (issue #2).

For states reached by seeded random walks (token steps that keep the walk
going, e.g. inside strings, and single-byte steps, so some states stand inside
a multi-byte UTF-8 character) of 26 regexes and 10 JSON Schemas, the bitmask
``GrammarMatcher.fill_next_token_bitmask`` writes must equal

(a) a brute-force walk of every token's bytes through the compiled DFA
    (``compiled.dfa.trans``; a numpy walk written here, sharing nothing with
    ``leapgen.compiler.token_index``), cross-checked by ``fork()`` +
    ``accept_token`` on a sample of ids; and
(b) an oracle that shares no code with leapgen: the ``regex`` module's
    ``regex.fullmatch(pattern, prefix + token_text, partial=True)`` for every
    token whose bytes decode as UTF-8 text (prefix = the text walked so far),
    stop tokens allowed iff ``regex.fullmatch(pattern, prefix)``, special
    tokens never. Skipped for states inside a character (no text prefix).

The oracle is pruned soundly by first character (partial matches are
prefix-closed: if ``prefix + c`` cannot be extended to a match, neither can
``prefix + c + rest``). The default run checks three states per grammar
(the start, one inside a character, the last text state) and runs the oracle
on the two text states over every token whose first character is rejected
plus a seeded sample of the others. ``--run-slow`` checks (a) on every state of two longer
walks, runs the oracle over all tokens on a few text states, and adds two
vocabularies (mistral, o200k).

Patterns are chosen where ECMAScript (leapgen) and Python's ``regex`` agree:
no ``\\d \\w \\s`` (Unicode-aware in Python), no ``.`` (line terminators
differ), explicit classes instead.
"""

from __future__ import annotations

import functools
import importlib.util
import zlib
from dataclasses import dataclass

import numpy as np
import pytest
import regex

from leapgen import GrammarCompiler, GrammarMatcher

FAMILIES = ["gpt2", "llama3", "qwen", "smollm2", "llama2", "cl100k"]
SLOW_FAMILIES = ["mistral", "o200k"]

# A JSON string with any spelling (RFC 8259): raw characters except controls, '"' and '\';
# short escapes; \uXXXX for a non-surrogate BMP code point; a surrogate pair escape.
JSON_STR = (r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u(?:[0-9a-cA-CefEF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2})'
            r'|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})*"')
JSON_CHAR = JSON_STR[1:-2]  # one character, any spelling (the group before '*')
JSON_INT = r"-?(?:0|[1-9][0-9]*)"
JSON_NUM = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"

REGEXES = [
    r"hello, world!",
    r"[a-z]+",
    r"[A-Za-z_][A-Za-z0-9_]{0,15}",
    r"(cat|dog|bird)s?",
    JSON_NUM,
    r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])",
    r'"[^"\\]*"',
    JSON_STR,
    r'\{"name": "[^"]{0,10}", "age": [0-9]{1,3}\}',
    r"[日月火水木金土]{1,3}曜日",
    r"(😀|😃|🎉)+ ?(ok|👍)",
    r"[α-ω]+(\.[α-ω]+)*",
    r"[\u4e00-\u9fff]{2,5}",
    r"(ab|a)(bc|c)?d",
    r"x{2,5}y{0,2}z?",
    r"((true|false|null),){0,3}(true|false|null)",
    r"\[([0-9]+(, [0-9]+)*)?\]",
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    r"(https?://)?[a-z0-9.-]+\.(com|org|net)(/[a-z0-9_/]*)?",
    r"[^\n]{0,20}\n[^\n]{0,20}",
    r"([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?",
    r"(a|é|日|🎉){3}",
    r"[ \t]*(yes|no)[ \t]*",
    r"\$[0-9]{1,3}(,[0-9]{3})*(\.[0-9]{2})?",
    r"([A-Z][a-z]+ ){1,3}[A-Z][a-z]+",
    r"[^a-z]{0,6}",
]

# (schema, an equivalent Python regex under the compact layout: any_whitespace=False,
# separators (",", ":"), properties in the order listed, strict mode: no other properties).
SCHEMAS = [
    ({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
      "required": ["name", "age"]},
     r'\{"name":' + JSON_STR + r',"age":' + JSON_INT + r"\}"),
    ({"enum": ["red", "green", "blue", "日本"]}, r'"red"|"green"|"blue"|"日本"'),
    ({"type": "array", "items": {"type": "number"}}, r"\[(?:" + JSON_NUM + r"(?:," + JSON_NUM + r")*)?\]"),
    ({"anyOf": [{"type": "boolean"}, {"type": "null"}]}, r"true|false|null"),
    ({"type": "string", "minLength": 1, "maxLength": 3}, r'"(?:' + JSON_CHAR + r'){1,3}"'),
    ({"type": "string", "pattern": "^[a-z]{2,4}-[0-9]{3}$"}, r'"[a-z]{2,4}-[0-9]{3}"'),
    ({"type": "object",
      "properties": {"point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                               "required": ["x", "y"]},
                     "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
      "required": ["point", "tags"]},
     r'\{"point":\{"x":' + JSON_NUM + r',"y":' + JSON_NUM + r'\},"tags":\[(?:' + JSON_STR + r"(?:," + JSON_STR
     + r"){0,2})?\]\}"),
    ({"type": "object", "properties": {"kind": {"const": "event"}, "ok": {"const": True}},
      "required": ["kind", "ok"]},
     r'\{"kind":"event","ok":true\}'),
    ({"type": "integer", "minimum": -5, "maximum": 120},
     r"-?0|-[1-5]|[1-9][0-9]?|1[01][0-9]|120"),  # -0 is accepted wherever 0 is (grammar/json/numbers.py)
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]},
     r'\{"a":' + JSON_INT + r'(?:,"b":' + JSON_STR + r")?\}"),
]

DEFAULT_WALK_STEPS, SLOW_WALK_STEPS = 10, 16
SLOW_ORACLE_STATES = 4
DEFAULT_ORACLE_SAMPLE = 6000  # oracle calls per state beyond the first-character pruning


# ---------------------------------------------------------------- per-vocabulary tables


@dataclass
class Vocab:
    info: object
    token_bytes: tuple
    by_len_bytes: np.ndarray  # uint8 (n, max_len): tokens with bytes, longest first, 0-padded
    by_len_ids: np.ndarray  # int64 (n,)
    longer_than: list  # [c] = number of tokens longer than c
    stop_ids: np.ndarray  # int64
    texts: list  # unique decoded texts of non-special tokens that are valid UTF-8
    text_ids: list  # np.ndarray of ids per text
    first_groups: dict  # first character -> np.ndarray of text indices


@functools.lru_cache(maxsize=None)
def vocab_tables(family: str) -> Vocab:
    from vocab_loaders import load_tokenizer_info

    info = load_tokenizer_info(family)
    tb = info.token_bytes
    ids = np.array([i for i, b in enumerate(tb) if b], np.int64)
    lens = np.array([len(tb[i]) for i in ids], np.int64)
    order = np.argsort(-lens, kind="stable")
    ids, lens = ids[order], lens[order]
    mat = np.zeros((len(ids), int(lens.max())), np.uint8)
    for row, i in enumerate(ids.tolist()):
        mat[row, :len(tb[i])] = np.frombuffer(tb[i], np.uint8)
    by_text: dict[str, list[int]] = {}
    for i in ids.tolist():
        try:
            by_text.setdefault(tb[i].decode("utf-8"), []).append(i)
        except UnicodeDecodeError:
            pass
    texts = list(by_text)
    groups: dict[str, list[int]] = {}
    for k, t in enumerate(texts):
        groups.setdefault(t[0], []).append(k)
    return Vocab(info, tb, mat, ids, [int(np.count_nonzero(lens > c)) for c in range(mat.shape[1])],
                 np.array(sorted(info.stop_token_ids), np.int64), texts,
                 [np.array(by_text[t], np.int64) for t in texts],
                 {c: np.array(v, np.int64) for c, v in groups.items()})


def brute_force_walk(v: Vocab, trans: np.ndarray, state: int) -> np.ndarray:
    """int64 (len(by_len_ids),): the state each token (``by_len_ids`` order)
    ends in from ``state``, -1 where a byte has no transition. All tokens are
    walked to their end, no pruning."""
    st = np.full(len(v.by_len_ids), state, np.int64)
    for c, k in enumerate(v.longer_than):
        cur = st[:k]
        live = cur >= 0
        if not live.any():
            break
        st[:k] = np.where(live, trans[np.maximum(cur, 0), v.by_len_bytes[:k, c]], -1)
    return st


def brute_force_mask(v: Vocab, trans: np.ndarray, accepting: np.ndarray, state: int) -> np.ndarray:
    """bool (vocab_size,): tokens whose every byte has a DFA transition from
    ``state``, plus the stop ids iff ``state`` is accepting."""
    out = np.zeros(v.info.vocab_size, bool)
    out[v.by_len_ids[brute_force_walk(v, trans, state) >= 0]] = True
    out[v.stop_ids] = bool(accepting[state])
    return out


def counted_brute_force_mask(v: Vocab, dfa, bounds, state: tuple[int, int]) -> np.ndarray:
    """:func:`brute_force_mask` for a DFA with counted regions (leapgen.automata.counted), written
    here from the tables alone: columns ``256 + 2k`` (an item of region ``k`` starts: the count goes up,
    at most ``hi``) and ``257 + 2k`` (the region ends: the count is at least ``lo``, then 0), taken
    where a byte has no edge of its own."""
    trans = dfa.trans
    lo = np.array([b[0] for b in bounds], np.int64)
    hi = np.array([np.iinfo(np.int64).max if b[1] is None else b[1] for b in bounds], np.int64)
    q = np.full(len(v.by_len_ids), state[0], np.int64)
    c = np.full(len(v.by_len_ids), state[1], np.int64)
    for col, k in enumerate(v.longer_than):
        cur, cnt, b = q[:k], c[:k], v.by_len_bytes[:k, col]
        alive = cur >= 0
        safe = np.maximum(cur, 0)
        nxt = np.where(alive, trans[safe, b], -1)
        new_c = cnt.copy()
        for r in range(len(bounds)):
            item, end = trans[safe, 256 + 2 * r], trans[safe, 257 + 2 * r]
            via_item = alive & (nxt < 0) & (item >= 0) & (trans[np.maximum(item, 0), b] >= 0)
            via_end = alive & (nxt < 0) & (end >= 0) & (trans[np.maximum(end, 0), b] >= 0)
            nxt = np.where(via_item, np.where(cnt < hi[r], trans[np.maximum(item, 0), b], -1), nxt)
            new_c = np.where(via_item, cnt + 1, new_c)
            nxt = np.where(via_end, np.where(cnt >= lo[r], trans[np.maximum(end, 0), b], -1), nxt)
            new_c = np.where(via_end, 0, new_c)
        q[:k], c[:k] = nxt, new_c
    out = np.zeros(v.info.vocab_size, bool)
    out[v.by_len_ids[q >= 0]] = True
    out[v.stop_ids] = bool(dfa.accepting[state[0]])
    return out


def dfa_state(trans: np.ndarray, start: int, data: bytes) -> int:
    s = start
    for b in data:
        s = int(trans[s, b])
        if s < 0:
            break
    return s


def unpack(bitmask_row: np.ndarray) -> np.ndarray:
    return np.unpackbits(np.ascontiguousarray(bitmask_row).astype("<i4").view(np.uint8), bitorder="little").astype(bool)


def oracle_mask(v: Vocab, rx, prefix: str, rng, sample: int | None):
    """(checked ids, allowed bool over them) from Python ``regex`` alone."""
    checked, allowed, full = [], [], []
    for ch, idx in v.first_groups.items():
        if rx.fullmatch(prefix + ch, partial=True) is None:
            checked.extend(v.text_ids[k] for k in idx.tolist())
            allowed.extend(np.zeros(len(v.text_ids[k]), bool) for k in idx.tolist())
        else:
            full.append(idx)
    full = np.concatenate(full) if full else np.zeros(0, np.int64)
    if sample is not None and len(full) > sample:
        full = rng.choice(full, sample, replace=False)
    for k in full.tolist():
        ok = rx.fullmatch(prefix + v.texts[k], partial=True) is not None
        checked.append(v.text_ids[k])
        allowed.append(np.full(len(v.text_ids[k]), ok))
    if not checked:
        return np.zeros(0, np.int64), np.zeros(0, bool)
    return np.concatenate(checked), np.concatenate(allowed)


# ---------------------------------------------------------------- walks and checks


def random_walk(compiled, v: Vocab, rng, steps: int):
    """Seeded walk: list of (bytes walked, forked matcher). Token steps pick a
    random allowed token, avoiding tokens after which the grammar can only
    end (so walks go deep, e.g. stay inside strings); byte steps (1 in 3)
    accept one live byte, preferring a UTF-8 lead byte so that the next state
    is inside a character."""
    trans = compiled.dfa.trans
    has_exit = (trans >= 0).any(axis=1)
    m = GrammarMatcher(compiled)
    buf = b""
    out = [(buf, m.fork())]
    for _ in range(steps):
        s = m.state
        live = np.flatnonzero(trans[s] >= 0)
        if live.size == 0:
            break
        ends = brute_force_walk(v, trans, s)
        ok = ends >= 0
        onward = ok & has_exit[np.maximum(ends, 0)]
        tokens = v.by_len_ids[onward if onward.any() else ok]
        if rng.random() < 1 / 3 or tokens.size == 0:
            lead = live[live >= 0xC2]
            b = int(rng.choice(lead if lead.size and rng.random() < 0.7 else live))
            assert m.accept_string(bytes([b])), (buf, b)
            buf += bytes([b])
        else:
            t = int(rng.choice(tokens))
            assert m.accept_token(t), (buf, t, v.token_bytes[t])
            buf += v.token_bytes[t]
        out.append((buf, m.fork()))
    return out


def pick_states(walked, rng, run_slow: bool):
    """States to check and, per state, whether the oracle (b) runs on it.

    Default: the start, one state inside a character, the last text state;
    the oracle on the two text states. ``--run-slow``: every walked state, the
    oracle on up to ``SLOW_ORACLE_STATES`` text states (all tokens)."""
    if run_slow:
        text = [i for i, (buf, _) in enumerate(walked) if _decodes(buf)]
        chosen = set(text[:1]) | set(rng.choice(text, min(len(text), SLOW_ORACLE_STATES), replace=False).tolist())
        return [(buf, m, i in chosen) for i, (buf, m) in enumerate(walked)]
    picked = [(*walked[0], True)]
    mid = [w for w in walked[1:] if not _decodes(w[0])]
    whole = [w for w in walked[1:] if _decodes(w[0])]
    if mid:
        picked.append((*mid[int(rng.integers(len(mid)))], False))
    if whole:
        picked.append((*whole[-1], True))
    return picked


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def check_state(compiled, v: Vocab, rx, buf: bytes, m: GrammarMatcher, rng, run_slow: bool, oracle: bool) -> dict:
    counted = getattr(compiled, "automaton", None)  # a CountedGrammar: states are (dfa state, count)
    if counted is None:
        dfa = compiled.dfa
        assert dfa_state(dfa.trans, dfa.start, buf) == m.state
    vocab_size = v.info.vocab_size
    words = (vocab_size + 31) // 32
    bitmask = rng.integers(-2**31, 2**31, size=(2, words), dtype=np.int64).astype(np.int32)  # junk to overwrite
    before = bitmask[0].copy()
    m.fill_next_token_bitmask(bitmask, 1)
    assert np.array_equal(bitmask[0], before), "fill wrote outside its row"
    bits = unpack(bitmask[1])
    assert not bits[vocab_size:].any(), "bits past vocab_size are set"
    got = bits[:vocab_size]

    # (a) brute force over the DFA, and accept_token on a sample
    want = (brute_force_mask(v, dfa.trans, dfa.accepting, m.state) if counted is None else
            counted_brute_force_mask(v, counted.dfa, list(zip(counted.lo.tolist(), counted.hi.tolist())), m.state))
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (f"bitmask != brute force at {buf!r}: "
                           + ", ".join(f"{i} {v.token_bytes[i]!r} mask={got[i]}" for i in bad[:8].tolist()))
    allowed, rejected = np.flatnonzero(want), np.flatnonzero(~want)
    for ids in (allowed, rejected):
        for t in rng.choice(ids, min(len(ids), 40), replace=False).tolist() if len(ids) else []:
            f = m.fork()
            assert f.accept_token(t) == bool(want[t]), (buf, t, v.token_bytes[t])

    # (b) the independent oracle, on text states only
    if not oracle:
        return {"oracle": 0}
    prefix = buf.decode("utf-8")
    ids, ok = oracle_mask(v, rx, prefix, rng, None if run_slow else DEFAULT_ORACLE_SAMPLE)
    bad = ids[got[ids] != ok]
    assert bad.size == 0, (f"bitmask != regex oracle after {prefix!r}: "
                           + ", ".join(f"{i} {v.token_bytes[i]!r} mask={got[i]}" for i in bad[:8].tolist()))
    complete = rx.fullmatch(prefix) is not None
    assert np.all(got[v.stop_ids] == complete), (prefix, complete)
    assert m.is_completed() == complete
    special = sorted(set(v.info.special_token_ids) - set(v.stop_ids.tolist()))
    assert not got[special].any(), "a special (non-stop) token is allowed"
    return {"oracle": len(ids)}


def run_grammar(compiled, family: str, pattern: str, run_slow: bool):
    assert compiled.is_regular, "these grammars are regular: the brute force walks compiled.dfa"
    v = vocab_tables(family)
    rx = regex.compile(pattern)
    rng = np.random.default_rng(zlib.crc32(f"{family}\0{pattern}".encode()))
    walked = random_walk(compiled, v, rng, SLOW_WALK_STEPS if run_slow else DEFAULT_WALK_STEPS)
    if run_slow:
        walked += random_walk(compiled, v, rng, SLOW_WALK_STEPS)[1:]  # a second walk
    checked = [check_state(compiled, v, rx, buf, m, rng, run_slow, oracle)
               for buf, m, oracle in pick_states(walked, rng, run_slow)]
    assert checked and checked[0]["oracle"] > 0  # the start state always gets the oracle


# ---------------------------------------------------------------- tests


def family_params():
    return FAMILIES + [pytest.param(f, marks=pytest.mark.slow) for f in SLOW_FAMILIES]


@pytest.mark.parametrize("family", family_params())
@pytest.mark.parametrize("pattern", REGEXES, ids=[f"re{i}" for i in range(len(REGEXES))])
def test_regex_mask_exact(grammar_compiler, run_slow, family, pattern):
    compiled = grammar_compiler(family).compile_regex(pattern)
    run_grammar(compiled, family, pattern, run_slow)


@pytest.mark.parametrize("family", family_params())
@pytest.mark.parametrize("schema, pattern", SCHEMAS, ids=[f"schema{i}" for i in range(len(SCHEMAS))])
def test_json_schema_mask_exact(grammar_compiler, run_slow, family, schema, pattern):
    if importlib.util.find_spec("leapgen.grammar.json") is None:
        pytest.skip("the JSON Schema front-end (leapgen/grammar/json/) is not there yet")
    compiled = grammar_compiler(family).compile_json_schema(schema, any_whitespace=False, separators=(",", ":"))
    run_grammar(compiled, family, pattern, run_slow)


def test_oracle_patterns_spot_values():
    """The hand-written oracles say what the grammars mean: spot values."""
    rx = {p: regex.compile(p) for p in [JSON_STR, JSON_NUM, JSON_INT]}
    assert rx[JSON_STR].fullmatch('"a\\u00e9\\ud83d\\ude00\\n日"')
    assert not rx[JSON_STR].fullmatch('"\\ud83d"')  # lone surrogate escape
    assert not rx[JSON_STR].fullmatch('"a\nb"')  # raw control character
    assert rx[JSON_NUM].fullmatch("-0.5e+10") and not rx[JSON_NUM].fullmatch("01")
    assert rx[JSON_INT].fullmatch("-0") and not rx[JSON_INT].fullmatch("1.0")
    assert len(REGEXES) >= 20 and len(SCHEMAS) == 10


# A string with maxLength 40 next to an unbounded one: token slices (leapgen/compiler/token_slices.py) apply
# with a limit of the characters left (capped at 32), and not at all where some characters die.
SLICE_SCHEMA = ({"type": "object", "properties": {"s": {"type": "string", "maxLength": 40}, "t": {"type": "string"}},
                 "required": ["s", "t"]},
                r'\{"s":"(?:' + JSON_CHAR + r'){0,40}","t":' + JSON_STR + r"\}")
SLICE_PREFIXES = ['{"s":"' + "a" * n for n in (0, 8, 9, 10, 31, 32, 33, 38, 39, 40)] + [
    '{"s":"' + "é日" * 17, '{"s":"ab\\', '{"s":"ab\\u00', '{"s":"","t":"', '{"s":"","t":"x\\"']


@pytest.mark.parametrize("count_lengths", [True, False], ids=["counted", "in-automaton"])
@pytest.mark.parametrize("family", ["llama3", "gpt2"])
@pytest.mark.parametrize("prefix", SLICE_PREFIXES)
def test_slice_boundary_mask_exact(grammar_compiler, family, prefix, count_lengths):
    schema, pattern = SLICE_SCHEMA
    compiler = grammar_compiler(family)
    if not count_lengths:
        compiler = GrammarCompiler(compiler.tokenizer_info, count_lengths=False, token_index=compiler.token_index,
                                   warm_up=False)
    compiled = compiler.compile_json_schema(schema, any_whitespace=False, separators=(",", ":"))
    assert compiled.is_regular != count_lengths  # maxLength 40 is counted (a CountedGrammar), or in the DFA
    m = GrammarMatcher(compiled)
    assert m.accept_string(prefix.encode())
    rng = np.random.default_rng(zlib.crc32(f"{family}\0{prefix}".encode()))
    check_state(compiled, vocab_tables(family), regex.compile(pattern), prefix.encode(), m, rng, False, True)
