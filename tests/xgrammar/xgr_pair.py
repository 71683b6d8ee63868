"""Helpers shared by the ``leapgen.xgrammar`` suites.

- :func:`allowed`: the token ids a bitmask row allows;
- :func:`matcher_for`: a matcher over a small raw vocabulary;
- :class:`Pair`: the same vocabulary in ``xgrammar`` and ``leapgen.xgrammar``,
  and :meth:`Pair.compare_walk`, which walks both matchers along a token
  sequence comparing masks, verdicts, completion and jump-forward strings.
"""

from __future__ import annotations

import codecs
import functools
import re

import numpy as np


_LOW_SURROGATE_START = re.compile(rb"\\u[dD][c-fC-F]")
_HIGH_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}$")


_LOW_ESCAPE_PREFIX = re.compile(rb"(\\(u([dD]([c-fC-F][0-9a-fA-F]{0,2})?)?)?)?")


def _lone_surrogate_escape(text: bytes, token: bytes) -> bool:
    """Whether ``token``, after ``text``, makes a JSON surrogate escape that cannot
    be half of a pair (no Unicode scalar value): a low one (``\\uDC00``-``\\uDFFF``)
    with no high one just before it, or a high one followed by anything but a low one."""
    data = text[-12:] + token
    for k in range(len(data)):
        if not data.startswith(b"\\u", k):
            continue
        if _LOW_SURROGATE_START.match(data, k) and not _HIGH_SURROGATE.search(data[:k]):
            return True
        if _HIGH_SURROGATE.match(data[:k + 6], k):
            after = data[k + 6:k + 12]
            if after and not _LOW_ESCAPE_PREFIX.fullmatch(after):
                return True
    return False


def _not_utf8(text: bytes, token: bytes) -> bool:
    """Whether ``token`` after ``text`` holds bytes that are no UTF-8 text (a stray
    continuation byte, a byte no encoding uses); a character left incomplete at the
    end is not counted."""
    tail = text[-4:]
    while tail and (tail[0] & 0xC0) == 0x80:  # start the tail at a character boundary
        tail = tail[1:]
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        decoder.decode(tail, final=False)
    except UnicodeDecodeError:
        return False  # the text itself is not UTF-8 here: no evidence either way
    try:
        decoder.decode(token, final=False)
    except UnicodeDecodeError:
        return True
    return False


def _whitespace_past(text: bytes, token: bytes, bound: int) -> bool:
    """Whether ``token`` is JSON whitespace only and makes the run ending ``text`` longer than ``bound``."""
    if not token or token.strip(b" \t\n\r"):
        return False
    run = len(text) - len(text.rstrip(b" \t\n\r"))
    return run + len(token) > bound


def allowed(bitmask, vocab_size: int, row: int = 0) -> np.ndarray:
    """Token ids whose bit is set in ``bitmask[row]`` (below ``vocab_size``)."""
    words = np.ascontiguousarray(np.asarray(bitmask[row]), dtype=np.int32)
    return np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab_size])


def mask_of(xgr, matcher, vocab_size: int) -> list[int]:
    """The ids a fresh one-row bitmask allows after ``matcher.fill_next_token_bitmask``."""
    bitmask = xgr.allocate_token_bitmask(1, vocab_size)
    matcher.fill_next_token_bitmask(bitmask)
    return allowed(bitmask, vocab_size).tolist()


def matcher_for(xgr, grammar, vocab, **matcher_kwargs):
    """A matcher of ``grammar`` (GBNF text, or a Grammar) over raw ``vocab``."""
    info = xgr.TokenizerInfo(vocab)
    compiled = xgr.GrammarCompiler(info, max_threads=1).compile_grammar(grammar)
    return xgr.GrammarMatcher(compiled, **matcher_kwargs)


@functools.lru_cache(maxsize=None)
def leapgen_info(family: str):
    """``leapgen.xgrammar.TokenizerInfo.from_huggingface`` of an HF family, cached
    (shared by every suite: building its token index walks the vocabulary)."""
    import leapgen.xgrammar as L
    from vocab_loaders import load_hf_tokenizer

    return L.TokenizerInfo.from_huggingface(load_hf_tokenizer(family))


@functools.lru_cache(maxsize=None)
def pair(family: str) -> "Pair":
    """The :class:`Pair` of a tokenizer family, cached (skips when its files are missing)."""
    return Pair(family)


class Pair:
    """One vocabulary in both modules, with compilers.

    Families: ``"llama3"`` and ``"qwen"`` through ``from_huggingface``,
    ``"mistral"`` through the constructor over its SentencePiece pieces (as
    vLLM builds a Mistral vocabulary: byte fallback, EOS, ``add_prefix_space``).
    """

    def __init__(self, family: str):
        import xgrammar as X

        import leapgen.xgrammar as L
        from vocab_loaders import load_encoder, load_hf_tokenizer, package_dir, read_sentencepiece_model

        self.family = family
        self.encode = load_encoder(family)
        if family == "mistral":
            pieces, _ = read_sentencepiece_model(package_dir("mistral") / "data" / "tokenizer.model.v1")
            self.decode = lambda ids: "".join(pieces[i] for i in ids).replace("\u2581", " ")
            self.x_info = X.TokenizerInfo(pieces, X.VocabType.BYTE_FALLBACK, stop_token_ids=[2], add_prefix_space=True)
            self.l_info = L.TokenizerInfo(pieces, L.VocabType.BYTE_FALLBACK, stop_token_ids=[2], add_prefix_space=True)
        else:
            tok = load_hf_tokenizer(family)
            self.decode = tok.decode
            self.x_info = X.TokenizerInfo.from_huggingface(tok)
            self.l_info = leapgen_info(family)
        self.X, self.L = X, L
        self.vocab_size = self.l_info.vocab_size
        #: leapgen's special ids: never allowed by leapgen, text for xgrammar ("special" row of the table).
        self.special = np.zeros(self.vocab_size, bool)
        self.special[self.l_info.special_token_ids] = True
        #: Mask differences discounted by row of the differences table (see :meth:`compare_walk`).
        self.discounted = {"self": 0, "loose": 0, "unicode-escapes": 0, "tag-free-text": 0, "tag-json-space": 0}
        #: The JSON whitespace bound of the grammar walked (structural tags: 20), else None.
        self.whitespace_bound = None
        self.x_compiler = X.GrammarCompiler(self.x_info, max_threads=2)
        self.l_compiler = L.GrammarCompiler(self.l_info)

    def compile(self, kind: str, source, **options):
        """``(xgrammar's, leapgen's)`` compiled grammar of ``kind``
        (``"ebnf"``, ``"regex"``, ``"json_schema"``, ``"lark"``, ``"builtin_json"``)."""
        out = []
        for c in (self.x_compiler, self.l_compiler):
            if kind == "ebnf":
                out.append(c.compile_grammar(source, **options))
            elif kind == "regex":
                out.append(c.compile_regex(source))
            elif kind == "json_schema":
                out.append(c.compile_json_schema(source, **options))
            elif kind == "lark":
                out.append(c.compile_lark(source))
            elif kind == "structural_tag":
                out.append(c.compile_structural_tag(source))
            else:
                out.append(c.compile_builtin_json_grammar())
        return tuple(out)

    def _lone(self, accepted: list[int], token: int) -> bool:
        """Whether ``token`` after the ``accepted`` tokens makes a lone surrogate escape."""
        text = b"".join(self.l_info.native.token_bytes[t] for t in accepted[-12:])
        return _lone_surrogate_escape(text, self.l_info.native.token_bytes[token])

    def _mask(self, mod, matcher) -> np.ndarray:
        bitmask = mod.allocate_token_bitmask(1, self.vocab_size)
        matcher.fill_next_token_bitmask(bitmask)
        return allowed(bitmask, self.vocab_size)

    def compare_walk(self, compiled: tuple, token_ids: list[int], *, probes: int = 8, seed: int = 0) -> list[str]:
        """Walk both matchers along ``token_ids`` (then the stop token) and list
        every difference: masks (leapgen's special ids aside, see the "special"
        row; leapgen must never allow one; counted in :attr:`discounted` and not
        reported, each on evidence: a token only leapgen's mask allows that
        xgrammar's own ``accept_token`` accepts is the "self" row, one only
        xgrammar's allows that its ``accept_token`` rejects the "loose" row, one
        that makes a lone low-surrogate escape the "unicode-escapes" row),
        ``accept_token`` verdicts of the
        path and of ``probes`` tokens drawn from the union of both masks at each
        step (on forks), ``is_completed``, ``is_terminated`` and
        ``find_jump_forward_string``. Empty when they agree everywhere."""
        rng = np.random.default_rng(seed)
        xm, lm = self.X.GrammarMatcher(compiled[0]), self.L.GrammarMatcher(compiled[1])
        diffs = []
        stop = self.l_info.stop_token_ids[0]
        for step, token in enumerate([*token_ids, stop]):
            if xm.is_terminated() or lm.is_terminated():
                break
            xa, la = self._mask(self.X, xm), self._mask(self.L, lm)
            if self.special[la].any():
                diffs.append(f"step {step}: leapgen allows special ids {la[self.special[la]][:5].tolist()}")
            xa = xa[~self.special[xa]]
            if not np.array_equal(xa, la):
                only_x, only_l = np.setdiff1d(xa, la), np.setdiff1d(la, xa)
                # the "self" row: tokens xgrammar's mask forbids though its own matcher accepts them
                own = np.array([t for t in only_l.tolist() if xm.fork().accept_token(t)], np.int64)
                self.discounted["self"] += len(own)
                only_l = np.setdiff1d(only_l, own)
                # the "loose" row: tokens xgrammar's mask allows though its own matcher rejects them
                loose = np.array([t for t in only_x.tolist() if not xm.fork().accept_token(t)], np.int64)
                self.discounted["loose"] += len(loose)
                only_x = np.setdiff1d(only_x, loose)
                # the "unicode-escapes" row: a lone surrogate escape (\uDC00-\uDFFF first) xgrammar allows
                lone = np.array([t for t in only_x.tolist() if self._lone(token_ids[:step], t)], np.int64)
                self.discounted["unicode-escapes"] += len(lone)
                only_x = np.setdiff1d(only_x, lone)
                # the "tag-free-text" row: bytes that are no UTF-8 text, which xgrammar's free text allows
                text = b"".join(self.l_info.native.token_bytes[t] for t in token_ids[max(0, step - 4):step])
                bad = np.array([t for t in only_x.tolist() if _not_utf8(text, self.l_info.native.token_bytes[t])],
                               np.int64)
                self.discounted["tag-free-text"] += len(bad)
                only_x = np.setdiff1d(only_x, bad)
                # the "tag-json-space" row: a whitespace run past leapgen's bound of 20 in a tag's JSON
                if self.whitespace_bound is not None:
                    long_ws = np.array([t for t in only_x.tolist() if _whitespace_past(
                        text, self.l_info.native.token_bytes[t], self.whitespace_bound)], np.int64)
                    self.discounted["tag-json-space"] += len(long_ws)
                    only_x = np.setdiff1d(only_x, long_ws)
            if not np.array_equal(xa, la) and (len(only_x) or len(only_l)):
                diffs.append(f"step {step} after {self.decode(token_ids[:step])[-40:]!r}: xgrammar alone allows "
                             f"{[self.decode([i]) for i in only_x[:6]]} ({len(only_x)}), leapgen alone "
                             f"{[self.decode([i]) for i in only_l[:6]]} ({len(only_l)})")
            union = np.union1d(xa, la)
            for t in rng.choice(union, size=min(probes, len(union)), replace=False).tolist() if len(union) else []:
                xf, lf = xm.fork(), lm.fork()
                xa_t, la_t = xf.accept_token(t), lf.accept_token(t)
                data = self.l_info.native.token_bytes[t]
                text = b"".join(self.l_info.native.token_bytes[u] for u in token_ids[max(0, step - 4):step])
                explained = xa_t and (self._lone(token_ids[:step], t) or _not_utf8(text, data) or (
                    self.whitespace_bound is not None and _whitespace_past(text, data, self.whitespace_bound)))
                if xa_t != la_t and not explained:
                    diffs.append(f"step {step}: accept_token({self.decode([t])!r}) differs")
            for what in ("is_completed", "find_jump_forward_string"):
                a, b = getattr(xm, what)(), getattr(lm, what)()
                if a != b:
                    diffs.append(f"step {step}: {what} xgrammar {a!r} leapgen {b!r}")
            a, b = xm.accept_token(token), lm.accept_token(token)
            if a != b:
                diffs.append(f"step {step}: accept_token({self.decode([token])!r}) xgrammar {a} leapgen {b}")
            if not (a and b):
                break
        if xm.is_terminated() != lm.is_terminated():
            diffs.append(f"is_terminated xgrammar {xm.is_terminated()} leapgen {lm.is_terminated()}")
        return diffs
