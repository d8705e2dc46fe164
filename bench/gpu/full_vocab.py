"""Copy a model folder of bench/gpu with a tokenizer that can decode every id of the model's
vocabulary.

A folder's small tokenizer (Qwen2.5-VL's 327 entries; Whisper's 256 bytes and its special
tokens) cannot decode the ids a dummy-weight model of the real vocabulary size (151,936;
51,866) generates, so the runs would need ``detokenize=False`` and would have no text to
compare. Each missing id gets a vocabulary entry ``Ġ<ID>`` (decoded as " <ID>") that no merge
produces, so prompts tokenize exactly as before and a generated text spells its token ids:
greedy outputs can be compared between configurations by their texts.

usage: full_vocab.py SRC_FOLDER DEST_FOLDER [--config JSON]
  --config: values merged into DEST's config.json, e.g. fewer and narrower layers for a run on
  a CPU ('{"encoder_layers": 2, ...}'); the benchmark itself runs the folder's own shape.
"""

import argparse
import json
import shutil
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("src", type=Path)
ap.add_argument("dest", type=Path)
ap.add_argument("--config", default="{}", help="JSON merged into the copy's config.json")
args = ap.parse_args()
src, dest = args.src.resolve(), args.dest.resolve()
config = json.loads((src / "config.json").read_text())
tok = json.loads((src / "tokenizer.json").read_text())
if dest.exists():
    shutil.rmtree(dest)
shutil.copytree(src, dest)
size = config.get("text_config", config).get("vocab_size") or config["vocab_size"]
vocab = tok["model"]["vocab"]
used = set(vocab.values()) | {a["id"] for a in tok["added_tokens"]}
for i in range(size):
    if i not in used:
        token = f"Ġ<{i}>"
        assert token not in vocab, token
        vocab[token] = i
assert len(set(vocab.values()) | {a["id"] for a in tok["added_tokens"]}) == size
(dest / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))
changes = json.loads(args.config)
if changes:
    config.update(changes)
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
shape = f", config changed: {json.dumps(changes)}" if changes else ""
print(f"{dest}: tokenizer of {size} ids ({(dest / 'tokenizer.json').stat().st_size} bytes){shape}")
