"""The kernels' compiler: numba's ``njit`` when numba is installed, else the plain function.

numba is optional: without it leapgen stays importable and correct (the kernels
run as Python, slower; :mod:`leapgen.compiler.token_index` then walks the
vocabulary with numpy instead). Used by the kernels of :mod:`leapgen.automata`
and :mod:`leapgen.compiler`.
"""

from __future__ import annotations

try:
    import numba

    njit = numba.njit(cache=True, nogil=True)
    njit_inline = numba.njit(cache=True, nogil=True, inline="always")
    """For small helpers called in a kernel's inner loop: inlined in numba's IR, no call per use."""
except ImportError:  # pragma: no cover - exercised where numba is missing
    numba = None

    def njit(f):
        return f

    njit_inline = njit

HAVE_NUMBA = numba is not None
"""Whether the kernels are compiled (numba is installed)."""
