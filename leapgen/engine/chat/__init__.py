"""Chat requests with tools and reasoning, as one structural tag each.

A request's tools (OpenAI's ``tools`` / ``tool_choice`` /
``parallel_tool_calls``) and a reasoning model's thinking become the grammar
of an ordinary request: :func:`~.plan.plan_chat` renders the conversation
(:mod:`.template`), builds the structural tag (:mod:`.chat_grammar`) from
the model family's tool-call format (:mod:`.tool_formats`) and reasoning
convention (:mod:`.reasoning`), and returns the parser of the output
(:mod:`.output_parser`), built from the same descriptions.
"""
