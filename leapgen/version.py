"""leapgen's version: the package's ``__version__`` (``leapgen --version``, the
server's model card, and part of the disk cache key of compiled grammars).

Kept in a module of its own, below every layer, so that no module inside
leapgen needs to import the package root (the public facade) for it.
"""

__version__ = "0.1.0"
