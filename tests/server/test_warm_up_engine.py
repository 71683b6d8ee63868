"""``serve``'s start-up request (:func:`leapgen.server.app.warm_up_engine`): it runs a constrained
request through the engine and the compile worker, then leaves no trace in the statistics or the
prefix cache, and the engine serves the same afterwards."""

from __future__ import annotations

from tests.server.helpers import needs_server_stack, new_engine


def test_the_warm_up_request_runs_and_is_forgotten():
    needs_server_stack()
    from leapgen.engine.sampling_params import SamplingParams
    from leapgen.server.app import warm_up_engine

    engine = new_engine()
    llm = engine.llm
    try:
        llm.grammar.prepare()
        params = SamplingParams(max_tokens=8, regex="[0-9]{3}")
        before = llm.generate("Say a number.", params)[0].text
        assert llm.stats.compiles == 1 and len(llm.prefix_cache) > 0
        assert warm_up_engine(llm) > 0
        assert llm.stats.compiles == 0 and llm.stats.prompt_tokens == 0 and len(llm.prefix_cache) == 0
        assert llm.grammar.cache_sizes()["memory"] > 0  # the compiles happened (cached)
        assert llm.generate("Say a number.", params)[0].text == before  # greedy: the same answer
    finally:
        llm.close()
