import pytest
import torch

from leapgen.engine import SamplingParams
from leapgen.engine.sampler import make_generator, sample


def _logits():
    return torch.tensor([0.0, 3.0, 1.0, 2.9, float("-inf"), -1.0])


def test_greedy_is_argmax_and_does_not_mutate():
    logits = _logits()
    assert sample(logits, SamplingParams(), make_generator(0)) == 1
    assert torch.equal(logits, _logits())


def test_masked_tokens_are_never_sampled():
    gen = make_generator(0)
    logits = torch.zeros(6)
    logits[[0, 2, 5]] = float("-inf")
    params = SamplingParams(temperature=1.5)
    picks = {sample(logits.clone(), params, gen) for _ in range(200)}
    assert picks <= {1, 3, 4} and len(picks) == 3


def test_top_k_1_and_tiny_top_p_are_greedy():
    gen = make_generator(0)
    for _ in range(20):
        assert sample(_logits(), SamplingParams(temperature=1.0, top_k=1), gen) == 1
        assert sample(_logits(), SamplingParams(temperature=1.0, top_p=0.01), gen) == 1


def test_top_k_keeps_only_the_k_best():
    gen = make_generator(1)
    picks = {sample(_logits(), SamplingParams(temperature=5.0, top_k=2), gen) for _ in range(200)}
    assert picks == {1, 3}


def test_top_p_keeps_the_nucleus():
    # probs ~ [0.5, 0.3, 0.2]: top_p=0.7 keeps the first two.
    logits = torch.log(torch.tensor([0.5, 0.3, 0.2]))
    gen = make_generator(2)
    picks = {sample(logits.clone(), SamplingParams(temperature=1.0, top_p=0.7), gen) for _ in range(300)}
    assert picks == {0, 1}


def test_seeded_generator_is_reproducible():
    params = SamplingParams(temperature=1.0)
    a = [sample(torch.zeros(50), params, g) for g in [make_generator(7)] for _ in range(20)]
    b = [sample(torch.zeros(50), params, g) for g in [make_generator(7)] for _ in range(20)]
    assert a == b


@pytest.mark.parametrize("params", [SamplingParams(), SamplingParams(temperature=1.0, top_p=0.5, top_k=3)])
def test_all_masked_raises(params):
    with pytest.raises(ValueError):
        sample(torch.full((8,), float("-inf")), params, make_generator(0))


@pytest.mark.parametrize("temperature", [1e-30, 1e-38, 1e-39, 1e-45, 1e-300, 5e-324])
def test_tiny_temperature_samples_the_best_token(temperature):
    # float32 logits / 1e-39 overflowed to inf (softmax: nan), which read as "every token is masked"
    gen = make_generator(0)
    for _ in range(20):
        assert sample(_logits(), SamplingParams(temperature=temperature), gen) == 1
        assert sample(_logits() - 10.0, SamplingParams(temperature=temperature), gen) == 1  # all < 0


@pytest.mark.parametrize("top_p", [1e-30, 1e-60, 1e-300, 5e-324])
def test_tiny_top_p_keeps_the_best_token(top_p):
    # top_p as float32 was 0: every token's probability mass before it reached it, the best one's too
    gen = make_generator(0)
    for temperature in (1.0, 1e-39, 50.0):
        assert sample(_logits(), SamplingParams(temperature=temperature, top_p=top_p), gen) == 1


def test_tiny_temperature_shares_ties():
    logits = torch.tensor([2.0, 5.0, float("-inf"), 5.0, 4.999])
    gen = make_generator(3)
    picks = {sample(logits, SamplingParams(temperature=1e-39), gen) for _ in range(100)}
    assert picks == {1, 3}
    assert torch.equal(logits, torch.tensor([2.0, 5.0, float("-inf"), 5.0, 4.999]))  # not mutated
