"""Run the issue's example (plus a ``select``) with a frontend module against a small fake
SGLang server on localhost, and print the program's results and every request the server got,
as JSON: ``python sglang_protocol_probe.py sglang`` (the real package) or ``leapgen.frontend``.
Used by ``test_against_sglang.py`` to compare the two clients' requests."""

import json, sys, threading
from http.server import BaseHTTPRequestHandler, HTTPServer
REQS = []
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def _send(self, obj, code=200):
        data = json.dumps(obj).encode(); self.send_response(code); self.send_header("Content-Type","application/json"); self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def do_GET(self):
        if self.path == "/get_model_info": return self._send({"model_path": "Qwen/Qwen2-0.5B-Instruct"})
        self._send({"detail": "nf"}, 404)
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        REQS.append(body)
        p = body.get("sampling_params", {})
        if isinstance(body.get("text"), list):
            return self._send([{"text": "", "meta_info": {"input_token_logprobs": [[-1.0, 1, "a"], [-0.5 if "yes" in t else -3.0, 2, "b"]], "output_token_logprobs": []}} for t in body["text"]])
        if p == {"max_new_tokens": 0}:
            return self._send({"text": "", "meta_info": {"prompt_tokens": len(body["text"])}})
        text = '{"name": "Ada", "age": 36}' if p.get("json_schema") else "blue"
        self._send({"text": text, "meta_info": {"prompt_tokens": 5, "completion_tokens": 3, "finish_reason": {"type": "stop"}}})
srv = HTTPServer(("127.0.0.1", 0), H); threading.Thread(target=srv.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{srv.server_port}"
import importlib
sgl = importlib.import_module(sys.argv[1])
@sgl.function
def extract(s, text):
    s += sgl.user(text)
    s += sgl.assistant_begin()
    s += sgl.gen("person", json_schema=json.dumps({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}))
    s += sgl.assistant_end()
    s += sgl.user("Bright?")
    s += sgl.assistant(sgl.select("bright", ["no", "yes"]))
sgl.set_default_backend(sgl.RuntimeEndpoint(url))
st = extract.run(text="Ada, 36.")
print(json.dumps({"person": st["person"], "bright": st["bright"], "text": st.text(), "requests": REQS}, sort_keys=True))
srv.shutdown()
