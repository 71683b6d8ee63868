"""The issue's example, a ``regex`` ``gen``, a ``select`` and ``run_batch``, run by the real
``sglang`` frontend's ``RuntimeEndpoint`` against the server at ``argv[1]``; prints the results as
JSON. Run by ``test_frontend_interop.py`` with ``LEAPGEN_SGLANG_PYTHON`` (a Python with sglang)."""

import json
import sys

import sglang as sgl


@sgl.function
def extract(s, text):
    s += sgl.user(text)
    s += sgl.assistant_begin()
    s += sgl.gen("person", json_schema=json.dumps({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"}
        }
    }))
    s += sgl.assistant_end()


@sgl.function
def colour(s):
    s += sgl.user("Name a colour.")
    s += sgl.assistant(sgl.gen("color", regex=r"red|blue|green"))


@sgl.function
def bright(s):
    s += sgl.user("Is the sun bright? Answer yes or no.")
    s += sgl.assistant(sgl.select("bright", choices=["yes", "no", "maybe not"]))


sgl.set_default_backend(sgl.RuntimeEndpoint(sys.argv[1]))
state = extract.run(text="Ada Lovelace is 36 years old.", temperature=0)
batch = extract.run_batch([{"text": "Bob is 20."}, {"text": "Carol is 51."}], temperature=0)
selected = bright.run()
print(json.dumps({"person": state["person"], "meta": state.get_meta_info("person"), "color": colour.run()["color"],
                  "bright": selected["bright"], "logprobs": selected.get_meta_info("bright")["normalized_prompt_logprobs"],
                  "batch": [s["person"] for s in batch]}))
