"""The field matrix: every request field is honoured, accepted at its no-op
default, or refused with a 400 that names it (``docs/server_fields.md``).

The field lists come from the installed ``openai`` SDK's request types (chat
and text completions, responses: ``responses_probes.py``) and from issue 16's lists (vLLM's ``structured_outputs``
and ``guided_*``, SGLang's ``/generate``), not from the table: a field the SDK
gains fails :func:`test_every_field_has_a_row_and_a_probe` until it is placed.
Each field is then sent with a non-default value, through the real ``openai``
client (SDK fields, extras in ``extra_body``) or ``httpx`` (``/generate``):

- *honoured*: a 200 whose output shows the field's effect (``PROBES``' check);
- *informational*: a 200;
- *default only*: a 400 ``not supported: <field>`` with ``param`` = the field,
  and a 200 for each no-op value the table lists;
- *refused*: a 400 ``not supported: <field>`` naming it.

Requests run on a thread pool (the server batches them), a few tokens each.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types import completion_create_params as completion_params
from openai.types.chat import completion_create_params as chat_params
from responses_probes import NESTED, RESPONSES, SDK_RESPONSES, send_responses
from responses_probes import PROBES as RESPONSES_PROBES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "server_fields.md"
CHAT, VLLM, COMPLETIONS, GENERATE = "/v1/chat/completions", "vllm", "/v1/completions", "/generate"
SECTIONS = {"## `POST /v1/chat/completions`": CHAT, "## vLLM's and leapgen's fields": VLLM,
            "## `POST /v1/completions`": COMPLETIONS, "## `POST /v1/responses`": RESPONSES,
            "## `POST /generate`": GENERATE}

SDK_CHAT = set(chat_params.CompletionCreateParamsBase.__annotations__) | {"stream"}
SDK_COMPLETIONS = set(completion_params.CompletionCreateParamsBase.__annotations__) | {"stream"}
ISSUE_VLLM = {"structured_outputs", "guided_json", "guided_regex", "guided_choice", "guided_grammar",
              "guided_whitespace_pattern", "guided_decoding_backend"} | {
    f"structured_outputs.{f}" for f in ("json", "regex", "choice", "grammar", "json_object", "structural_tag",
                                        "whitespace_pattern", "disable_any_whitespace",
                                        "disable_additional_properties")}
ISSUE_GENERATE = {"text", "input_ids", "sampling_params", "stream", "return_logprob", "logprob_start_len"} | {
    f"sampling_params.{f}" for f in ("max_new_tokens", "temperature", "top_p", "top_k", "stop", "n", "json_schema",
                                     "regex", "ebnf", "structural_tag")}

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 99}},
          "required": ["name", "age"], "additionalProperties": False}
ONE_KEY = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["a"]}
TAG = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
    {"type": "const_string", "value": "Answer: "}, {"type": "regex", "pattern": "[0-9]{2}"}]}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"],
    "additionalProperties": False}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"tz": {"type": "string", "maxLength": 20}}, "required": ["tz"],
    "additionalProperties": False}}}
ASK = [{"role": "user", "content": "What is the weather in Paris and in Tokyo right now?"}]


def docs_table() -> dict[str, dict[str, tuple[str, str]]]:
    """endpoint -> field -> (status, notes), read from docs/server_fields.md."""
    out: dict[str, dict[str, tuple[str, str]]] = {}
    current = None
    for line in DOCS.read_text("utf-8").splitlines():
        if line.startswith("## "):
            current = next((v for k, v in SECTIONS.items() if line.startswith(k)), None)
            continue
        row = re.match(r"\| `([^`]+)` \| ([a-z ]+) \|\s*(.*?)\s*\|$", line)
        if current is not None and row:
            out.setdefault(current, {})[row.group(1)] = (row.group(2), row.group(3))
    return out


def default_values(notes: str) -> list:
    """The no-op values a "default only" row lists (backticked JSON, or bare words)."""
    out = []
    for text in re.findall(r"`([^`]+)`", notes.split("(")[0]):
        try:
            out.append(json.loads(text))
        except ValueError:
            out.append(text)
    return out


# ----------------------------------------------------------------------------------- requests


class Client:
    """Sends a field's probe the way a user of that API would."""

    def __init__(self, base: str, client: openai.OpenAI):
        self.base, self.client = base, client

    def chat(self, **body) -> Any:
        body = {"model": "default", "messages": [{"role": "user", "content": "Count from 1 to 9."}],
                "max_tokens": 4, "temperature": 0, **body}
        sdk = {k: v for k, v in body.items() if k in SDK_CHAT}
        extra = {k: v for k, v in body.items() if k not in SDK_CHAT}
        return self.client.chat.completions.create(**sdk, extra_body=extra or None)

    def completion(self, **body) -> Any:
        body = {"model": "default", "prompt": "Count: 1, 2, 3,", "max_tokens": 4, "temperature": 0, **body}
        sdk = {k: v for k, v in body.items() if k in SDK_COMPLETIONS}
        extra = {k: v for k, v in body.items() if k not in SDK_COMPLETIONS}
        return self.client.completions.create(**sdk, extra_body=extra or None)

    def generate(self, **body) -> Any:
        body = {k: v for k, v in body.items() if v is not None}
        if "text" not in body and "input_ids" not in body:
            body["text"] = "Count: 1, 2, 3,"
        sp = {"max_new_tokens": 4, "temperature": 0}
        if isinstance(body.get("sampling_params"), dict):
            body["sampling_params"] = {**sp, **body["sampling_params"]}
        elif "sampling_params" not in body:
            body["sampling_params"] = sp
        r = httpx.post(self.base + GENERATE, json=body, timeout=120)
        if r.status_code != 200:
            raise openai.APIStatusError(r.text, response=r, body=r.json().get("error"))
        if body.get("stream"):
            return [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data: {")]
        return r.json()


def text_of(r: Any) -> str:
    if isinstance(r, dict):
        return r["text"]
    if hasattr(r, "output_text"):
        return r.output_text
    choice = r.choices[0]
    return choice.message.content if hasattr(choice, "message") else choice.text


def usage_of(r: Any) -> dict:
    return r["meta_info"] if isinstance(r, dict) else r.usage.model_dump()


# ----------------------------------------------------------------------------------- probes
# field -> (value, check(c, send, response)); ``send(**more)`` repeats the endpoint's request with the probe.


def _check_n(c, send, r):
    choices = r if isinstance(r, list) else r.choices
    assert len(choices) == 2 and (isinstance(r, list) or [ch.index for ch in choices] == [0, 1])


def _check_seed(c, send, r):
    assert text_of(send()) == text_of(r)  # the same seed, the same sample


def _check_temperature(c, send, r):
    seed = "sampling_seed" if isinstance(r, dict) else "seed"
    assert text_of(send(**{seed: 2})) != text_of(r) or text_of(send(**{seed: 3})) != text_of(r)


def _check_json(schema):
    def check(c, send, r):
        import jsonschema

        text = text_of(r)
        jsonschema.validate(json.loads(text), schema)
    return check


def _check_regex(pattern):
    def check(c, send, r):
        assert re.fullmatch(pattern, text_of(r)), text_of(r)
    return check


def _check_in(options):
    def check(c, send, r):
        assert text_of(r) in options, text_of(r)
    return check


def _check_grammar_both_syntaxes(c, send, r):
    assert text_of(r) in {"yes", "no"}, text_of(r)  # GBNF
    lark = send(structured_outputs={"grammar": 'start: "red" | "blue"'})  # no "::=": Lark, as vLLM reads it
    assert text_of(lark) in {"red", "blue"}, text_of(lark)


def _check_starts_object(c, send, r):
    assert text_of(r).startswith("{"), text_of(r)


def _check_whitespace(c, send, r):
    assert re.fullmatch(r'\{\n"a"\n:\n[0-9]\n\}', text_of(r)), repr(text_of(r))


def _check_compact(c, send, r):
    text = text_of(r)
    assert text == json.dumps(json.loads(text), separators=(",", ":")), text


def _check_no_jump(c, send, r):
    assert usage_of(r)["jump_forward_tokens"] == 0 and usage_of(send(jump_forward=True))["jump_forward_tokens"] > 0


def _check_stop_token(c, send, r):
    assert text_of(r) == "" and usage_of(r)["completion_tokens"] == 0


def _calls(r) -> list[tuple[str, dict]]:
    import jsonschema

    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls, choice
    out = []
    for call in choice.message.tool_calls:
        arguments = json.loads(call.function.arguments)
        jsonschema.validate(arguments, {"get_weather": WEATHER, "get_time": TIME}[call.function.name]["function"][
            "parameters"])
        out.append((call.function.name, arguments))
    return out


def _check_parallel(c, send, r):
    assert len(_calls(r)) == 1 and len(_calls(send(parallel_tool_calls=True))) >= 2  # greedy: two get_weather


def _check_template_kwargs(c, send, r):
    # the embedded template reads no variable: what shows the field is read is the refusal of the server's own
    with pytest.raises(openai.BadRequestError) as err:
        send(chat_template_kwargs={"add_generation_prompt": False})
    assert err.value.body["param"] == "chat_template_kwargs.add_generation_prompt"


CONSTRAINTS = {  # a vLLM / leapgen constraint field -> (value, check)
    "structured_outputs": ({"choice": ["yes", "no"]}, _check_in({"yes", "no"})),
    "structured_outputs.json": ({"json": PERSON}, _check_json(PERSON)),
    "structured_outputs.regex": ({"regex": "[0-9]{3}"}, _check_regex("[0-9]{3}")),
    "structured_outputs.choice": ({"choice": ["red", "green", "blue"]}, _check_in({"red", "green", "blue"})),
    "structured_outputs.grammar": ({"grammar": 'root ::= "yes" | "no"'}, _check_grammar_both_syntaxes),
    "structured_outputs.json_object": ({"json_object": True}, _check_starts_object),
    "structured_outputs.structural_tag": ({"structural_tag": json.dumps(TAG)}, _check_regex("Answer: [0-9]{2}")),
    "structured_outputs.whitespace_pattern": ({"json": ONE_KEY, "whitespace_pattern": "\n"}, _check_whitespace),
    "structured_outputs.disable_any_whitespace": ({"json": PERSON, "disable_any_whitespace": True}, _check_compact),
    "structured_outputs.disable_additional_properties": (
        {"json": ONE_KEY, "disable_additional_properties": True},
        _check_json({**ONE_KEY, "additionalProperties": False})),
    "guided_json": (PERSON, _check_json(PERSON)),
    "guided_regex": ("[0-9]{3}", _check_regex("[0-9]{3}")),
    "guided_choice": (["yes", "no"], _check_in({"yes", "no"})),
    "guided_grammar": ('root ::= "yes" | "no"', _check_in({"yes", "no"})),
    "regex": ("[0-9]{3}", _check_regex("[0-9]{3}")),
    "ebnf": ('root ::= "yes" | "no"', _check_in({"yes", "no"})),
    "json_schema": (PERSON, _check_json(PERSON)),
}


def openai_probes(endpoint: str) -> dict[str, tuple[dict, Any]]:
    """Probes of the OpenAI-shaped endpoints (chat or text completions):
    field -> (the body fields to send, check)."""
    probes: dict[str, tuple[dict, Any]] = {
        "model": ({"model": "gpt-9"}, "404"),
        "max_tokens": ({"max_tokens": 2}, lambda c, send, r: usage_of(r)["completion_tokens"] == 2
                       or pytest.fail("not 2 tokens")),
        "temperature": ({"temperature": 2.0, "seed": 1}, _check_temperature),
        "top_p": ({"top_p": 1e-9, "temperature": 2.0, "seed": 5},
                  lambda c, send, r: text_of(r) == text_of(send(top_p=1.0, temperature=0)) or pytest.fail("top_p")),
        "seed": ({"seed": 7, "temperature": 1.5}, _check_seed),
        "n": ({"n": 2}, _check_n),
        "stop": ({"stop": ", ", "regex": "[a-c], [a-c], [a-c]", "max_tokens": 20}, _check_regex("[a-c]")),
        "stream": ({"stream": True}, "stream"),
        "stream_options": ({"stream": True, "stream_options": {"include_usage": True}}, "usage"),
        "response_format": ({"response_format": {"type": "json_object"}, "max_tokens": 6}, _check_starts_object),
        "user": ({"user": "someone"}, None),
        "top_k": ({"top_k": 1, "temperature": 2.0, "seed": 5},
                  lambda c, send, r: text_of(r) == text_of(send(top_k=-1, temperature=0)) or pytest.fail("top_k")),
        "stop_token_ids": ({"stop_token_ids": "first-token"}, _check_stop_token),
        "jump_forward": ({"jump_forward": False, "json_schema": PERSON, "max_tokens": 40}, _check_no_jump),
        "guided_whitespace_pattern": ({"guided_json": ONE_KEY, "guided_whitespace_pattern": "\n", "max_tokens": 40},
                                      _check_whitespace),
        "guided_decoding_backend": ({"guided_decoding_backend": "auto", "guided_regex": "[0-9]{3}"}, "backend"),
        "structural_tag": ({"structural_tag": TAG, "max_tokens": 10}, _check_regex("Answer: [0-9]{2}")),
    }
    for field, (value, check) in CONSTRAINTS.items():
        body = {"structured_outputs": value} if field.startswith("structured_outputs") else {field: value}
        probes[field] = ({**body, "max_tokens": 6 if check is _check_starts_object else 40}, check)
    plain: dict[str, Any] = {"repetition_penalty": 1.2, "min_p": 0.1, "min_tokens": 2, "ignore_eos": True,
                             "skip_special_tokens": False, "spaces_between_special_tokens": False,
                             "include_stop_str_in_output": True, "frequency_penalty": 0.5, "presence_penalty": 0.5,
                             "logit_bias": {"15": 5}}
    if endpoint == CHAT:
        probes.update({
            "messages": ({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [
                {"type": "text", "text": "Say "}, {"type": "text", "text": "hi"}]}]},
                lambda c, send, r: usage_of(r)["prompt_tokens"] != usage_of(send(messages=[
                    {"role": "user", "content": "Say hi"}]))["prompt_tokens"] or pytest.fail("messages")),
            "max_completion_tokens": ({"max_completion_tokens": 3}, lambda c, send, r: usage_of(r)[
                "completion_tokens"] == 3 or pytest.fail("not 3 tokens")),
            "logprobs": ({"logprobs": True}, lambda c, send, r: len(r.choices[0].logprobs.content)
                         == usage_of(r)["completion_tokens"] or pytest.fail("logprobs")),
            "top_logprobs": ({"logprobs": True, "top_logprobs": 3}, lambda c, send, r: all(
                len(e.top_logprobs) == 3 for e in r.choices[0].logprobs.content) or pytest.fail("top_logprobs")),
            "metadata": ({"metadata": {"k": "v"}}, None), "safety_identifier": ({"safety_identifier": "abc"}, None),
            "prompt_cache_key": ({"prompt_cache_key": "key"}, None),
            "tools": ({"messages": ASK, "tools": [WEATHER, TIME], "tool_choice": "required", "max_tokens": 150},
                      lambda c, send, r: _calls(r)),
            "tool_choice": ({"messages": ASK, "tools": [WEATHER, TIME], "max_tokens": 60, "tool_choice": {
                "type": "function", "function": {"name": "get_time"}}},
                lambda c, send, r: [n for n, _ in _calls(r)] == ["get_time"] or pytest.fail("tool_choice")),
            "parallel_tool_calls": ({"messages": ASK, "tools": [WEATHER], "tool_choice": "required",
                                     "parallel_tool_calls": False, "max_tokens": 150}, _check_parallel),
            "chat_template_kwargs": ({"chat_template_kwargs": {"enable_thinking": False}}, _check_template_kwargs),
            "max_reasoning_tokens": ({"max_reasoning_tokens": 8}, "no reasoning parser"),
            "thinking_token_budget": ({"thinking_token_budget": 8}, "no reasoning parser"),
        })
        plain.update({
            "modalities": ["text", "audio"], "service_tier": "flex", "store": True,
            "prompt_cache_retention": "24h", "prompt_cache_options": {"mode": "explicit"}, "verbosity": "low",
            "functions": [{"name": "f", "parameters": {}}], "function_call": "auto",
            "audio": {"voice": "alloy", "format": "wav"}, "prediction": {"type": "content", "content": "x"},
            "reasoning_effort": "low", "web_search_options": {}, "moderation": {"model": "omni-moderation-latest"},
        })
    else:
        probes.update({
            "prompt": ({"prompt": ["Count: 1, 2,", "Count: 5, 6,"]}, lambda c, send, r: len(r.choices) == 2
                       and r.choices[0].text != r.choices[1].text or pytest.fail("prompt batch")),
            "echo": ({"echo": True}, lambda c, send, r: r.choices[0].text.startswith("Count: 1, 2, 3,")
                     or pytest.fail("echo")),
            "logprobs": ({"logprobs": 2}, lambda c, send, r: len(r.choices[0].logprobs.tokens) == usage_of(r)[
                "completion_tokens"] and all(len(t) >= 2 for t in r.choices[0].logprobs.top_logprobs)
                or pytest.fail("logprobs")),
        })
        plain.update({"best_of": 2, "suffix": "!"})
    probes.update({field: ({field: value}, None) for field, value in plain.items()})
    return probes


def _sgl(value: Any) -> dict:
    return {"sampling_params": value}


GENERATE_PROBES: dict[str, tuple[dict, Any]] = {
    "text": ({"text": ["Count: 1, 2,", "Count: 5, 6,"]}, lambda c, send, r: isinstance(r, list) and len(r) == 2
             or pytest.fail("batch")),
    "input_ids": ({"text": None, "input_ids": [1, 2, 3]}, lambda c, send, r: r["meta_info"]["prompt_tokens"] == 3
                  or pytest.fail("ids")),
    "sampling_params": (_sgl({"max_new_tokens": 2}), lambda c, send, r: r["meta_info"]["completion_tokens"] == 2
                        or pytest.fail("sampling_params")),
    "stream": ({"stream": True}, "generate-stream"),
    "return_logprob": ({"return_logprob": True}, lambda c, send, r: len(r["meta_info"]["output_token_logprobs"])
                       == r["meta_info"]["completion_tokens"] or pytest.fail("return_logprob")),
    "top_logprobs_num": ({"return_logprob": True, "top_logprobs_num": 2}, lambda c, send, r: all(
        len(t) == 2 for t in r["meta_info"]["output_top_logprobs"]) or pytest.fail("top_logprobs_num")),
    "return_text_in_logprobs": ({"return_logprob": True, "return_text_in_logprobs": True}, lambda c, send, r: all(
        isinstance(t[2], str) for t in r["meta_info"]["output_token_logprobs"]) or pytest.fail("text")),
    "logprob_start_len": ({"return_logprob": True, "logprob_start_len": 1}, lambda c, send, r: (
        len(r["meta_info"]["input_token_logprobs"]) == r["meta_info"]["prompt_tokens"] - 1
        and r["meta_info"]["input_token_logprobs"][0][0] is None
        and all(t[0] < 0 for t in r["meta_info"]["input_token_logprobs"][1:])) or pytest.fail("prompt logprobs")),
    "rid": ({"rid": "req-1"}, lambda c, send, r: r["meta_info"]["id"] == "req-1" or pytest.fail("rid")),
    "sampling_params.max_new_tokens": (_sgl({"max_new_tokens": 2}), lambda c, send, r: r["meta_info"][
        "completion_tokens"] == 2 or pytest.fail("2")),
    "sampling_params.temperature": (_sgl({"temperature": 2.0, "sampling_seed": 1}), _check_temperature),
    "sampling_params.top_p": (_sgl({"top_p": 1e-9, "temperature": 2.0, "sampling_seed": 5}), lambda c, send, r:
                              text_of(r) == text_of(send(top_p=1.0, temperature=0)) or pytest.fail("top_p")),
    "sampling_params.top_k": (_sgl({"top_k": 1, "temperature": 2.0, "sampling_seed": 5}), lambda c, send, r:
                              text_of(r) == text_of(send(top_k=-1, temperature=0)) or pytest.fail("top_k")),
    "sampling_params.stop": (_sgl({"stop": ", ", "regex": "[a-c], [a-c], [a-c]", "max_new_tokens": 20}),
                             _check_regex("[a-c]")),
    "sampling_params.stop_token_ids": (_sgl({"stop_token_ids": "first-token"}), _check_stop_token),
    "sampling_params.n": (_sgl({"n": 2}), _check_n),
    "sampling_params.sampling_seed": (_sgl({"sampling_seed": 7, "temperature": 1.5}), _check_seed),
    "sampling_params.json_schema": (_sgl({"json_schema": json.dumps(PERSON), "max_new_tokens": 40}),
                                    _check_json(PERSON)),
    "sampling_params.regex": (_sgl({"regex": "[0-9]{3}", "max_new_tokens": 10}), _check_regex("[0-9]{3}")),
    "sampling_params.ebnf": (_sgl({"ebnf": 'root ::= "yes" | "no"', "max_new_tokens": 10}),
                             _check_in({"yes", "no"})),
    "sampling_params.jump_forward": (_sgl({"jump_forward": False, "json_schema": PERSON, "max_new_tokens": 40}),
                                     _check_no_jump),
    "sampling_params.structural_tag": (_sgl({"structural_tag": json.dumps(TAG), "max_new_tokens": 10}),
                                       _check_regex("Answer: [0-9]{2}")),
}
GENERATE_PROBES.update({field: ({field: value}, None) for field, value in {
    "return_hidden_states": True, "log_metrics": False, "token_ids_logprob": [1],
    "input_embeds": [[0.0]], "image_data": "x.png", "video_data": "x.mp4", "audio_data": "x.wav", "lora_path": "x",
    "session_params": {"id": "s"}, "custom_logit_processor": "x"}.items()})
GENERATE_PROBES.update({f"sampling_params.{name}": (_sgl({name: value}), None) for name, value in {
    "min_p": 0.1, "frequency_penalty": 0.5,
    "presence_penalty": 0.5, "repetition_penalty": 1.2, "min_new_tokens": 2, "ignore_eos": True,
    "skip_special_tokens": False, "spaces_between_special_tokens": False, "no_stop_trim": True, "stop_regex": ["x+"],
    "logit_bias": {"15": 5.0}, "custom_params": {"x": 1}}.items()})


def probes_of(endpoint: str) -> dict[str, tuple[dict, Any]]:
    if endpoint == RESPONSES:
        return RESPONSES_PROBES
    return GENERATE_PROBES if endpoint == GENERATE else openai_probes(endpoint)


def fields_of(endpoint: str, table: dict) -> set[str]:
    """The fields the SDK and issue 16 name for an endpoint, and the rows of its table."""
    if endpoint == CHAT:
        return SDK_CHAT | ISSUE_VLLM | set(table[CHAT]) | set(table[VLLM])
    if endpoint == COMPLETIONS:
        return SDK_COMPLETIONS | ISSUE_VLLM | set(table[COMPLETIONS]) | set(table[VLLM])
    if endpoint == RESPONSES:
        return SDK_RESPONSES | NESTED | set(table[RESPONSES])
    return ISSUE_GENERATE | set(table[GENERATE])


def status_of(table: dict, endpoint: str, field: str) -> tuple[str, str]:
    """(status, notes) of a field's row (chat and completions share the vLLM table)."""
    for section in ((endpoint, VLLM) if endpoint in (CHAT, COMPLETIONS) else (endpoint,)):
        if field in table.get(section, {}):
            return table[section][field]
    raise KeyError(f"{endpoint}: {field} has no row in {DOCS.name}")


def test_every_field_has_a_row_and_a_probe():
    table = docs_table()
    for endpoint in (CHAT, COMPLETIONS, RESPONSES, GENERATE):
        for field in sorted(fields_of(endpoint, table)):
            status, _ = status_of(table, endpoint, field)
            assert status in ("honoured", "informational", "default only", "refused"), (field, status)
            assert field in probes_of(endpoint), f"{endpoint}: no probe for {field}"


# ----------------------------------------------------------------------------------- the matrix


def _send(c: Client, endpoint: str, body: dict, **more) -> Any:
    """The endpoint's request with ``body`` and ``more`` (for ``/generate``,
    a sampling field of ``more`` goes into ``sampling_params``)."""
    body = json.loads(json.dumps(body))
    if endpoint == GENERATE:
        sampling = {k: more.pop(k) for k in list(more) if k in SGL_FIELDS}
        if sampling:
            body["sampling_params"] = {**body.get("sampling_params", {}), **sampling}
        body = {k: v for k, v in {**body, **more}.items() if v is not None}
        return c.generate(**body)
    if endpoint == RESPONSES:
        return send_responses(c.client, **{k: v for k, v in {**body, **more}.items() if v is not None})
    return (c.chat if endpoint == CHAT else c.completion)(**{**body, **more})


SGL_FIELDS = {"max_new_tokens", "temperature", "top_p", "top_k", "stop", "stop_token_ids", "n", "sampling_seed",
              "json_schema", "regex", "ebnf", "jump_forward"}


def _with_first_token(c: Client, endpoint: str, server, body: dict) -> dict:
    """``body`` with its ``"first-token"`` placeholder set to the id of the greedy first token."""
    text = text_of(_send(c, endpoint, {}, **({"max_new_tokens": 1} if endpoint == GENERATE else {"max_tokens": 1})))
    (token,) = server[1].llm.tokenizer.encode(text, add_special_tokens=False)
    text = json.dumps(body).replace('"first-token"', f"[{token}]")
    return json.loads(text)


def _probe(c: Client, server, endpoint: str, field: str, status: str, notes: str) -> str | None:
    """Run one field's probe; None when it behaves as its row says, else what went wrong."""
    body, check = probes_of(endpoint)[field]
    if "first-token" in json.dumps(body):
        body = _with_first_token(c, endpoint, server, body)

    def send(**more):
        return _send(c, endpoint, body, **more)

    try:
        if status in ("honoured", "informational"):
            if check == "404":
                with pytest.raises(openai.NotFoundError) as err:
                    send()
                assert err.value.body["param"] == "model"
                return None
            if check == "no reasoning parser":  # honoured with --reasoning-parser (tests/engine/test_chat.py)
                with pytest.raises(openai.BadRequestError) as err:
                    send()
                assert err.value.body["param"] == field and "--reasoning-parser" in err.value.body["message"]
                return None
            if check == "backend":
                send()
                with pytest.raises(openai.BadRequestError, match="guided_decoding_backend"):
                    send(guided_decoding_backend="outlines")
                return None
            r = send()
            if check == "stream":
                chunks = list(r)
                streamed = "".join((ch.choices[0].delta.content if endpoint == CHAT else ch.choices[0].text) or ""
                                   for ch in chunks if ch.choices)
                assert streamed == text_of(send(stream=False)), streamed
            elif check == "usage":
                chunks = list(r)
                assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
            elif check == "generate-stream":
                assert r[-1]["meta_info"]["finish_reason"] is not None
                assert r[-1]["text"] == text_of(send(stream=False))
            elif check is not None:
                check(c, send, r)
            return None
        with pytest.raises(openai.APIStatusError) as err:
            send()
        error = err.value.body or {}
        assert err.value.status_code == 400, err.value
        assert error.get("param") == field and f"not supported: {field}" in error.get("message", ""), error
        if status == "default only":
            for default in default_values(notes):
                if endpoint == GENERATE and field.startswith("sampling_params."):
                    c.generate(sampling_params={field.split(".", 1)[1]: default})
                else:
                    _send(c, endpoint, {field: default})
        return None
    except Exception as exc:  # noqa: BLE001 - collected and reported together below
        return f"{endpoint} {field} ({status}): {type(exc).__name__}: {str(exc)[:300]}"


@pytest.mark.model
@pytest.mark.parametrize("endpoint", [CHAT, COMPLETIONS, RESPONSES, GENERATE])
def test_every_field_is_honoured_or_refused_by_name(server, client, endpoint):
    table = docs_table()
    c = Client(server[0], client)
    fields = sorted(f for f in fields_of(endpoint, table) if f in probes_of(endpoint))
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda f: _probe(c, server, endpoint, f, *status_of(table, endpoint, f)), fields))
    failures = [r for r in results if r is not None]
    assert not failures, "\n".join(failures)


@pytest.mark.model
@pytest.mark.parametrize("endpoint, body, param", [
    (CHAT, {"max_tokens": True}, "max_tokens"), (CHAT, {"stream": "yes"}, "stream"), (CHAT, {"n": 1.0}, "n"),
    (CHAT, {"temperature": "0.5"}, "temperature"), (CHAT, {"logprobs": 1}, "logprobs"),
    (CHAT, {"stop": ["a", 1]}, "stop"), (COMPLETIONS, {"max_tokens": 2.0}, "max_tokens"),
    (COMPLETIONS, {"echo": "true"}, "echo"), (GENERATE, {"stream": 1}, "stream"),
    (GENERATE, {"sampling_params": {"max_new_tokens": True}}, "sampling_params.max_new_tokens"),
    (CHAT, {"no_such_field": 1}, "no_such_field"),
    (GENERATE, {"sampling_params": {"bogus": 1}}, "sampling_params.bogus"),
    (CHAT, {"guided_regex": "a", "guided_choice": ["a"]}, "guided_choice"),
    (CHAT, {"structured_outputs": {"regex": "a", "disable_any_whitespace": True}},
     "structured_outputs.disable_any_whitespace"),
    (CHAT, {"messages": [{"role": "user", "content": "x", "tool_call_id": "1"}]}, "messages[0].tool_call_id"),
    (CHAT, {"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
    (CHAT, {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "nope"}}}]},
     "tools[0].function.parameters"),
    (CHAT, {"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {
        "type": "function", "function": {"name": "g"}}}, "tool_choice.function.name"),
    (CHAT, {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "messages[0].content[0]"),
    (GENERATE, {"text": "x", "input_ids": [1]}, "text"),
], ids=lambda v: v if isinstance(v, str) and not v.startswith("/") else None)
def test_strict_types_and_refusals_name_the_field(server, endpoint, body, param):
    base = {CHAT: {"messages": [{"role": "user", "content": "hi"}]}, COMPLETIONS: {"prompt": "x"},
            GENERATE: {"text": "x"}}[endpoint]
    r = httpx.post(server[0] + endpoint, json={**base, **body}, timeout=60)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param, r.json()
