"""Log probabilities in the shapes of vLLM's OpenAI server (mmrun.logprobs), and a vLLM
server's chat answer of n choices with log probabilities read back (mmrun.engine.server)."""

from __future__ import annotations

from mmrun.engine.server import completion
from mmrun.logprobs import chat_logprobs, completion_logprobs
from mmrun.outcome import TokenLogprob

STEPS = (
    TokenLogprob("Hi", -0.5, (("Hi", -0.5), ("Ho", -1.5), ("Ha", float("-inf")))),
    TokenLogprob("é", None),  # vLLM gave no log probability for this step
)


def test_a_chat_choice_lists_the_first_k_tokens_of_each_step() -> None:
    assert chat_logprobs(STEPS, 2) == {
        "content": [
            {
                "token": "Hi",
                "logprob": -0.5,
                "bytes": [72, 105],
                "top_logprobs": [
                    {"token": "Hi", "logprob": -0.5, "bytes": [72, 105]},
                    {"token": "Ho", "logprob": -1.5, "bytes": [72, 111]},
                ],
            },
            {"token": "é", "logprob": -9999.0, "bytes": [195, 169], "top_logprobs": []},
        ]
    }
    # -1: every token vLLM listed, -inf written as -9999.0
    every = chat_logprobs(STEPS[:1], -1)["content"][0]["top_logprobs"]
    assert [(t["token"], t["logprob"]) for t in every] == [
        ("Hi", -0.5),
        ("Ho", -1.5),
        ("Ha", -9999.0),
    ]


def test_a_text_completion_lists_k_plus_one_tokens_and_the_text_offsets() -> None:
    assert completion_logprobs(STEPS, 1) == {
        "text_offset": [0, 2],
        "token_logprobs": [-0.5, None],
        "tokens": ["Hi", "é"],
        "top_logprobs": [{"Hi": -0.5, "Ho": -1.5}, None],
    }


def test_a_servers_choices_and_log_probabilities_are_read_back() -> None:
    def choice(text: str, tokens: list[str]) -> dict[str, object]:
        content = [
            {
                "token": t,
                "logprob": -1.0,
                "bytes": [],
                "top_logprobs": [{"token": t, "logprob": -1.0}],
            }
            for t in tokens
        ]
        return {
            "message": {"role": "assistant", "content": text},
            "logprobs": {"content": content},
            "finish_reason": "stop",
        }

    body = {
        "choices": [choice("ab", ["a", "b"]), choice("c", ["c"])],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3},
    }
    done = completion(body)
    assert not isinstance(done, Exception)
    assert [(c.text, c.completion_tokens) for c in done.choices] == [("ab", 2), ("c", 1)]
    assert done.prompt_tokens == 7 and done.generated_tokens == 3
    assert done.logprobs == (
        TokenLogprob("a", -1.0, (("a", -1.0),)),
        TokenLogprob("b", -1.0, (("b", -1.0),)),
    )
    assert chat_logprobs(done.logprobs, done.top_logprobs)["content"][0]["top_logprobs"] == [
        {"token": "a", "logprob": -1.0, "bytes": [97]}
    ]
