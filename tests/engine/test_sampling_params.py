import pytest

from leapgen.engine import SamplingParams


def test_defaults():
    p = SamplingParams()
    assert p.max_tokens == 256 and p.temperature == 0.0 and p.greedy
    assert p.top_p == 1.0 and p.top_k == -1 and p.seed is None
    assert p.jump_forward and not p.constrained
    # The fixed JSON layout that makes punctuation forced (see the docstring).
    assert p.json_any_whitespace is False and p.json_separators == (", ", ": ")


def test_stop_token_ids_become_a_tuple():
    assert SamplingParams(stop_token_ids=[2, 0]).stop_token_ids == (2, 0)


def test_constrained():
    assert SamplingParams(regex="a+").constrained
    assert SamplingParams(json_schema={"type": "string"}).constrained
    assert SamplingParams(json_schema='{"type": "string"}').constrained
    assert SamplingParams(lark='start: "a"').constrained


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(max_tokens=-1),
        dict(max_tokens=0, regex="a"),
        dict(max_tokens=0, n=2),
        dict(prompt_logprobs=-1),
        dict(prompt_logprobs=21),
        dict(prompt_logprobs_start=2),
        dict(prompt_logprobs=0, prompt_logprobs_start=-1),
        dict(max_tokens=1.5),
        dict(max_tokens=True),
        dict(temperature=-0.1),
        dict(temperature=float("nan")),
        dict(temperature="1"),
        dict(top_p=0.0),
        dict(top_p=1.5),
        dict(top_k=0),
        dict(top_k=-2),
        dict(seed=-1),
        dict(seed=1.0),
        dict(stop_token_ids=[1, -3]),
        dict(stop_token_ids="abc"),
        dict(stop_token_ids=5),
        dict(json_schema=["type"]),
        dict(regex=3),
        dict(regex="a", json_schema={}),
        dict(lark=3),
        dict(lark='start: "a"', ebnf='root ::= "a"'),
        dict(jump_forward=1),
        dict(json_separators=(",",)),
        dict(json_separators=(",", 1)),
        dict(json_indent=-1),
        dict(json_any_whitespace="no"),
        dict(json_any_order=1),
    ],
)
def test_invalid_values_raise_value_error(kwargs):
    with pytest.raises(ValueError):
        SamplingParams(**kwargs)
