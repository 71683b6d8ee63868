"""Every row of the differences table in :mod:`leapgen.xgrammar`'s docstring, shown
against the installed xgrammar: each test asserts what xgrammar does and what
leapgen.xgrammar does instead, so a row that stops being true (either side
changes) fails here. Test names are ``test_<row>``."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from xgr_pair import allowed, mask_of

X = pytest.importorskip("xgrammar", reason="xgrammar (the oracle) is not installed")
import leapgen.xgrammar as L  # noqa: E402

VOCAB = ["</s>", "a", "b", "1", "{", "}", '"', ":", ",", " ", "[", "]", "}]", "x", "m"]


def _compile(mod, kind: str, source, vocab=VOCAB, **kw):
    c = mod.GrammarCompiler(mod.TokenizerInfo(vocab), max_threads=1)
    if kind == "schema":
        return c.compile_json_schema(source, **kw)
    if kind == "regex":
        return c.compile_regex(source)
    return c.compile_grammar(source)


def _accepts(mod, kind: str, source, text, **kw) -> bool:
    m = mod.GrammarMatcher(_compile(mod, kind, source, **kw))
    return m.accept_string(text) and m.is_completed()


def _both(kind, source, text, **kw) -> tuple[bool, bool]:
    return _accepts(X, kind, source, text, **kw), _accepts(L, kind, source, text, **kw)


def _refused(mod, call) -> bool:
    try:
        call(mod)
    except RuntimeError:
        return True
    return False


def test_table_lists_every_row_tested_here():
    rows = re.findall(r"^([a-z][a-z-]+) {2,}", L.__doc__.split("Differences from xgrammar")[1], re.MULTILINE)
    rows = [r for r in rows if r != "row"]
    tested = {name[5:].replace("_", "-") for name in globals() if name.startswith("test_") and name != "test_table_lists_every_row_tested_here"}
    assert set(rows) == tested


def test_special():
    from xgr_pair import pair

    p = pair("qwen")
    im_start = 151644  # <|im_start|>
    assert im_start in p.l_info.special_token_ids
    xcg, lcg = p.compile("regex", r"[<|a-z_>]+")
    x, l_ = X.GrammarMatcher(xcg), L.GrammarMatcher(lcg)
    assert im_start in mask_of(X, x, p.vocab_size) and x.accept_token(im_start)
    assert im_start not in mask_of(L, l_, p.vocab_size) and not l_.accept_token(im_start)


def test_pattern():
    assert _both("schema", {"type": "string", "pattern": "b"}, '"abc"') == (False, True)
    assert _both("schema", {"type": "string", "pattern": "^b$"}, '"abc"') == (False, False)


def test_escapes():
    schema = {"type": "string", "maxLength": 3}
    assert _both("schema", schema, '"\x01"') == (True, False)
    assert _both("schema", schema, '"\\n"') == (False, True)


def test_unicode_escapes():
    assert _both("schema", {"type": "string"}, '"\\ud800"') == (True, False)
    assert _both("schema", {"type": "string"}, '"\\ud83d\\ude00"') == (True, True)


def test_numbers():
    assert _both("schema", {"type": "integer"}, "-0") == (False, True)
    assert _both("schema", {"type": "number", "minimum": 0}, "1e2") == (False, True)


def test_ignored_keywords():
    assert _both("schema", {"not": {"type": "string"}}, '"a"') == (True, False)
    assert not _refused(X, lambda m: m.Grammar.from_json_schema({"type": "string", "format": "nope"}))
    assert _refused(L, lambda m: m.Grammar.from_json_schema({"type": "string", "format": "nope"}))


@pytest.mark.parametrize("schema", [{"anyOf": []}, {"allOf": [{"type": "string"}, {"type": "integer"}]}])
def test_unsatisfiable(schema):
    assert not _refused(X, lambda m: m.Grammar.from_json_schema(schema))
    assert _refused(L, lambda m: m.Grammar.from_json_schema(schema))


def test_left_recursion():
    grammar = 'root ::= root "a" | "b"'
    assert _accepts(X, "ebnf", grammar, "baa")
    with pytest.raises(RuntimeError, match="left-recursive"):
        _compile(L, "ebnf", grammar)


def test_lookahead():
    assert _refused(X, lambda m: m.Grammar.from_regex("a(?=b)[a-z]"))
    assert _accepts(L, "regex", "a(?=b)[a-z]", "ab") and not _accepts(L, "regex", "a(?=b)[a-z]", "aa")
    assert not _refused(X, lambda m: m.Grammar.from_ebnf('root ::= [a-z]+ (= "1")'))
    with pytest.raises(RuntimeError, match="lookahead"):
        L.Grammar.from_ebnf('root ::= [a-z]+ (= "1")')


@pytest.mark.parametrize("regex, text", [("a{,3}", "a{,3}"), ("[]", None), ("a{10001}", None), ("$a", None)])
def test_regex_dialect(regex, text):
    if regex in ("a{,3}", "[]"):
        assert _refused(X, lambda m: m.Grammar.from_regex(regex))
        if text is not None:
            assert _accepts(L, "regex", regex, text)
        else:
            with pytest.raises(RuntimeError, match="matches no string"):
                _compile(L, "regex", regex)
    else:
        assert not _refused(X, lambda m: m.Grammar.from_regex(regex))
        assert _refused(L, lambda m: m.Grammar.from_regex(regex))


@pytest.mark.parametrize("grammar, text", [('root ::= "a" | ', ""), ("root ::= 'a'", "a"), ('root ::= "a"{,3}', "aa"),
                                           ('root ::= "a"++', "aa"), ('root ::= TagDispatch(("a", root))', None)])
def test_ebnf_dialect(grammar, text):
    if text is None:
        assert not _refused(X, lambda m: m.Grammar.from_ebnf(grammar))
        with pytest.raises(RuntimeError, match="TagDispatch"):
            L.Grammar.from_ebnf(grammar)
    else:
        assert _refused(X, lambda m: m.Grammar.from_ebnf(grammar))
        assert _accepts(L, "ebnf", grammar, text)


def test_self():
    masks = {}
    for mod in (X, L):
        m = mod.GrammarMatcher(mod.GrammarCompiler(mod.TokenizerInfo(VOCAB), max_threads=1).compile_builtin_json_grammar())
        assert m.accept_string('[{"m":"x"')
        masks[mod] = [VOCAB[i] for i in mask_of(mod, m, len(VOCAB))]
        assert m.fork().accept_token(VOCAB.index("}]"))  # both matchers accept "}]" here
    assert "}]" not in masks[X] and "}]" in masks[L]


def test_loose():
    vocab = ["</s>", "A", ".", " ", " B", b" \xe0", b" \xf0"]
    masks = {}
    for mod in (X, L):
        m = mod.GrammarMatcher(_compile(mod, "regex", r"(?:[A-Z]\. )?[A-Z]", vocab=vocab))
        assert m.accept_string("A.")
        masks[mod] = mask_of(mod, m, len(vocab))
        assert not m.fork().accept_token(5) and not m.fork().accept_token(6)  # neither matcher accepts them
    assert 5 in masks[X] and 6 in masks[X] and 5 not in masks[L] and 6 not in masks[L]
    assert masks[L] == [3, 4]


def test_padding():
    words = {}
    for mod in (X, L):
        m = mod.GrammarMatcher(_compile(mod, "ebnf", "root ::= [ab]*", vocab=["</s>", "a", "b"]))
        bitmask = mod.allocate_token_bitmask(1, 3)
        bitmask.zero_()
        assert not m.fill_next_token_bitmask(bitmask)  # every token allowed: need_apply is False
        words[mod] = int(bitmask[0, 0]) & 0xFFFFFFFF
    assert words[X] == 0xFFFFFFFF and words[L] == 0b111


def test_draft_tree():
    import torch

    rows = {}
    for mod in (X, L):
        m = mod.GrammarMatcher(_compile(mod, "ebnf", 'root ::= "a" "a"*', vocab=["</s>", "a", "b"]))
        bitmask = mod.allocate_token_bitmask(4, 3)
        # the root -> "b" (rejected) -> "a" (below it); the root -> "a"
        assert m.traverse_draft_tree(torch.tensor([1, 2, -1, -1]), torch.tensor([-1, 3, -1, -1]),
                                     torch.tensor([0, 2, 1, 1]), bitmask)
        rows[mod] = [allowed(bitmask, 3, i).tolist() for i in range(4)]
    assert rows[X] == [[1], [], [0, 1, 2], [0, 1]]  # node 2 keeps the allocated all-true row
    assert rows[L] == [[1], [], [], [0, 1]]


def test_lark():
    ignore = 'start: NAME "=" NUMBER\nNAME: /[a-z]+/\nNUMBER: /[0-9]+/\n%ignore " "'
    verdicts = {}
    for mod in (X, L):
        compiled = mod.GrammarCompiler(mod.TokenizerInfo(VOCAB), max_threads=1).compile_lark(ignore)
        verdicts[mod] = []
        for text in ("x = 1", " x=1 "):
            m = mod.GrammarMatcher(compiled)
            verdicts[mod].append(m.accept_string(text) and m.is_completed())
    assert verdicts == {X: [True, False], L: [True, True]}
    for extension in ('start: %json {"type": "integer"}', 'start: value\nvalue[temperature=0.7]: /[a-z]+/'):
        assert not _refused(X, lambda m: m.Grammar.from_lark(extension))
        with pytest.raises(RuntimeError, match="line"):
            L.Grammar.from_lark(extension)
    with pytest.raises(RuntimeError, match="named grammars"):
        L.Grammar.from_lark('start: @inner', named_grammars={"inner": 'start: "x"'})
    with pytest.raises(RuntimeError, match="named grammars"):
        L.GrammarCompiler(L.TokenizerInfo(VOCAB), max_threads=1).compile_lark('start: @inner',
                                                                            named_grammars={"inner": 'start: "x"'})


def test_any_order():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    assert _accepts(X, "schema", schema, '{"b": 1, "a": 1}', any_order=True)
    with pytest.raises(RuntimeError, match="any_order"):
        _compile(L, "schema", schema, any_order=True)


TAG = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<f>"], "tags": [
    {"type": "tag", "begin": "<f>", "content": {"type": "json_schema", "json_schema": {"type": "integer"}},
     "end": "</f>"}]}}


def _tag_accepts(mod, tag, text) -> bool:
    m = mod.GrammarMatcher(mod.GrammarCompiler(mod.TokenizerInfo(VOCAB), max_threads=1).compile_structural_tag(tag))
    return m.accept_string(text) and m.is_completed()


def test_structural_tag():
    for text, ok in [("ab<f>1</f>x", True), ("<f>12</f>", True), ("<f>x</f>", False), ("no tags", True)]:
        assert _tag_accepts(X, TAG, text) is ok and _tag_accepts(L, TAG, text) is ok, text
    items = [L.StructuralTagItem(begin="<f>", schema={"type": "integer"}, end="</f>")]
    m = L.GrammarMatcher(L.GrammarCompiler(L.TokenizerInfo(VOCAB)).compile_structural_tag(items, ["<f>"]))
    assert m.accept_string("a<f>1</f>")  # the deprecated (tags, triggers) form
    odd = {"type": "structural_tag", "format": {"type": "const_string", "value": "a", "colour": "red"}}
    assert _tag_accepts(X, odd, "a")  # a field const_string does not have: ignored
    with pytest.raises(L.InvalidStructuralTagError, match="colour"):
        _tag_accepts(L, odd, "a")
    legacy = L.StructuralTag.from_legacy_structural_tag(items, ["<f>"])
    legacy.format.at_least_one = True  # what SGLang sets on it
    assert legacy.model_dump()["format"]["at_least_one"] is True
    assert _tag_accepts(L, legacy, "<f>1</f>") and not _tag_accepts(L, legacy, "a<f>1</f>")


def test_tag_free_text():
    vocab = ["</s>", "a", "<f>", "</f>", "1", b"\xa1"]
    masks = {}
    for mod in (X, L):
        tag_m = mod.GrammarMatcher(mod.GrammarCompiler(mod.TokenizerInfo(vocab), max_threads=1).compile_structural_tag(TAG))
        masks[mod] = mask_of(mod, tag_m, len(vocab))
    assert 5 in masks[X] and 5 not in masks[L]  # a lone continuation byte


def test_tag_json_space():
    tag = json.loads(json.dumps(TAG))
    tag["format"]["tags"][0]["content"]["json_schema"] = {"type": "object", "properties": {"a": {"type": "integer"}}}
    text = '<f>{"a":' + " " * 25 + "1}</f>"
    assert _tag_accepts(X, tag, text) and not _tag_accepts(L, tag, text)
    assert _tag_accepts(L, tag, '<f>{"a":' + " " * 20 + "1}</f>")


def test_rule_options():
    for grammar in ('root ::= item ("," item)*\nitem[capture] ::= [0-9]+', 'root ::= n\nn[lazy] ::= [a-z]+'):
        assert not _refused(X, lambda m: m.Grammar.from_ebnf(grammar))
        with pytest.raises(RuntimeError, match="not supported"):
            L.Grammar.from_ebnf(grammar)
    m = L.GrammarMatcher(_compile(L, "ebnf", "root ::= [a-b]+"))
    assert m.accept_string("ab") and m.get_captures() == []
    zero = 'root ::= r "}"\nr[max_tokens=0] ::= [ab]*'
    assert _accepts(X, "ebnf", zero, "abab}")  # 0: no budget at all
    with pytest.raises(RuntimeError, match="max_tokens"):
        L.Grammar.from_ebnf(zero)


def test_zero_budget():
    grammar = 'root ::= "x" r "}"\nr[max_chars=0] ::= [ab]*'
    jumps = {mod: mod.GrammarMatcher(_compile(mod, "ebnf", grammar)).find_jump_forward_string() for mod in (X, L)}
    assert jumps == {X: "x", L: "x}"}


def test_bad_ids():
    assert not _refused(X, lambda m: m.TokenizerInfo(["a", "b"], stop_token_ids=[7]))
    assert _refused(L, lambda m: m.TokenizerInfo(["a", "b"], stop_token_ids=[7]))
    for mod in (X, L):
        m = mod.GrammarMatcher(_compile(mod, "regex", "ab"))
        m.accept_string("a")
        if mod is X:
            m.rollback(-1)
            assert m.accept_string("b")
        else:
            with pytest.raises(RuntimeError):
                m.rollback(-1)


def test_str():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "integer"},
              "required": ["a"]}
    text = {mod: str(mod.Grammar.from_json_schema(schema)) for mod in (X, L)}
    assert text[X] != text[L] and " - " in text[L]
    assert not _refused(X, lambda m: m.Grammar.from_ebnf(text[X]))
    assert _refused(L, lambda m: m.Grammar.from_ebnf(text[L]))  # the '-' of "keys other than a"


def test_tokenizers():
    class NotFast:  # neither tokenizer.json nor a fast tokenizer: what a slow tokenizer looks like to leapgen
        eos_token_id = 0

        def get_vocab(self):
            return {"a": 0, "b": 1}

    with pytest.raises(RuntimeError, match="fast tokenizer"):
        L.TokenizerInfo.from_huggingface(NotFast())
    with pytest.raises(ValueError):  # xgrammar reads tiktoken / SentencePiece objects it recognizes, not this one
        X.TokenizerInfo.from_huggingface(NotFast())


def test_bitmask_device():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (a CUDA bitmask)")
    for mod in (X, L):
        m = mod.GrammarMatcher(_compile(mod, "regex", "ab"))
        bitmask = mod.allocate_token_bitmask(1, len(VOCAB)).cuda()
        if mod is X:
            with pytest.raises(RuntimeError):
                m.fill_next_token_bitmask(bitmask)
        else:
            m.fill_next_token_bitmask(bitmask)
            assert allowed(bitmask.cpu(), len(VOCAB)).tolist() == [1]


def test_missing():
    assert hasattr(X, "testing") and not hasattr(L, "testing")
    with pytest.raises(ImportError):
        import leapgen.xgrammar.kernels  # noqa: F401
    assert hasattr(X, "get_builtin_structural_tag") and not hasattr(L, "get_builtin_structural_tag")

