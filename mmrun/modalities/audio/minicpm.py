"""MiniCPM-o: OpenBMB's omni-modal MiniCPM, here with audio input."""

from __future__ import annotations

from mmrun.prompts import text_messages
from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt

# ChatML whose assistant turn opens with MiniCPM-o's speaker and TTS markers, which the
# model expects before an answer to audio.
AUDIO_CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n<|spk_bos|><|spk|><|spk_eos|><|tts_bos|>' }}{% endif %}"
)
STOP_TOKENS = ("<|im_end|>", "<|endoftext|>")


@loader(
    "minicpmo",
    "audio",
    repo_id="openbmb/MiniCPM-o-2_6",
    architecture="MiniCPMO",
    engine_args={"max_model_len": 4096, "max_num_seqs": 2},
    trust_remote_code=True,
    methods=("generate",),
)
def minicpmo(ctx: LoaderContext) -> Prompt:
    messages = text_messages("(<audio>./</audio>)" * ctx.num_items + f"\n{ctx.question}")
    return Prompt(
        text=ctx.templates.render(messages, source="tokenizer", chat_template=AUDIO_CHAT_TEMPLATE),
        stop_token_ids=tuple(ctx.templates.token_id(t) for t in STOP_TOKENS),
    )
