"""``column_major_linears``: same values and shapes, column-major storage,
tied weights converted once, idempotent."""

import torch

from leapgen.engine.model_runner import column_major_linears


def test_linear_weights_become_column_major_with_the_same_values():
    torch.manual_seed(0)
    embed = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = embed.weight  # tied, as lm_head = embed_tokens
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 4), head)
    x = torch.randn(3, 4)
    before = [p.detach().clone() for p in model.parameters()]
    expected = model(x)
    column_major_linears(model)
    column_major_linears(model)  # idempotent
    for p, b in zip(model.parameters(), before):
        assert p.shape == b.shape and torch.equal(p, b)
        if p.dim() == 2:
            assert p.t().is_contiguous() and not p.is_contiguous()
    assert head.weight is embed.weight
    torch.testing.assert_close(model(x), expected)
    assert torch.equal(embed(torch.tensor([3])), before[-1][3:4])  # lookups still read the right rows
