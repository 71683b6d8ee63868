"""The Triton kernel of apply_token_bitmask_inplace, run by Triton's interpreter
on the CPU (``TRITON_INTERPRET=1``), against the vectorized torch path.

On a machine with a GPU the same kernel runs compiled; this test checks its
indexing and masking logic without one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

SCRIPT = textwrap.dedent("""
    import torch

    from leapgen.bitmask.cpu import apply_token_bitmask_inplace
    from leapgen.bitmask.triton import apply_token_bitmask_inplace_triton

    gen = torch.Generator().manual_seed(0)
    cases = [  # (logits shape, bitmask rows, words, indices)
        ((3, 70), 3, 3, None),                # vocab not a multiple of 32
        ((2, 100), 2, 3, None),               # logits wider than 32 * W: the tail is masked
        ((4, 2100), 4, 66, [3, 1]),           # bitmask row indices[i] for logits row indices[i]; several blocks
        ((4, 64), 4, 2, [2, 0]),              # bitmask row indices[i]
        ((50,), 1, 2, None),                  # 1-D logits and bitmask row
    ]
    for shape, rows, words, indices in cases:
        logits = torch.randn(shape, generator=gen)
        bitmask = torch.randint(-2**31, 2**31 - 1, (rows, words), dtype=torch.int32, generator=gen)
        if len(shape) == 1:
            bitmask = bitmask[0]
        expected, got = logits.clone(), logits.clone()
        apply_token_bitmask_inplace(expected, bitmask, indices=indices)
        apply_token_bitmask_inplace_triton(got, bitmask, indices=indices)
        assert torch.equal(expected, got), (shape, indices)
    try:
        apply_token_bitmask_inplace_triton(torch.zeros(2, 40), torch.zeros(3, 2, dtype=torch.int32))
    except ValueError:
        pass
    else:
        raise AssertionError("row mismatch not refused")
    print("ok")
""")


def test_triton_kernel_matches_torch_path():
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=Path(__file__).resolve().parents[1], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
