"""SGLang's frontend language against leapgen's own ``/generate``:
``leapgen.frontend.RuntimeEndpoint`` sends the requests SGLang's client sends
(every sampling field, ``stop_token_ids: []``, ``stop_regex: []``...) and the
server answers them. The logprob-ranked ``select`` asks for prompt
log-probabilities (``max_new_tokens: 0``, ``logprob_start_len``), which the
server refuses by name."""

from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.model


def test_a_program_runs_against_the_server(server):
    sgl = pytest.importorskip("leapgen.frontend")
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 120}},
              "required": ["name", "age"], "additionalProperties": False}

    @sgl.function
    def card(s, text):
        s += sgl.user(text)
        s += sgl.assistant(sgl.gen("person", json_schema=json.dumps(schema), max_tokens=40, temperature=0))
        s += sgl.user("A phone number?")
        s += sgl.assistant(sgl.gen("phone", regex=r"[0-9]{3}-[0-9]{4}", max_tokens=12))
        s += sgl.user("Bright?")
        s += sgl.assistant(sgl.select("bright", ["yes", "no"], choices_method=sgl.constrained_decoding))

    backend = sgl.RuntimeEndpoint(server[0], chat_template_name="chatml")
    state = card.run(text="Ada is 36.", backend=backend)
    person = json.loads(state["person"])
    assert set(person) == {"name", "age"} and 0 <= person["age"] <= 120
    assert re.fullmatch(r"[0-9]{3}-[0-9]{4}", state["phone"])
    assert state["bright"] in ("yes", "no")
    assert state.get_meta_info("phone")["finish_reason"]["type"] == "stop"

    @sgl.function
    def ranked(s):
        s += sgl.user("Bright?")
        s += sgl.assistant(sgl.select("bright", ["yes", "no"]))  # SGLang's default: ranked by prompt logprobs

    with pytest.raises(RuntimeError, match="max_new_tokens|logprob_start_len"):
        ranked.run(backend=backend)
