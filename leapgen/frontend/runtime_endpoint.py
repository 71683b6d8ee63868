"""``RuntimeEndpoint(url)``: a server speaking SGLang's native HTTP protocol
(``POST /generate``), as SGLang's own ``RuntimeEndpoint`` calls it
(``sglang/lang/backend/runtime_endpoint.py``).

Requests, as SGLang sends them:

- ``generate``: ``{"text": <the program's text>, "sampling_params":
  {"skip_special_tokens", "spaces_between_special_tokens", "max_new_tokens",
  "min_new_tokens", "n", "stop", "stop_token_ids", "stop_regex",
  "temperature", "top_p", "top_k", "min_p", "frequency_penalty",
  "presence_penalty", "ignore_eos", "regex", "json_schema"}}`` (plus
  ``return_logprob``, ``logprob_start_len``, ``top_logprobs_num``,
  ``return_text_in_logprobs`` when set); the answer's ``text`` is the
  completion, ``meta_info`` is kept as the variable's meta info;
- ``select`` (the logprob methods): ``{"text": <text>, "sampling_params":
  {"max_new_tokens": 0}}`` for the prompt's length (``meta_info.prompt_tokens``),
  then one batch ``{"text": [<text> + choice, ...], "sampling_params":
  {"max_new_tokens": 0, "temperature": 0}, "return_logprob": true,
  "return_text_in_logprobs": true, "logprob_start_len": prompt_tokens - 2}``
  whose ``meta_info.input_token_logprobs`` are ranked as SGLang ranks them
  (the first of them dropped when it is the prompt's own last token, i.e.
  when the boundary did not merge; an unscored first entry, which an SGLang
  server always sends, is then left out of what the method gets: SGLang's own
  greedy and unconditional methods fail on its None); ``unconditional_likelihood_normalized``
  then scores the choices' tokens alone: ``{"input_ids": [...],
  "sampling_params": {"max_new_tokens": 0}, "return_logprob": true,
  "logprob_start_len": 0}`` (SGLang's client leaves ``logprob_start_len`` at
  -1, for which an SGLang server scores nothing when ``max_new_tokens`` is 0,
  and its method then fails on the empty lists); ``constrained_decoding``
  sends one ``generate`` with the choices' alternation as ``regex`` and
  temperature 0.

The chat template: ``chat_template_name``, else the one SGLang's matching
rules pick for ``GET /get_model_info``'s ``model_path`` (or, on a server
without that route, ``GET /v1/models``' first model id).

A non-200 answer raises ``RuntimeError`` with the server's message, as
SGLang's client does.
"""

from __future__ import annotations

from leapgen.frontend.backend import BaseBackend
from leapgen.frontend.chat_template import ChatTemplate, get_chat_template, get_chat_template_by_model_path
from leapgen.frontend.choices import ChoicesDecision, ChoicesSamplingMethod, ConstrainedDecoding, choices_regex
from leapgen.frontend.global_config import global_config
from leapgen.frontend.ir import SamplingArgs, unset_args

_LOGPROB_FIELDS = ("return_logprob", "logprob_start_len", "top_logprobs_num", "return_text_in_logprobs")


class RuntimeEndpoint(BaseBackend):
    """A backend over HTTP.

    Parameters
    ----------
    base_url : str
        E.g. ``"http://127.0.0.1:8000"``.
    api_key : str, optional
        Sent as ``Authorization: Bearer <api_key>``.
    verify : bool or str, optional
        TLS verification (httpx's ``verify``).
    chat_template_name : str, optional
        A name of :mod:`leapgen.frontend.chat_template`'s registry.
    transport : httpx.BaseTransport, optional
        For tests (``httpx.MockTransport``).
    timeout : float or None, default None
        Seconds per request; None waits as long as generation takes.

    Raises
    ------
    RuntimeError
        The server answered an error.
    """

    def __init__(self, base_url: str, api_key: str | None = None, verify=None, chat_template_name: str | None = None,
                 *, transport=None, timeout: float | None = None):
        import httpx

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url = base_url.rstrip("/")
        self.client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout,
                                   verify=True if verify is None else verify, transport=transport)
        self.model_info = self._model_info()
        if chat_template_name is not None:
            self.chat_template = get_chat_template(chat_template_name)
        else:
            self.chat_template = get_chat_template_by_model_path(self.model_info.get("model_path", ""))

    def _model_info(self) -> dict:
        res = self.client.get("/get_model_info")
        if res.status_code == 404:
            models = self._json(self.client.get("/v1/models")).get("data") or [{}]
            return {"model_path": models[0].get("id", "")}
        return self._json(res)

    def get_model_name(self) -> str:
        return self.model_info.get("model_path", "")

    def get_chat_template(self) -> ChatTemplate:
        return self.chat_template

    @staticmethod
    def _json(res):
        if res.status_code != 200:
            try:
                content = res.json()
            except ValueError:
                content = res.text
            raise RuntimeError(content)
        return res.json()

    def _post(self, data: dict):
        return self._json(self.client.post("/generate", json=data))

    def generate(self, s, args: SamplingArgs) -> tuple[str, dict]:
        data = {"text": s.text_, "sampling_params": {
            "skip_special_tokens": global_config.skip_special_tokens_in_output,
            "spaces_between_special_tokens": global_config.spaces_between_special_tokens_in_out,
            **args.to_srt_kwargs()}}
        for name in _LOGPROB_FIELDS:
            value = getattr(args, name)
            if value is not None:
                data[name] = value
        obj = self._post(data)
        return obj["text"], obj["meta_info"]

    def select(self, s, choices: list[str], temperature: float, method: ChoicesSamplingMethod) -> ChoicesDecision:
        if isinstance(method, ConstrainedDecoding):
            args = s.resolve(unset_args(max_new_tokens=256, temperature=0.0, regex=choices_regex(choices)))
            text, meta = self.generate(s, args)
            if text not in choices:
                raise RuntimeError(f"constrained select came back with {text!r}, not one of the choices")
            return ChoicesDecision(text, meta)
        if temperature > 1e-5:
            raise ValueError("select scores its choices and needs temperature 0 (as SGLang's)")
        prompt_len = self._post({"text": s.text_, "sampling_params": {"max_new_tokens": 0}})["meta_info"][
            "prompt_tokens"]
        obj = self._post({"text": [s.text_ + c for c in choices],
                          "sampling_params": {"max_new_tokens": 0, "temperature": 0},
                          "return_logprob": True, "return_text_in_logprobs": True,
                          "logprob_start_len": max(prompt_len - 2, 0)})
        inputs = [list(r["meta_info"]["input_token_logprobs"]) for r in obj]
        outputs = [r["meta_info"].get("output_token_logprobs", []) for r in obj]
        normalized = [_mean_logprob(t) for t in inputs]
        for i, toks in enumerate(inputs):  # no merge at the boundary: the first is the prompt's own token
            if toks and s.text_.endswith(toks[0][-1]):
                normalized[i] = (normalized[i] * len(toks) - (toks[0][0] or 0.0)) / max(len(toks) - 1, 1)
                inputs[i] = toks[1:]
        # An SGLang server leaves the first entry unscored (None): SGLang's client hands it on, and its greedy
        # and unconditional methods then fail on it; the ranking above skips it either way.
        inputs = [[t for t in toks if t[0] is not None] for toks in inputs]
        unconditional = None
        if method.requires_unconditional_logprobs:
            res = self._post({"input_ids": [[t[1] for t in toks] for toks in inputs],
                              "sampling_params": {"max_new_tokens": 0}, "return_logprob": True,
                              "logprob_start_len": 0})
            unconditional = [r["meta_info"]["input_token_logprobs"] for r in res]
        return method(choices=choices, normalized_prompt_logprobs=normalized, input_token_logprobs=inputs,
                      output_token_logprobs=outputs, unconditional_token_logprobs=unconditional)


def _mean_logprob(tokens) -> float:
    values = [t[0] for t in tokens if t[0]]
    return sum(values) / len(values) if values else float("-inf")
