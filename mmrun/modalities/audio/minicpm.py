"""MiniCPM-o: OpenBMB's omni-modal MiniCPM, here with audio input."""

from __future__ import annotations

from mmrun.modalities._shapes import text_messages
from mmrun.registry import loader
from mmrun.request import LoaderContext, ModelRequest

# ChatML whose assistant turn opens with MiniCPM-o's speaker and TTS markers, which the
# model expects before an answer to audio.
AUDIO_CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n<|spk_bos|><|spk|><|spk_eos|><|tts_bos|>' }}{% endif %}"
)


@loader(
    "minicpmo",
    "audio",
    repo_id="openbmb/MiniCPM-o-2_6",
    architecture="MiniCPMO",
    trust_remote_code=True,
    methods=("generate",),
)
def minicpmo(ctx: LoaderContext) -> ModelRequest:
    messages = text_messages("(<audio>./</audio>)" * ctx.num_items + f"\n{ctx.question}")
    return ModelRequest(
        engine_args={"max_model_len": 4096, "max_num_seqs": 2},
        prompt=ctx.templates.render(
            messages, source="tokenizer", chat_template=AUDIO_CHAT_TEMPLATE
        ),
        stop_token_ids=tuple(ctx.templates.token_id(t) for t in ("<|im_end|>", "<|endoftext|>")),
    )
