"""OpenAI batch lines as vLLM's run-batch reads them: each line's body fields as that
prompt's own settings (max_completion_tokens, temperature, response_format, ...), a field
mmrun cannot honor as that line's error, `/v1/completions` lines, `file://` media and the
answers in run-batch's shapes. The engine is the stand-in vLLM (tests/e2e/test_openai_batch_e2e.py
runs the same file through the real `vllm run-batch` and through mmrun)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mmrun.errors import EXIT_PARTIAL, EXIT_USAGE, UsageError
from mmrun.inputs import InputOptions, open_input
from mmrun.inputs.openai_body import CHAT_URL, COMPLETIONS_URL, body_settings
from mmrun.modalities.image import IMAGE
from tests.helpers.cli import in_process

FIXTURES = Path(__file__).parent.parent / "fixtures" / "data"
RGB = FIXTURES / "test_image_rgb.jpg"
SCHEMA = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
JSON_SCHEMA = {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}}


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "Hi"}], **fields}


@pytest.mark.parametrize(
    ("body", "url", "expected"),
    [
        (chat(), CHAT_URL, None),
        (
            chat(max_completion_tokens=20, max_tokens=5, temperature=0),
            CHAT_URL,
            {"max_tokens": 20, "temperature": 0},
        ),
        (
            chat(max_tokens=5, response_format=JSON_SCHEMA),
            CHAT_URL,
            {"max_tokens": 5, "structured_outputs": {"json": SCHEMA}},
        ),
        (
            chat(response_format={"type": "json_object"}),
            CHAT_URL,
            {"structured_outputs": {"json_object": True}},
        ),
        (chat(response_format={"type": "text"}), CHAT_URL, None),
        (
            chat(structured_outputs={"choice": ["yes", "no"]}),
            CHAT_URL,
            {"structured_outputs": {"choice": ["yes", "no"]}},
        ),
        (
            chat(
                response_format=JSON_SCHEMA,
                structured_outputs={"disable_additional_properties": True},
            ),
            CHAT_URL,
            {"structured_outputs": {"json": SCHEMA, "disable_additional_properties": True}},
        ),
        (
            chat(top_p=0.9, top_k=20, seed=3, stop=["\n"], min_tokens=2, repetition_penalty=1.1),
            CHAT_URL,
            {
                "top_p": 0.9,
                "top_k": 20,
                "seed": 3,
                "stop": ["\n"],
                "min_tokens": 2,
                "repetition_penalty": 1.1,
            },
        ),
        # Fields that change nothing at these values, and nulls (the run's value stays).
        (
            chat(n=1, logprobs=False, top_logprobs=0, stream=False, user="u", temperature=None),
            CHAT_URL,
            None,
        ),
        (chat(tools=[], tool_choice="none", add_special_tokens=False), CHAT_URL, None),
        (chat(logit_bias={"50256": -100}), CHAT_URL, {"logit_bias": {50256: -100.0}}),
        # n outputs, and log probabilities as SamplingParams.logprobs (a chat: top_logprobs)
        (chat(n=2, temperature=1), CHAT_URL, {"n": 2, "temperature": 1}),
        (chat(logprobs=True, top_logprobs=2), CHAT_URL, {"logprobs": 2}),
        (chat(logprobs=True), CHAT_URL, {"logprobs": 0}),
        ({"model": "m", "prompt": "Once", "logprobs": 3}, COMPLETIONS_URL, {"logprobs": 3}),
        ({"model": "m", "prompt": "Once", "logprobs": 0}, COMPLETIONS_URL, {"logprobs": 0}),
        (
            {"model": "m", "prompt": "Once", "max_tokens": 7, "add_special_tokens": True},
            COMPLETIONS_URL,
            {"max_tokens": 7},
        ),
    ],
)
def test_a_lines_body_fields_are_its_settings_as_run_batch_applies_them(
    body: dict[str, Any], url: str, expected: dict[str, Any] | None
) -> None:
    assert body_settings(body, url) == expected


@pytest.mark.parametrize(
    ("body", "url", "message"),
    [
        (
            chat(n=0),
            CHAT_URL,
            "body n must be an integer of at least 1, got 0 (e.g. n=...)",
        ),
        (
            chat(top_logprobs=2),
            CHAT_URL,
            "body top_logprobs=2: log probabilities need logprobs true (give logprobs true, "
            "or drop top_logprobs)",
        ),
        (
            chat(logprobs=2),
            CHAT_URL,
            "body logprobs=2: a chat's logprobs is true or false",
        ),
        (
            chat(logprobs=True, top_logprobs=-2),
            CHAT_URL,
            "body top_logprobs must be an integer of at least 0 (or -1: every token), got -2",
        ),
        (
            {"prompt": "x", "logprobs": True},
            COMPLETIONS_URL,
            "body logprobs must be an integer of at least 0 (or -1: every token), got true",
        ),
        (
            chat(prompt_logprobs=1),
            CHAT_URL,
            "body prompt_logprobs=1: mmrun writes no log probabilities of the prompt: drop "
            "prompt_logprobs",
        ),
        (chat(stream=True), CHAT_URL, "body stream=true: a batch is not streamed: drop stream"),
        (
            chat(tools=[{"type": "function"}]),
            CHAT_URL,
            'body tools=[{"type": "function"}]: mmrun runs no tool calls: drop tools',
        ),
        (
            chat(use_beam_search=True),
            CHAT_URL,
            "body use_beam_search=true: mmrun does not run beam search: drop use_beam_search",
        ),
        (
            chat(chat_template_kwargs={"enable_thinking": False}),
            CHAT_URL,
            'body chat_template_kwargs={"enable_thinking": false}: mmrun honors '
            "chat_template_kwargs only at vLLM's default: drop it",
        ),
        (
            chat(chat_template="{{ x }}"),
            CHAT_URL,
            'body chat_template="{{ x }}": mmrun cannot honor it: drop it '
            "(see docs/usage.md, OpenAI batch files)",
        ),
        (
            chat(add_special_tokens=True),
            CHAT_URL,
            "body add_special_tokens=true: mmrun cannot honor it: drop it "
            "(see docs/usage.md, OpenAI batch files)",
        ),
        (
            chat(temperature="hot"),
            CHAT_URL,
            "body temperature must be a number of at least 0, got 'hot' (e.g. temperature=0.7)",
        ),
        (
            chat(max_tokens=0),
            CHAT_URL,
            "body max_tokens must be an integer of at least 1, got 0 (e.g. max_tokens=64)",
        ),
        (
            chat(response_format={"type": "json_schema", "json_schema": {"name": "x"}}),
            CHAT_URL,
            "body response_format json_schema has no schema (give "
            '{"type": "json_schema", "json_schema": {"name": ..., "schema": {...}}})',
        ),
        (
            chat(response_format={"type": "structural_tag"}),
            CHAT_URL,
            "body response_format type 'structural_tag': mmrun takes text, json_object or "
            "json_schema",
        ),
        (
            chat(response_format=JSON_SCHEMA, structured_outputs={"regex": "[a-z]+"}),
            CHAT_URL,
            "body structured_outputs must name one constraint (json, choice, regex, grammar, "
            "json_object), got json, regex (use --json-schema, --choice, --regex, --grammar "
            "or --json-object)",
        ),
    ],
)
def test_a_field_mmrun_cannot_honor_is_named_with_what_to_do(
    body: dict[str, Any], url: str, message: str
) -> None:
    with pytest.raises(UsageError) as caught:
        body_settings(body, url)
    assert str(caught.value) == message


def line(custom_id: str, body: dict[str, Any], url: str = CHAT_URL) -> str:
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": url, "body": body}) + "\n"


def image_chat(question: str, url: str, **fields: Any) -> dict[str, Any]:
    content = [{"type": "text", "text": question}, {"type": "image_url", "image_url": {"url": url}}]
    return {"model": "m", "messages": [{"role": "user", "content": content}], **fields}


@pytest.fixture
def batch(tmp_path: Path) -> Path:
    """Chat lines with their own settings (a ``file://`` image and a relative one), a
    completion, and lines mmrun cannot honor."""
    (tmp_path / "rgb.jpg").write_bytes(RGB.read_bytes())
    image = (tmp_path / "rgb.jpg").as_uri()
    lines = [
        line("a", image_chat("Describe it.", image, max_completion_tokens=20, temperature=0)),
        line(
            "b", image_chat("Which colour?", "rgb.jpg", max_tokens=5, response_format=JSON_SCHEMA)
        ),
        line("c", {"model": "m", "prompt": "Once upon a time", "max_tokens": 7}, COMPLETIONS_URL),
        line("d", image_chat("Describe it.", "rgb.jpg", prompt_logprobs=1)),
        line("e", {"model": "m", "input": "x"}, "/v1/embeddings"),
        line("f", {"model": "m", "prompt": [1, 2, 3]}, COMPLETIONS_URL),
    ]
    path = tmp_path / "batch.jsonl"
    path.write_text("".join(lines))
    return path


def test_the_reader_gives_each_line_its_settings_or_its_problem(batch: Path) -> None:
    reader = open_input(str(batch), IMAGE, InputOptions())
    reader.check()
    items = {item.id: item for item in reader}
    assert items["a"].sources == ((batch.parent / "rgb.jpg").as_uri(),)
    assert items["a"].sampling == {"max_tokens": 20, "temperature": 0}
    assert items["b"].sampling == {"max_tokens": 5, "structured_outputs": {"json": SCHEMA}}
    assert items["c"].raw_prompt == "Once upon a time" and items["c"].sources == ()
    assert items["c"].sampling == {"max_tokens": 7} and items["c"].messages is None
    assert items["d"].problem == (
        "request d: body prompt_logprobs=1: mmrun writes no log probabilities of the prompt: "
        "drop prompt_logprobs"
    )
    assert items["e"].problem == (
        "request e is not a chat completion or a completion with a body (mmrun runs "
        "/v1/chat/completions and /v1/completions)"
    )
    assert items["f"].problem == (
        "request f: a completion's prompt must be one non-empty string (mmrun writes one "
        "answer per request; token ids are not read)"
    )
    assert getattr(reader, "asks_for_json", False) is True


def run(*args: str) -> Any:
    return in_process(["image", "-m", "mistral3", *args])


def test_each_line_runs_with_its_own_settings_and_answers_in_run_batchs_shapes(
    batch: Path, tmp_path: Path, fake_vllm: Any
) -> None:
    out = tmp_path / "out.jsonl"
    result = run("--input", str(batch), "-o", str(out), "--output-format", "openai")
    assert result.exit_code == EXIT_PARTIAL, result.stderr
    assert "3 done, 3 failed, 0 skipped" in result.stderr
    # What went to the engine, by the request's text: the chat's question, the completion.
    by_question = {
        (r["prompt"] if isinstance(r, dict) else r[0]["content"][0]["text"]): p.kwargs
        for r, p in zip(fake_vllm.submitted, fake_vllm.sampled, strict=True)
    }
    assert len(by_question) == 3
    assert by_question["Describe it."]["max_tokens"] == 20
    assert by_question["Describe it."]["temperature"] == 0
    assert by_question["Which colour?"]["max_tokens"] == 5
    assert by_question["Which colour?"]["structured_outputs"].json == SCHEMA
    # The completion's text goes to LLM.generate as it is: no chat template, no image.
    assert {"prompt": "Once upon a time"} in fake_vllm.submitted
    assert by_question["Once upon a time"]["max_tokens"] == 7
    assert "stop_token_ids" not in by_question["Once upon a time"]

    rows = {r["custom_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    completion = rows["c"]["response"]["body"]
    assert completion["object"] == "text_completion" and completion["id"].startswith("cmpl-")
    assert completion["choices"] == [
        {
            "index": 0,
            "text": "  answer to 'Once upon a time'\n",
            "logprobs": None,
            "finish_reason": "length",
            "stop_reason": None,
        }
    ]
    assert completion["usage"] == {
        "prompt_tokens": 10,
        "total_tokens": 12,
        "completion_tokens": 2,
        # vLLM's completions count the cached tokens alone
        "prompt_tokens_details": {
            "cached_tokens": 0,
            "created_cache_tokens": None,
            "multimodal_tokens": None,
        },
        "completion_tokens_details": None,
    }
    answer = rows["b"]["response"]["body"]
    assert answer["object"] == "chat.completion"
    # A chat completion's also counts what the prompt wrote to the cache; the media's
    # placeholder tokens are not in LLM.chat's outputs.
    assert answer["usage"] == {
        "prompt_tokens": 11,
        "total_tokens": 13,
        "completion_tokens": 2,
        "prompt_tokens_details": {
            "cached_tokens": 0,
            "created_cache_tokens": 8,
            "multimodal_tokens": None,
        },
        "completion_tokens_details": None,
    }
    assert answer["choices"][0]["message"] == {"role": "assistant", "content": '{"colour": "x"}'}
    assert rows["d"]["response"] == {
        "status_code": 400,
        "request_id": rows["d"]["response"]["request_id"],
        "body": None,
    }
    assert rows["d"]["error"]["error"]["message"] == (
        "request: request d: body prompt_logprobs=1: mmrun writes no log probabilities of the "
        "prompt: drop prompt_logprobs"
    )
    again = run("--input", str(batch), "-o", str(out), "--output-format", "openai")
    assert again.exit_code == EXIT_PARTIAL and "0 done, 0 failed, 6 skipped" in again.stderr


@pytest.mark.parametrize("dry", [[], ["--dry-run"]])
def test_ray_refuses_a_batch_file_before_anything_starts(
    dry: list[str], batch: Path, tmp_path: Path, fake_vllm: Any
) -> None:
    """Ray Data's vLLM stage takes a rendered prompt: a line's chat messages would not reach
    it, so the file is refused at once rather than run with other prompts."""
    out = tmp_path / "out.jsonl"
    result = run("--input", str(batch), "-o", str(out), "--backend", "ray", *dry)
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.splitlines() == [
        "mmrun: error: --backend ray does not run OpenAI batch files: Ray Data's vLLM stage "
        "takes a rendered prompt, not a line's own chat messages (drop --backend ray; -dp N "
        "spreads the file over a host's GPUs)"
    ]
    assert not out.exists() and fake_vllm.submitted == []


def test_the_dry_run_shows_each_lines_settings(batch: Path) -> None:
    result = run("--input", str(batch), "--dry-run", "--json")
    assert result.exit_code == EXIT_PARTIAL, result.stderr
    rows = {r["id"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert rows["a"]["sampling"] == {"max_tokens": 20, "temperature": 0}
    assert rows["b"]["sampling"] == {"max_tokens": 5, "structured_outputs": {"json": SCHEMA}}
    assert rows["c"]["sampling"] == {"max_tokens": 7}
    assert rows["c"]["prompt"] == "Once upon a time"
    assert rows["a"]["error"] is None and rows["a"]["media"] == [
        (batch.parent / "rgb.jpg").as_uri()
    ]
    assert "sampling" not in rows["d"]


def test_a_file_url_is_a_local_path_wherever_media_are_named(tmp_path: Path) -> None:
    image = tmp_path / "a b.jpg"
    image.write_bytes(RGB.read_bytes())
    result = run("-i", image.as_uri(), "--dry-run", "--json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["media"][0]["source"] == image.as_uri()
    assert document["media"][0]["path"] == str(image)


def test_prompt_token_details_carry_vllm_s_fields_for_each_endpoint() -> None:
    """vLLM's PromptTokenUsageInfo: cached_tokens, created_cache_tokens and multimodal_tokens;
    its completions endpoint fills cached_tokens alone, and none is written without a count."""
    from mmrun.inputs.openai_batch import prompt_details
    from mmrun.outcome import Completion

    counted = Completion("x", 40, 2, "stop", None, 16, 8, {"image": 25})
    assert prompt_details(counted, text_completion=False) == {
        "cached_tokens": 16,
        "created_cache_tokens": 8,
        "multimodal_tokens": {"image": 25},
    }
    assert prompt_details(counted, text_completion=True) == {
        "cached_tokens": 16,
        "created_cache_tokens": None,
        "multimodal_tokens": None,
    }
    uncounted = Completion("x", 40, 2, "stop")
    assert prompt_details(uncounted, text_completion=False) is None
    assert prompt_details(None, text_completion=False) is None


@pytest.fixture
def sampled(tmp_path: Path) -> Path:
    """Lines that ask for n outputs and for log probabilities (a chat, a completion)."""
    (tmp_path / "rgb.jpg").write_bytes(RGB.read_bytes())
    lines = [
        line("n3", image_chat("How many?", "rgb.jpg", n=3, temperature=1, seed=5)),
        line("lp", image_chat("Which colour?", "rgb.jpg", logprobs=True, top_logprobs=2)),
        line("clp", {"model": "m", "prompt": "Once", "logprobs": 1}, COMPLETIONS_URL),
    ]
    path = tmp_path / "sampled.jsonl"
    path.write_text("".join(lines))
    return path


# The stand-in's answers: tokens 1 and 2 ("t1" at -0.25, "t2" at -0.5), each step followed by
# the k others it lists ("alt0" at -1.0, "alt1" at -2.0).
T1, T2, ALT0, ALT1 = ([116, 49], [116, 50], [97, 108, 116, 48], [97, 108, 116, 49])
CHAT_LOGPROBS = {
    "content": [
        {
            "token": "t1",
            "logprob": -0.25,
            "bytes": T1,
            "top_logprobs": [
                {"token": "t1", "logprob": -0.25, "bytes": T1},
                {"token": "alt0", "logprob": -1.0, "bytes": ALT0},
            ],
        },
        {
            "token": "t2",
            "logprob": -0.5,
            "bytes": T2,
            "top_logprobs": [
                {"token": "t2", "logprob": -0.5, "bytes": T2},
                {"token": "alt0", "logprob": -1.0, "bytes": ALT0},
            ],
        },
    ]
}
# A completion's: the sampled token and the k most likely, by text (OpenAI's completions).
COMPLETION_LOGPROBS = {
    "text_offset": [0, 2],
    "token_logprobs": [-0.25, -0.5],
    "tokens": ["t1", "t2"],
    "top_logprobs": [{"t1": -0.25, "alt0": -1.0}, {"t2": -0.5, "alt0": -1.0}],
}


def test_n_outputs_and_log_probabilities_answer_in_run_batchs_shapes(
    sampled: Path, tmp_path: Path, fake_vllm: Any
) -> None:
    out = tmp_path / "out.jsonl"
    result = run("--input", str(sampled), "-o", str(out), "--output-format", "openai")
    assert result.exit_code == 0, result.stderr
    params = {
        (r["prompt"] if isinstance(r, dict) else r[0]["content"][0]["text"]): p.kwargs
        for r, p in zip(fake_vllm.submitted, fake_vllm.sampled, strict=True)
    }
    assert params["How many?"]["n"] == 3 and params["How many?"]["seed"] == 5
    assert params["Which colour?"]["logprobs"] == 2 and "n" not in params["Which colour?"]
    assert params["Once"]["logprobs"] == 1

    rows = {r["custom_id"]: r["response"]["body"] for r in map(json.loads, out.open())}
    answer = "  answer to 'How many?'\n"
    assert rows["n3"]["choices"] == [
        {
            "index": i,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": "length",
            "stop_reason": None,
        }
        for i, text in enumerate([answer, answer + " #1", answer + " #2"])
    ]
    # vLLM's usage: the tokens of every choice together (2 + 3 + 4)
    usage = rows["n3"]["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]) == (
        11,
        9,
        20,
    )
    assert rows["lp"]["choices"][0]["logprobs"] == CHAT_LOGPROBS
    assert rows["lp"]["usage"]["completion_tokens"] == 2
    assert rows["clp"]["choices"] == [
        {
            "index": 0,
            "text": "  answer to 'Once'\n",
            "logprobs": COMPLETION_LOGPROBS,
            "finish_reason": "length",
            "stop_reason": None,
        }
    ]


def test_mmruns_own_lines_carry_the_choices_and_log_probabilities(
    sampled: Path, fake_vllm: Any
) -> None:
    """``text`` stays the first output; ``choices`` is there only for n > 1, ``logprobs`` only
    where the line asked for them."""
    result = run("--input", str(sampled), "--json")
    assert result.exit_code == 0, result.stderr
    rows = {r["id"]: r for r in map(json.loads, result.stdout.splitlines())}
    answer = "  answer to 'How many?'\n"
    assert rows["n3"]["text"] == answer and rows["n3"]["completion_tokens"] == 9
    assert rows["n3"]["choices"] == [
        {
            "index": i,
            "text": answer + suffix,
            "completion_tokens": tokens,
            "finish_reason": "length",
            "parsed": None,
        }
        for i, (suffix, tokens) in enumerate([("", 2), (" #1", 3), (" #2", 4)])
    ]
    assert "logprobs" not in rows["n3"]
    assert rows["lp"]["logprobs"] == CHAT_LOGPROBS and "choices" not in rows["lp"]
    assert rows["clp"]["logprobs"] == COMPLETION_LOGPROBS


def test_the_dry_run_shows_n_and_log_probabilities(sampled: Path) -> None:
    result = run("--input", str(sampled), "--dry-run", "--json")
    assert result.exit_code == 0, result.stderr
    rows = {r["id"]: r["sampling"] for r in map(json.loads, result.stdout.splitlines())}
    assert rows == {
        "n3": {"n": 3, "temperature": 1, "seed": 5},
        "lp": {"logprobs": 2},
        "clp": {"logprobs": 1},
    }


def test_each_of_n_constrained_outputs_is_checked() -> None:
    from mmrun.outcome import Completion
    from mmrun.structured import checked

    good, bad = Completion('{"colour": "red"}', 9, 5, "stop"), Completion("red", 0, 1, "stop")
    done, error = checked(
        Completion('{"colour": "x"}', 9, 5, "stop", others=(good, bad)), {"json": SCHEMA}
    )
    assert [c.parsed for c in done.choices] == [{"colour": "x"}, {"colour": "red"}, None]
    assert error is not None and error.message == (
        "choice 2: the answer is not JSON (Expecting value at column 1)"
    )


def test_sampling_arg_n_is_refused_on_the_command_line() -> None:
    result = run("--sampling-arg", "n=2", "--dry-run")
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.splitlines() == [
        "mmrun: error: --sampling-arg n=2: a run samples one answer per prompt (give n in a "
        "manifest line's sampling or an OpenAI batch line's body: their result lines list "
        "every choice)"
    ]
