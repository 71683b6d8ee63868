"""Tool calls and reasoning as structural tags (:mod:`leapgen.engine.chat`), on token sequences.

A 135M model rarely writes a trigger by itself, so ``tool_choice: "auto"`` is shown on what the
Qwen3 tokenizer (whose chat template renders tools and reads ``enable_thinking``; ``<tool_call>``
and ``<think>`` are added tokens) makes of outputs a model would write: each token is checked
against the plan's mask, then accepted; the text goes through the plan's parser and, piece by
piece, through its stream. The reasoning split is shown the same way (masks free inside the think
block, the schema's after it), and the thinking budget on the real engine (the embedded SmolLM2
with the ``deepseek_r1`` parser: it never closes a think block, so the engine must).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from leapgen import GrammarCompiler, GrammarMatcher, allocate_token_bitmask
from leapgen.engine.chat.output_parser import ChatStream
from leapgen.engine.chat.plan import ChatSettings, chat_output
from leapgen.engine.chat.tool_formats import HERMES, TOOL_CALL_FORMATS
from leapgen.engine.chat.tools import ToolsError
from leapgen.engine.sampling_params import SamplingParams

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}},
                                       "required": ["tz"], "additionalProperties": False}}}
ASK = [{"role": "user", "content": "Weather in Paris, and the time in Tokyo?"}]
PARIS = HERMES.call_text("get_weather", '{"city": "Paris"}')
TOKYO = HERMES.call_text("get_time", '{"tz": "Asia/Tokyo"}')
ANSWER = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"],
          "additionalProperties": False}


@pytest.fixture(scope="module")
def qwen():
    from vocab_loaders import load_hf_tokenizer, load_tokenizer_info

    hf, info = load_hf_tokenizer("qwen"), load_tokenizer_info("qwen")
    return hf, info, GrammarCompiler(info)


def _matcher(compiler: GrammarCompiler, params: SamplingParams) -> GrammarMatcher:
    return GrammarMatcher(compiler.compile_structural_tag(params.structural_tag, any_whitespace=params.json_any_whitespace,
                                                          separators=params.json_separators,
                                                          strict_mode=params.json_strict))


def _allowed(m: GrammarMatcher, vocab_size: int) -> np.ndarray:
    bm = allocate_token_bitmask(1, vocab_size)
    m.fill_next_token_bitmask(bm)
    return np.unpackbits(bm.numpy().view(np.uint8), bitorder="little")[:vocab_size].astype(bool)


def _feed(m: GrammarMatcher, tokens: list[int], vocab_size: int) -> None:
    for k, t in enumerate(tokens):
        assert _allowed(m, vocab_size)[t], f"token {k} ({t}) masked"
        assert m.accept_token(t), f"token {k} ({t}) refused"


def _streamed(parser, pieces: list[str]) -> dict:
    """The message a client rebuilds from the stream's deltas (OpenAI's accumulation rules)."""
    stream, message = ChatStream(parser), {"content": "", "reasoning_content": "", "tool_calls": []}
    for delta in [stream.feed(p) for p in pieces] + [stream.finish()]:
        message["content"] += delta.get("content", "")
        message["reasoning_content"] += delta.get("reasoning_content", "")
        for call in delta.get("tool_calls", []):
            if call["index"] == len(message["tool_calls"]):
                assert call["id"].startswith("call_") and call["type"] == "function"
                message["tool_calls"].append({"name": call["function"]["name"], "arguments": ""})
            message["tool_calls"][call["index"]]["arguments"] += call["function"]["arguments"]
            message["tool_calls"][call["index"]]["fragments"] = message["tool_calls"][call["index"]].get(
                "fragments", 0) + bool(call["function"]["arguments"])
    return message


def _pieces(hf, tokens: list[int]) -> list[str]:
    return [hf.decode([t], skip_special_tokens=False) for t in tokens]


def _trigger_split(hf) -> list[int]:
    """``<tool_call>`` as four ordinary tokens, not its added token."""
    return [t for piece in ("<", "tool", "_call", ">") for t in hf.encode(piece, add_special_tokens=False)]


AUTO_CASES = {
    "no trigger": ("It is sunny in Paris.", "It is sunny in Paris.", []),
    "one call": (PARIS, None, [("get_weather", '{"city": "Paris"}')]),
    "two calls, text between": ("Let me check.\n" + PARIS + "\nThen Tokyo:\n" + TOKYO, "Let me check.\nThen Tokyo:",
                                [("get_weather", '{"city": "Paris"}'), ("get_time", '{"tz": "Asia/Tokyo"}')]),
    "trigger split": (None, None, [("get_weather", '{"city": "Paris"}')]),
}


@pytest.mark.parametrize("case", list(AUTO_CASES))
def test_auto_on_token_sequences_through_matcher_parser_and_stream(qwen, case):
    hf, info, compiler = qwen
    plan = ChatSettings(hf).plan(ASK, SamplingParams(), tools=[WEATHER, TIME], tool_choice="auto")
    assert plan.parser.tool_format is HERMES  # Qwen's template names <tool_call>
    assert "get_time" in plan.prompt_text and "<tools>" in plan.prompt_text  # rendered by Qwen's template
    text, content, calls = AUTO_CASES[case]
    if text is None:
        tokens = _trigger_split(hf) + hf.encode(PARIS[len("<tool_call>"):], add_special_tokens=False)
        assert hf.convert_tokens_to_ids("<tool_call>") not in tokens
    else:
        tokens = hf.encode(text, add_special_tokens=False)
    m = _matcher(compiler, plan.params)
    _feed(m, tokens + [info.stop_token_ids[0]], info.vocab_size)
    assert m.is_terminated()
    out = chat_output(_Out(hf.decode(tokens, skip_special_tokens=False)), plan.parser)
    assert out.content == content
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in out.tool_calls] == calls
    assert out.finish_reason == ("tool_calls" if calls else "stop")
    streamed = _streamed(plan.parser, _pieces(hf, tokens))
    assert (streamed["content"] or None) == content
    assert [(c["name"], c["arguments"]) for c in streamed["tool_calls"]] == calls
    assert all(c["fragments"] > 2 for c in streamed["tool_calls"])  # the arguments stream as they grow


class _Out:
    """The fields of a RequestOutput that :func:`chat_output` reads."""

    def __init__(self, text: str, finish_reason: str = "stop"):
        self.text, self.finish_reason = text, finish_reason


def test_auto_masks_an_unknown_function_and_the_parser_keeps_bad_calls_as_content(qwen):
    hf, info, compiler = qwen
    plan = ChatSettings(hf).plan(ASK, SamplingParams(), tools=[WEATHER], tool_choice="auto")
    m = _matcher(compiler, plan.params)
    _feed(m, hf.encode('<tool_call>\n{"name": "get_', add_special_tokens=False), info.vocab_size)
    assert not m.fork().accept_string("time")  # only get_weather is a tool
    assert m.find_jump_forward_string().startswith('weather", "arguments": {"city": "')
    for bad in ('<tool_call>\n{"name": "get_stock", "arguments": {}}\n</tool_call>',
                '<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>',
                '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa'):
        out = chat_output(_Out(bad, "length"), plan.parser)
        assert out.tool_calls == [] and out.content == bad.strip() and out.finish_reason == "length"


def test_required_named_and_parallel_false_on_token_sequences(qwen):
    hf, info, compiler = qwen
    settings = ChatSettings(hf)
    two = hf.encode(PARIS + "\n" + TOKYO, add_special_tokens=False)
    stop = info.stop_token_ids[0]
    required = _matcher(compiler, settings.plan(ASK, SamplingParams(), tools=[WEATHER, TIME],
                                                tool_choice="required").params)
    assert not _allowed(required, info.vocab_size)[stop]  # a call must come
    assert not required.fork().accept_string("Hello")  # and no text before it
    _feed(required, two + [stop], info.vocab_size)
    single = _matcher(compiler, settings.plan(ASK, SamplingParams(), tools=[WEATHER, TIME], tool_choice="required",
                                              parallel_tool_calls=False).params)
    _feed(single, hf.encode(PARIS, add_special_tokens=False), info.vocab_size)
    assert not single.fork().accept_string("\n<tool_call>") and _allowed(single, info.vocab_size)[stop]
    named = _matcher(compiler, settings.plan(ASK, SamplingParams(), tools=[WEATHER, TIME], tool_choice={
        "type": "function", "function": {"name": "get_time"}}).params)
    assert named.find_jump_forward_string() == '<tool_call>\n{"name": "get_time", "arguments": {"tz": "'
    assert not named.fork().accept_string("<tool_call>\n{\"name\": \"get_weather\"")


@pytest.mark.parametrize("name", sorted(TOOL_CALL_FORMATS))
@pytest.mark.parametrize("choice", ["required", "auto"])
def test_each_format_s_grammar_takes_what_its_parser_reads(qwen, name, choice):
    hf, info, compiler = qwen
    fmt = TOOL_CALL_FORMATS[name]
    plan = ChatSettings(hf, tool_call_format=name).plan(ASK, SamplingParams(), tools=[WEATHER, TIME],
                                                         tool_choice=choice)
    calls = [("get_weather", '{"city": "Paris"}'), ("get_time", '{"tz": "Asia/Tokyo"}')]
    text = ("Sure. " if choice == "auto" else "") + fmt.calls_text(calls)
    tokens = hf.encode(text, add_special_tokens=False)
    m = _matcher(compiler, plan.params)
    _feed(m, tokens + [info.stop_token_ids[0]], info.vocab_size)
    assert m.is_terminated()
    out = chat_output(_Out(text), plan.parser)
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in out.tool_calls] == calls
    assert out.content == ("Sure." if choice == "auto" else None)
    assert [(c["name"], c["arguments"]) for c in _streamed(plan.parser, _pieces(hf, tokens))["tool_calls"]] == calls


def test_strict_false_takes_any_object_strict_true_the_schema_only(qwen):
    hf, info, compiler = qwen
    extra = HERMES.call_text("get_weather", '{"city": "Paris", "when": [1, 2]}')
    for strict, takes in ((False, True), (True, False), (None, False)):
        tool = {"type": "function", "function": {**WEATHER["function"], "strict": strict}}
        plan = ChatSettings(hf).plan(ASK, SamplingParams(), tools=[tool], tool_choice="required")
        assert _matcher(compiler, plan.params).accept_string(extra) is takes, strict


def test_bad_tools_name_the_field_and_the_pointer(qwen):
    settings = ChatSettings(qwen[0])
    bad = json.loads(json.dumps([WEATHER, TIME]))
    bad[1]["function"]["parameters"]["properties"]["tz"]["minLength"] = -1
    with pytest.raises(ToolsError) as err:
        settings.plan(ASK, SamplingParams(), tools=bad)
    assert err.value.param == "tools[1].function.parameters" and "/properties/tz/minLength" in str(err.value)
    with pytest.raises(ToolsError) as err:
        settings.plan(ASK, SamplingParams(), tools=[WEATHER], tool_choice={"type": "function",
                                                                            "function": {"name": "nope"}})
    assert err.value.param == "tool_choice.function.name"
    with pytest.raises(ValueError, match="not both"):
        settings.plan(ASK, SamplingParams(regex="a"), tools=[WEATHER], tool_choice="required")


def test_reasoning_masks_free_inside_the_think_block_exact_after_it(qwen):
    import jsonschema

    hf, info, compiler = qwen
    settings = ChatSettings(hf, reasoning_parser="qwen3")
    plan = settings.plan(ASK, SamplingParams(json_schema=ANSWER))
    think, end = hf.convert_tokens_to_ids("<think>"), hf.convert_tokens_to_ids("</think>")
    m = _matcher(compiler, plan.params)
    first = _allowed(m, info.vocab_size)
    assert first[think] and first.sum() < 10  # the output opens the block
    assert m.accept_token(think)
    text_ok = _utf8_starts(hf)  # the oracle: every ordinary token that can start UTF-8 text
    for piece in ("\nThe user asks for the weather. {not json} ", "ok"):
        inside = _allowed(m, info.vocab_size)
        assert (inside[:len(text_ok)] == text_ok).all() and inside[end]  # unconstrained text, and it may end
        _feed(m, hf.encode(piece, add_special_tokens=False), info.vocab_size)
    _feed(m, [end] + hf.encode("\n\n", add_special_tokens=False), info.vocab_size)
    after = _allowed(m, info.vocab_size)
    plain = GrammarMatcher(compiler.compile_json_schema(ANSWER, any_whitespace=plan.params.json_any_whitespace,
                                                        separators=plan.params.json_separators))
    assert (after == _allowed(plain, info.vocab_size)).all()  # exactly the schema's mask
    answer = hf.encode('{"answer": 42}', add_special_tokens=False)
    _feed(m, answer + [info.stop_token_ids[0]], info.vocab_size)
    text = hf.decode([think] + hf.encode("\nhmm\n", add_special_tokens=False) + [end], skip_special_tokens=False)
    out = chat_output(_Out(text + "\n\n" + '{"answer": 42}'), plan.parser)
    assert out.reasoning_content == "hmm"
    jsonschema.validate(json.loads(out.content), ANSWER)
    streamed = _streamed(plan.parser, list(text + '\n\n{"answer": 42}'))  # one character at a time
    assert streamed["reasoning_content"] == "hmm" and streamed["content"] == '{"answer": 42}'


def _utf8_starts(hf) -> np.ndarray:
    """Per ordinary (not added) token of a byte-level BPE vocabulary: whether its bytes can start
    UTF-8 text (an incremental decoder takes them), read through GPT-2's byte alphabet."""
    import codecs

    shown = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    byte_of = {chr(b): b for b in shown}  # GPT-2's bytes_to_unicode, inverted
    byte_of.update({chr(256 + k): b for k, b in enumerate(b for b in range(256) if b not in shown)})
    vocab = hf.backend_tokenizer.get_vocab(with_added_tokens=False)
    out = np.zeros(max(vocab.values()) + 1, dtype=bool)
    for token, i in vocab.items():
        try:
            codecs.getincrementaldecoder("utf-8")().decode(bytes(byte_of[c] for c in token), final=False)
            out[i] = True
        except UnicodeDecodeError:
            pass
    return out


def test_enable_thinking_false_closes_the_block_in_the_prompt(qwen):
    hf, info, compiler = qwen
    plan = ChatSettings(hf, reasoning_parser="qwen3").plan(ASK, SamplingParams(json_schema=ANSWER),
                                                           chat_template_kwargs={"enable_thinking": False})
    assert plan.prompt_text.rstrip().endswith("</think>")  # Qwen3's template writes the empty block
    assert plan.params.structural_tag is None and plan.params.json_schema == ANSWER  # the schema, from the start
    assert chat_output(_Out('{"answer": 1}'), plan.parser).reasoning_content is None


@pytest.mark.model
def test_the_thinking_budget_ends_the_block_on_the_real_engine(loaded_model):
    import jsonschema

    from leapgen.engine import LLM

    llm = LLM(loaded=loaded_model, reasoning_parser="deepseek_r1")
    params = SamplingParams(json_schema=ANSWER, temperature=0, max_tokens=40)
    (out,) = llm.chat([{"role": "user", "content": "What is 6 times 7?"}], params, max_reasoning_tokens=5)
    text = out.output.text
    assert "</think>" in text, text  # SmolLM2 never writes it: the engine appended it after 5 tokens
    before = llm.tokenizer.encode(text[:text.index("</think>")], add_special_tokens=False)
    assert len(before) <= 5 and out.reasoning_content, text
    jsonschema.validate(json.loads(out.content), ANSWER)


@pytest.mark.model
def test_llm_chat_calls_a_tool_and_reads_a_conversation_with_its_result(llm):
    import jsonschema

    (out,) = llm.chat(ASK, SamplingParams(temperature=0, max_tokens=80), tools=[WEATHER], tool_choice="required",
                      parallel_tool_calls=False)
    assert out.finish_reason == "tool_calls" and len(out.tool_calls) == 1 and out.content is None
    call = out.tool_calls[0]
    jsonschema.validate(json.loads(call["function"]["arguments"]), WEATHER["function"]["parameters"])
    conversation = ASK + [out.message, {"role": "tool", "tool_call_id": call["id"], "content": '{"sky": "sunny"}'}]
    (answer,) = llm.chat(conversation, SamplingParams(temperature=0, max_tokens=20), tools=[WEATHER])
    assert answer.content and not answer.tool_calls
    prompt = llm.chat_settings.plan(conversation, SamplingParams(), tools=[WEATHER]).prompt_text
    assert "<tool_response>\n{\"sky\": \"sunny\"}\n</tool_response>" in prompt and PARIS.split("{")[0] in prompt
