"""The OpenAI-compatible HTTP server (FastAPI + uvicorn): ``leapgen serve``.

Needs the ``serve`` extra (fastapi, uvicorn); import :mod:`leapgen.server.app`
for :func:`~leapgen.server.app.create_app` and :func:`~leapgen.server.app.serve`.
"""
