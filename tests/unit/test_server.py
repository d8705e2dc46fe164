"""``--server URL``: the prompts go to a vLLM OpenAI-compatible server, here a scripted one on
127.0.0.1 (tests/helpers/http.py) that answers as vLLM's server does and records each body."""

from __future__ import annotations

import base64
import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from mmrun.prefetch import PACED_MEDIA
from tests.helpers.cli import in_process
from tests.helpers.http import ScriptedServer, png_bytes, reply

QWEN_IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"
QUESTION = "What is the content of each image?"
GENERATE_PROMPT = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    f"<|im_start|>user\n{QWEN_IMAGE}{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
)


def models_route(cards: list[dict[str, Any]]) -> Any:
    return lambda h: reply(h, 200, json.dumps({"object": "list", "data": cards}).encode())


def chat_answer(text: str, prompt_tokens: int = 25) -> bytes:
    return json.dumps(
        {
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 3},
        }
    ).encode()


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The tiny Qwen2.5-VL checkpoint (its processor renders nothing here, but loads)."""
    from mmrun.tiny.qwen_vl import build_qwen2_5_vl

    return str(build_qwen2_5_vl(tmp_path_factory.mktemp("qwen")).path)


@pytest.fixture
def vllm_server(server: ScriptedServer, qwen: str) -> Iterator[ScriptedServer]:
    """vLLM's server as far as mmrun asks it: one model, /tokenize, chat completions whose
    text names the request's first image's width."""
    server.routes["/v1/models"] = models_route([{"id": qwen, "root": qwen, "max_model_len": 4096}])
    server.routes["POST /tokenize"] = lambda h: reply(h, 200, b'{"tokens": [1], "count": 1}')

    def chat(handler: Any) -> None:
        body = json.loads(handler.body)
        parts = [p for p in body["messages"][0]["content"] if p.get("type") == "image_url"]
        width = decoded(parts[0]["image_url"]["url"]).width if parts else 0
        reply(handler, 200, chat_answer(f"w{width}"))

    server.routes["POST /v1/chat/completions"] = chat
    yield server


def decoded(url: str) -> Image.Image:
    head, _, data = url.partition(",")
    assert head == "data:image/bmp;base64"  # a server on this host: uncompressed
    return Image.open(io.BytesIO(base64.b64decode(data)))


def images(folder: Path, widths: tuple[int, ...]) -> Path:
    folder.mkdir()
    for width in widths:
        Image.new("RGB", (width, 56), (width % 256, 40, 90)).save(folder / f"w{width}.png")
    return folder


def chat_bodies(server: ScriptedServer) -> list[dict[str, Any]]:
    return [json.loads(body) for path, body, _ in server.posts if path == "/v1/chat/completions"]


def lines(path: Path) -> dict[str, dict[str, Any]]:
    """Each result line by its image's name."""
    rows = map(json.loads, path.read_text().splitlines())
    return {Path(row["media"][0]).stem: row for row in rows}


def test_generate_sends_mmrun_prompt_verbatim_and_writes_every_line(
    vllm_server: ScriptedServer, qwen: str, tmp_path: Path
) -> None:
    folder = images(tmp_path / "imgs", (56, 112, 168))
    out = tmp_path / "out.jsonl"
    result = in_process(
        [
            "image",
            "-m",
            "qwen2_5_vl",
            "--model",
            qwen,
            "-i",
            str(folder),
            "--server",
            vllm_server.base,
            "-o",
            str(out),
            "--quiet",
        ]
    )
    assert result.exit_code == 0, result.stderr
    rows = lines(out)
    assert sorted(rows) == ["w112", "w168", "w56"]
    assert {k: r["text"] for k, r in rows.items()} == {"w56": "w56", "w112": "w112", "w168": "w168"}
    assert {r["prompt_tokens"] for r in rows.values()} == {25}
    bodies = chat_bodies(vllm_server)
    assert len(bodies) == 3
    body = bodies[0]
    assert body["model"] == qwen
    assert body["chat_template"] == "{{ messages[0]['content'] }}"
    assert body["add_special_tokens"] is True
    assert body["temperature"] == 0.0 and body["max_tokens"] == 256
    content = body["messages"][0]["content"]
    assert content[0] == {"type": "text", "text": GENERATE_PROMPT}
    assert [p["type"] for p in content] == ["text", "image_url"]
    # The template check ran once, before the prompts.
    assert [p for p, _, _ in vllm_server.posts].index("/tokenize") == 0


def test_chat_sends_the_conversation_and_an_api_key(
    vllm_server: ScriptedServer, qwen: str, tmp_path: Path
) -> None:
    folder = images(tmp_path / "imgs", (56,))
    out = tmp_path / "out.jsonl"
    result = in_process(
        [
            "image",
            "-m",
            "qwen2_5_vl",
            "--model",
            qwen,
            "-i",
            str(folder),
            "--method",
            "chat",
            "--server",
            vllm_server.base,
            "-o",
            str(out),
        ],
        env={"VLLM_API_KEY": "secret-1"},
    )
    assert result.exit_code == 0, result.stderr
    assert lines(out)["w56"]["text"] == "w56"
    (body,) = chat_bodies(vllm_server)
    assert "chat_template" not in body and "add_special_tokens" not in body
    text, image = body["messages"][0]["content"]
    assert body["messages"][0]["role"] == "user"
    assert text == {"type": "text", "text": QUESTION}
    assert decoded(image["image_url"]["url"]).size == (56, 56)
    assert {h.get("Authorization") for _, _, h in vllm_server.posts} == {"Bearer secret-1"}
    assert "/tokenize" not in [p for p, _, _ in vllm_server.posts]  # no template to check


def test_structured_outputs_go_as_the_server_takes_them(
    vllm_server: ScriptedServer, qwen: str, tmp_path: Path
) -> None:
    vllm_server.routes["POST /v1/chat/completions"] = lambda h: reply(h, 200, chat_answer("yes"))
    folder = images(tmp_path / "imgs", (56,))
    out = tmp_path / "out.jsonl"
    result = in_process(
        [
            "image",
            "-m",
            "qwen2_5_vl",
            "--model",
            qwen,
            "-i",
            str(folder),
            "--choice",
            "yes,no",
            "--server",
            vllm_server.base,
            "-o",
            str(out),
        ]
    )
    assert result.exit_code == 0, result.stderr
    (body,) = chat_bodies(vllm_server)
    assert body["structured_outputs"] == {"choice": ["yes", "no"]}
    assert lines(out)["w56"]["text"] == "yes"


def test_a_refused_item_is_its_error_line_and_a_5xx_is_tried_again(
    vllm_server: ScriptedServer, qwen: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mmrun.engine import server as server_module

    monkeypatch.setattr(server_module, "BACKOFF_S", 0.01)
    failures = {"w112": 2}

    def chat(handler: Any) -> None:
        body = json.loads(handler.body)
        url = body["messages"][0]["content"][1]["image_url"]["url"]
        width = decoded(url).width
        if width == 168:
            reply(handler, 400, b'{"error": {"message": "too long", "type": "BadRequestError"}}')
        elif failures.get(f"w{width}", 0) > 0:
            failures[f"w{width}"] -= 1
            reply(handler, 503, b'{"error": {"message": "busy"}}')
        else:
            reply(handler, 200, chat_answer(f"w{width}"))

    vllm_server.routes["POST /v1/chat/completions"] = chat
    folder = images(tmp_path / "imgs", (56, 112, 168))
    out = tmp_path / "out.jsonl"
    result = in_process(
        [
            "image",
            "-m",
            "qwen2_5_vl",
            "--model",
            qwen,
            "-i",
            str(folder),
            "--server",
            vllm_server.base,
            "-o",
            str(out),
            "--quiet",
        ]
    )
    assert result.exit_code == 3, result.stderr
    rows = lines(out)
    assert rows["w56"]["text"] == "w56" and rows["w112"]["text"] == "w112"
    assert rows["w168"]["error"] == {
        "stage": "request",
        "message": "the server answered 400: too long",
    }
    assert len(chat_bodies(vllm_server)) == 5  # w112 twice more


def test_wrong_api_key_is_one_line_before_any_prompt(
    vllm_server: ScriptedServer, qwen: str, tmp_path: Path
) -> None:
    vllm_server.routes["/v1/models"] = lambda h: reply(h, 401, b'{"error": "Unauthorized"}')
    folder = images(tmp_path / "imgs", (56,))
    result = in_process(
        [
            "image",
            "-m",
            "qwen2_5_vl",
            "--model",
            qwen,
            "-i",
            str(folder),
            "--server",
            vllm_server.base,
            "--api-key",
            "bad",
        ]
    )
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        f"mmrun: error: the vLLM server at {vllm_server.base} refused the API key "
        "(pass the server's key with --api-key or VLLM_API_KEY)"
    )
    assert chat_bodies(vllm_server) == []


def test_another_model_is_refused_before_any_prompt(
    vllm_server: ScriptedServer, qwen: str, tmp_path: Path
) -> None:
    vllm_server.routes["/v1/models"] = models_route([{"id": "other", "root": "/models/other"}])
    folder = images(tmp_path / "imgs", (56,))
    result = in_process(
        [
            "image",
            "-m",
            "qwen2_5_vl",
            "--model",
            qwen,
            "-i",
            str(folder),
            "--server",
            vllm_server.base,
        ]
    )
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        f"mmrun: error: the server at {vllm_server.base} serves other, not {qwen} (start a "
        "server for this key (`mmrun serve -m KEY`), or pass --model with the served name to "
        "run that model)"
    )
    assert chat_bodies(vllm_server) == []


def test_a_server_without_request_templates_is_refused_for_generate(
    vllm_server: ScriptedServer, qwen: str, tmp_path: Path
) -> None:
    message = b'{"error": {"message": "Chat template is passed with request, but --trust-request-chat-template is not set."}}'
    vllm_server.routes["POST /tokenize"] = lambda h: reply(h, 400, message)
    folder = images(tmp_path / "imgs", (56,))
    result = in_process(
        [
            "image",
            "-m",
            "qwen2_5_vl",
            "--model",
            qwen,
            "-i",
            str(folder),
            "--server",
            vllm_server.base,
        ]
    )
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        f"mmrun: error: the vLLM server at {vllm_server.base} takes no chat template with a "
        "request, which this run's requests carry (start it with --trust-request-chat-template "
        "(mmrun serve does))"
    )


def test_an_unreachable_server_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    folder = images(tmp_path / "imgs", (56,))
    result = in_process(
        ["image", "-m", "qwen2_5_vl", "-i", str(folder), "--server", f"http://127.0.0.1:{port}"]
    )
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(
        f"mmrun: error: cannot reach the vLLM server at http://127.0.0.1:{port} ("
    )
    assert line.endswith("(start one with `mmrun serve -m KEY`, or check --server)")


def test_server_with_data_parallel_is_a_usage_error(tmp_path: Path) -> None:
    result = in_process(
        ["image", "-m", "qwen2_5_vl", "-i", "x.png", "--server", "http://127.0.0.1:9", "-dp", "2"]
    )
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        "mmrun: error: --server sends the prompts to one vLLM server; -dp and --backend start "
        "engines (drop -dp/--backend, or drop --server)"
    )


def test_a_token_id_prompt_cannot_go_to_a_server() -> None:
    from mmrun.builder import ServerRequestBuilder
    from mmrun.request import Prompt

    builder = ServerRequestBuilder.__new__(ServerRequestBuilder)
    builder.plan = type("P", (), {"spec": type("S", (), {"key": "voxtral", "media_key": None})})()  # type: ignore[assignment]
    assert builder.server_problem(Prompt(token_ids=(1, 2))) == (
        "voxtral's prompt is token ids, which vLLM's server takes with no media"
    )
    assert builder.server_problem(Prompt(text="hi")) is None


def test_a_server_lost_mid_batch_ends_the_run_and_a_rerun_resumes(
    vllm_server: ScriptedServer, qwen: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mmrun.engine import server as server_module

    monkeypatch.setattr(server_module, "BACKOFF_S", 0.01)
    answer = vllm_server.routes["POST /v1/chat/completions"]

    def drop_w112(handler: Any) -> None:
        if decoded_width(handler) == 112:
            handler.close_connection = True  # no answer: the connection is dropped
            return
        answer(handler)

    vllm_server.routes["POST /v1/chat/completions"] = drop_w112
    folder = images(tmp_path / "imgs", (56, 112, 168))
    out = tmp_path / "out.jsonl"
    args = ["image", "-m", "qwen2_5_vl", "--model", qwen, "-i", str(folder)]
    args += ["--server", vllm_server.base, "-o", str(out), "--quiet"]
    first = in_process(args)
    assert first.exit_code == 1
    assert first.stderr.splitlines()[-1] == (
        f"mmrun: error: the vLLM server at {vllm_server.base} stopped answering (Remote end "
        "closed connection without response) (start it again and rerun the same command: it "
        "resumes)"
    )
    assert "w112" not in lines(out)
    vllm_server.routes["POST /v1/chat/completions"] = answer
    second = in_process(args)
    assert second.exit_code == 0, second.stderr
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == 3
    assert {k: r["text"] for k, r in lines(out).items()} == {
        "w56": "w56",
        "w112": "w112",
        "w168": "w168",
    }


def decoded_width(handler: Any) -> int:
    body = json.loads(handler.body)
    return decoded(body["messages"][0]["content"][1]["image_url"]["url"]).width


def test_a_named_run_gives_its_document(
    vllm_server: ScriptedServer, qwen: str, tmp_path: Path
) -> None:
    folder = images(tmp_path / "imgs", (112,))
    image = str(folder / "w112.png")
    args = ["image", "-m", "qwen2_5_vl", "--model", qwen, "-i", image, "--server", vllm_server.base]
    result = in_process([*args, "--json"])
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert [o["text"] for o in document["outputs"]] == ["w112"]
    assert document["request"]["engines"] == {
        "backend": "server",
        "server": vllm_server.base,
        "replicas": 1,
        "gpus_per_replica": 1,
        "layout": [],
    }


def test_a_servers_prompt_token_details_are_kept() -> None:
    """A server started with --enable-prompt-tokens-details counts the prompt's cached and
    newly cached tokens and its media's placeholder tokens; mmrun keeps them for its lines."""
    from mmrun.engine.server import completion
    from mmrun.outcome import Completion

    choice = {"message": {"content": "a cat"}, "finish_reason": "stop"}
    usage = {"prompt_tokens": 40, "completion_tokens": 2}
    details = {"cached_tokens": 16, "created_cache_tokens": 16, "multimodal_tokens": {"image": 25}}
    counted = completion(
        {"choices": [choice], "usage": {**usage, "prompt_tokens_details": details}}
    )
    assert counted == Completion(
        "a cat",
        40,
        2,
        "stop",
        cached_tokens=16,
        created_cache_tokens=16,
        multimodal_tokens={"image": 25},
    )
    plain = completion({"choices": [choice], "usage": {**usage, "prompt_tokens_details": None}})
    assert plain == Completion("a cat", 40, 2, "stop")


@pytest.mark.parametrize(
    ("url", "picture"),
    [
        ("http://127.0.0.1:8000", "BMP"),
        ("http://127.0.0.2:8000", "BMP"),
        ("http://localhost:8000", "BMP"),
        ("http://[::1]:8000", "BMP"),
        ("http://10.0.0.7:8000", "PNG"),
        ("https://gpu.example.com", "PNG"),
    ],
)
def test_pictures_go_uncompressed_only_to_a_server_on_this_host(url: str, picture: str) -> None:
    from mmrun.engine.server import picture_format

    assert picture_format(url) == picture


@pytest.mark.parametrize("picture", ["BMP", "PNG"])
def test_a_picture_reaches_the_server_with_the_same_pixels(picture: str) -> None:
    import numpy as np

    from mmrun.engine.server import request_body

    pixels = np.random.default_rng(7).integers(0, 256, (37, 53, 3), dtype=np.uint8)
    other = np.random.default_rng(8).integers(0, 256, (28, 28, 3), dtype=np.uint8)
    # Text that looks like a held place, and one that needs escaping, reach it as they are.
    question = 'mmrun-picture-0123456789abcdef0123456789abcdef-000000 "quoted" \u00e9 é'
    body = {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image_pil", "image_pil": Image.fromarray(pixels)},
                    {"type": "text", "text": question},
                    {"type": "image_pil", "image_pil": Image.fromarray(other)},
                ],
            }
        ],
        "max_tokens": 4,
    }
    sent = json.loads(request_body(body, picture))
    first, text, second = sent["messages"][0]["content"]
    assert text == {"type": "text", "text": question}
    assert sent["model"] == "m" and sent["max_tokens"] == 4
    for part, expected in ((first, pixels), (second, other)):
        assert part["type"] == "image_url"
        head, _, data = part["image_url"]["url"].partition(",")
        assert head == f"data:image/{picture.lower()};base64"
        # As vLLM's server reads a data URL: Pillow, then RGB.
        got = Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")
        assert np.array_equal(np.asarray(got), expected)


def test_a_request_without_pictures_is_its_json() -> None:
    from mmrun.engine.server import request_body

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "n": 1}
    assert json.loads(request_body(body)) == body


def test_the_server_is_kept_as_busy_as_the_window_while_requests_run(
    server: ScriptedServer, qwen: str, tmp_path: Path
) -> None:
    # The server answers in steps, as vLLM's does on a GPU: the requests of a batch finish
    # together. mmrun resolves only a few prompts' media ahead; the prompts resolved while
    # earlier requests run must go out then, not once some of those requests finished, or the
    # server's batch shrinks to the few resolved ahead and stays there.
    server.routes["/v1/models"] = models_route([{"id": qwen, "root": qwen, "max_model_len": 4096}])
    server.routes["POST /tokenize"] = lambda h: reply(h, 200, b'{"tokens": [1], "count": 1}')
    lock = threading.Lock()
    running = [0]
    seen: list[int] = []  # how many requests were running as each one arrived, itself included

    start, step = time.monotonic(), 0.5

    def chat(handler: Any) -> None:
        with lock:
            running[0] += 1
            seen.append(running[0])
        # every request running is answered at the end of the step
        now = time.monotonic() - start
        time.sleep((int(now / step) + 1) * step - now)
        with lock:
            running[0] -= 1
        reply(handler, 200, chat_answer("ok"))

    server.routes["POST /v1/chat/completions"] = chat
    # Each picture takes 50 ms to download: the resolver's 12 threads are never far ahead.
    for i in range(160):
        picture = png_bytes(28 + i, 28)
        server.routes[f"/p{i}.png"] = lambda h, b=picture: (time.sleep(0.05), reply(h, 200, b))
    manifest = tmp_path / "batch.jsonl"
    manifest.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "image": server.url(f"/p{i}.png")}) + "\n"
            for i in range(160)
        )
    )
    out = tmp_path / "out.jsonl"
    args = ["image", "-m", "qwen2_5_vl", "--model", qwen, "--input", str(manifest), "-o", str(out)]
    result = in_process(
        [*args, "--server", server.base, "--engine-arg", "max_num_seqs=32", "--quiet"]
    )
    assert result.exit_code == 0, result.stderr
    assert len(out.read_text().splitlines()) == 160
    # A window of 2 x max_num_seqs = 64. Sent only after some finished, the requests would
    # find at most the few resolved ahead (PACED_MEDIA, 12 one-picture prompts) running.
    assert max(seen[64:]) >= 2 * PACED_MEDIA, seen
