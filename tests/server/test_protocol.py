"""The request policy without a server or a model: the pydantic models'
strictness, the no-op defaults, and the one mapping of a constraint to the
engine's grammar (``leapgen.server.constraints.grammar_params``)."""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic")

from pydantic import ValidationError  # noqa: E402

from leapgen.server.constraints import Constraint, JsonLayout, RequestRefused, grammar_params  # noqa: E402
from leapgen.server.protocol import CompletionRequest  # noqa: E402
from leapgen.server.protocol_chat import ChatCompletionRequest  # noqa: E402
from leapgen.server.protocol_sglang import GenerateRequest  # noqa: E402

MESSAGES = [{"role": "user", "content": "hi"}]


def _params(**body):
    return ChatCompletionRequest.model_validate({"messages": MESSAGES, **body}).to_sampling_params(16)


def test_each_spelling_of_a_constraint_maps_to_the_same_grammar():
    schema = {"type": "object"}
    spellings = [{"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}},
                 {"structured_outputs": {"json": schema}}, {"guided_json": schema}, {"json_schema": schema}]
    got = {_params(**s)[0].json_schema == schema for s in spellings}
    assert got == {True}
    assert _params(guided_choice=["a", "b"])[0].choice == ("a", "b")
    assert _params(structured_outputs={"grammar": 'root ::= "a"'})[0].ebnf == 'root ::= "a"'
    assert _params(guided_grammar='start: "a"')[0].lark == 'start: "a"'  # no "::=": Lark (vLLM's rule)
    assert _params(response_format={"type": "json_object"})[0].json_object is True
    params, field = _params(structured_outputs={"json_object": True})
    assert params.json_object and field == "structured_outputs.json_object"


def test_json_layout_options():
    compact, _ = _params(structured_outputs={"json": {}, "disable_any_whitespace": True})
    assert compact.json_separators == (",", ":")
    ws, _ = _params(guided_json={}, guided_whitespace_pattern="[ ]?")
    assert ws.json_whitespace_pattern == "[ ]?"
    loose, _ = _params(response_format={"type": "json_schema", "json_schema": {"schema": {}, "strict": False}})
    assert loose.json_strict is False
    with pytest.raises(RequestRefused, match="applies to a JSON constraint"):
        _params(structured_outputs={"regex": "a", "whitespace_pattern": " "})
    with pytest.raises(RequestRefused, match="not both"):
        grammar_params(Constraint("json_schema", {}, "x"), JsonLayout(True, " ", None, ("a",)))


@pytest.mark.parametrize("body, param", [
    ({"guided_regex": "a", "regex": "b"}, "guided_regex"),
    ({"structured_outputs": {"structural_tag": 5}}, "structured_outputs.structural_tag"),
    ({"response_format": {"type": "structural_tag"}}, "response_format.format"),
    ({"response_format": {"type": "json_object", "format": {}}}, "response_format.type"),
    ({"guided_choice": []}, "guided_choice"),
    ({"presence_penalty": 0.1}, "presence_penalty"),
    ({"top_logprobs": 2}, "top_logprobs"),
])
def test_refusals_name_the_field(body, param):
    request = ChatCompletionRequest.model_validate({"messages": MESSAGES, **body})
    with pytest.raises(RequestRefused) as err:
        request.to_sampling_params(16, logprobs=request.num_logprobs())
    assert err.value.param == param, err.value


@pytest.mark.parametrize("body, reasoning, param", [
    ({"tools": [{"type": "function", "function": {"name": "f"}}], "regex": "a"}, False, "regex"),
    ({"max_reasoning_tokens": 8}, False, "max_reasoning_tokens"),
    ({"thinking_token_budget": 8}, False, "thinking_token_budget"),
    ({"max_reasoning_tokens": 8, "thinking_token_budget": 8}, True, "thinking_token_budget"),
    ({"chat_template_kwargs": {"enable_thinking": False, "add_generation_prompt": False}}, True,
     "chat_template_kwargs.add_generation_prompt"),
])
def test_chat_options_refusals_name_the_field(body, reasoning, param):
    request = ChatCompletionRequest.model_validate({"messages": MESSAGES, **body})
    _, field = request.to_sampling_params(16)
    with pytest.raises(RequestRefused) as err:
        request.chat_options(field, reasoning=reasoning)
    assert err.value.param == param, err.value


def test_chat_options_pass_the_tool_fields_on():
    tools = [{"type": "function", "function": {"name": "f"}}]
    request = ChatCompletionRequest.model_validate({"messages": MESSAGES, "tools": tools, "tool_choice": "none",
                                                    "regex": "a", "parallel_tool_calls": False,
                                                    "thinking_token_budget": 4})
    _, field = request.to_sampling_params(16)
    assert request.chat_options(field, reasoning=True) == {
        "tools": tools, "tool_choice": "none", "parallel_tool_calls": False, "chat_template_kwargs": None,
        "max_reasoning_tokens": 4}  # tool_choice none: the tools do not call, the regex applies


@pytest.mark.parametrize("body", [{"max_tokens": True}, {"stream": "yes"}, {"n": 1.0}, {"seed": "1"},
                                  {"unknown": 1}, {"messages": [{"role": "user", "content": "x", "extra": 1}]}])
def test_types_are_strict_and_unknown_fields_refused(body):
    with pytest.raises(ValidationError):
        ChatCompletionRequest.model_validate({"messages": MESSAGES, **body})


def test_no_op_defaults_are_accepted():
    params, field = _params(presence_penalty=0, frequency_penalty=0.0, logit_bias={}, tools=[], tool_choice="none",
                            store=False, service_tier="auto", modalities=["text"], user="u", metadata={"k": "v"})
    assert field is None and not params.constrained


def test_completions_prompts_and_sglang_batches():
    assert CompletionRequest.model_validate({"prompt": [[1, 2], [3]]}).prompts() == [[1, 2], [3]]
    with pytest.raises(RequestRefused, match="echo"):
        CompletionRequest.model_validate({"prompt": "x", "echo": True, "logprobs": 1}).prompts()
    batch = GenerateRequest.model_validate({"text": ["a", "b"], "rid": "r",
                                            "sampling_params": {"n": 2, "regex": "[0-9]"}})
    assert batch.prompts() == ["a", "b"] and batch.is_batch and batch.rids(2) == ["r_0", "r_1"]
    (p0, f0), (p1, _) = batch.params_per_prompt(2)
    assert p0.n == 2 and p0.regex == "[0-9]" and f0 == "sampling_params.regex"
    with pytest.raises(RequestRefused, match="exactly one"):
        GenerateRequest.model_validate({"text": "a", "input_ids": [1]}).prompts()
    with pytest.raises(RequestRefused) as err:
        GenerateRequest.model_validate({"text": "a", "sampling_params": {"ignore_eos": True}}).params_per_prompt(1)
    assert err.value.param == "sampling_params.ignore_eos"


def _responses(**body):
    from leapgen.server.protocol_responses import ResponsesRequest

    return ResponsesRequest.model_validate({"input": "hi", **body})


def test_responses_text_format_maps_to_the_chat_grammars():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    params, field = _responses(text={"format": {"type": "json_schema", "name": "a", "schema": schema}}
                               ).to_sampling_params(16)
    assert (params.json_schema, params.json_strict, field) == (schema, True, "text.format.schema")
    loose, _ = _responses(text={"format": {"type": "json_schema", "schema": schema, "strict": False}}
                          ).to_sampling_params(16)
    assert loose.json_strict is False
    params, field = _responses(text={"format": {"type": "json_object"}}).to_sampling_params(16)
    assert params.json_object and field == "text.format"
    params, field = _responses(text={"format": {"type": "text"}}).to_sampling_params(16)
    assert not params.constrained and field is None
    # The Responses defaults are OpenAI's: temperature 1, top_p 1, the server's max tokens.
    assert (params.temperature, params.top_p, params.max_tokens) == (1.0, 1.0, 16)
    for fmt, param in (({"type": "json_schema"}, "text.format.schema"),
                       ({"type": "text", "strict": True}, "text.format.strict"),
                       ({"type": "json_object", "name": "x"}, "text.format.name")):
        with pytest.raises(RequestRefused) as err:
            _responses(text={"format": fmt}).to_sampling_params(16)
        assert err.value.param == param


def test_responses_input_becomes_chat_messages():
    items = [{"role": "developer", "content": [{"type": "input_text", "text": "a"},
                                               {"type": "input_text", "text": "b"}]},
             {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
              "content": [{"type": "output_text", "text": "c", "annotations": []}]}]
    assert _responses(input=items, instructions="sys").messages() == [
        {"role": "system", "content": "sys"}, {"role": "developer", "content": "ab"},
        {"role": "assistant", "content": "c"}]
    assert _responses().messages() == [{"role": "user", "content": "hi"}]
    for value, param in (([], "input"), ([{"type": "reasoning", "summary": []}], "input[0]"),
                         ([{"role": "user"}], "input[0].content"),
                         ([{"role": "user", "content": [{"type": "input_text", "text": "x", "cache": 1}]}],
                          "input[0].content[0].cache")):
        with pytest.raises(RequestRefused) as err:
            _responses(input=value).messages()
        assert err.value.param == param, value


def test_responses_logprobs_need_their_include():
    assert _responses().num_logprobs() is None
    assert _responses(include=["message.output_text.logprobs"], top_logprobs=3).num_logprobs() == 3
    for body, param in (({"top_logprobs": 2}, "top_logprobs"), ({"include": ["reasoning.encrypted_content"]},
                                                                  "include[0]")):
        with pytest.raises(RequestRefused) as err:
            _responses(**body).num_logprobs()
        assert err.value.param == param
    with pytest.raises(ValidationError):
        _responses(top_logprobs=21)
