"""A grammar rule's temperature (EBNF ``name[temperature=t]``) is what the engine
samples with while the rule is active, whatever the request's temperature."""

from __future__ import annotations

import pytest
import torch

from leapgen.engine import SamplingParams
from leapgen.engine.sampler import make_generator, sample

GRAMMAR = 'root[temperature=0] ::= "Answer: " word " " word\nword[temperature=0] ::= [a-z]{2,8}'


def test_the_step_temperature_overrides_the_request():
    logits = torch.tensor([0.0, 3.0, 2.9, 1.0])
    hot = SamplingParams(temperature=50.0)
    gen = make_generator(0)
    assert {sample(logits.clone(), hot, gen, temperature=0.0) for _ in range(50)} == {1}  # greedy
    assert len({sample(logits.clone(), hot, gen) for _ in range(200)}) > 1  # the request's own temperature
    greedy = SamplingParams()
    assert len({sample(logits.clone(), greedy, gen, temperature=50.0) for _ in range(200)}) > 1


@pytest.mark.model
def test_engine_samples_with_the_rule_temperature(llm):
    prompt = "Name two animals."
    greedy = llm.generate(prompt, SamplingParams(ebnf=GRAMMAR, max_tokens=24))[0]
    hot = [llm.generate(prompt, SamplingParams(ebnf=GRAMMAR, max_tokens=24, temperature=20.0, seed=s))[0]
           for s in range(3)]
    assert all(o.token_ids == greedy.token_ids for o in hot)  # every token is sampled inside a rule at 0
    loose = GRAMMAR.replace("[temperature=0]", "")
    outs = {tuple(llm.generate(prompt, SamplingParams(ebnf=loose, max_tokens=24, temperature=20.0, seed=s))[0].token_ids)
            for s in range(3)}
    assert len(outs) > 1  # without the rule's temperature the request's high one shows
