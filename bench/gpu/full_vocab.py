"""Copy the Qwen2.5-VL-3B-shaped checkpoint folder with a tokenizer that can decode every id
of the model's vocabulary.

The folder's tiny tokenizer (327 entries) cannot decode the ids a dummy-weight model of the
real vocabulary size (151,936) generates, so the earlier runs needed ``detokenize=False`` and
had no text to compare. Each missing id gets a vocabulary entry ``Ġ<ID>`` (decoded as " <ID>")
that no merge produces, so prompts tokenize exactly as before and a generated text spells its
token ids: greedy outputs can be compared between configurations by their texts.

usage: full_vocab.py SRC_FOLDER DEST_FOLDER
"""

import json
import shutil
import sys
from pathlib import Path

src, dest = Path(sys.argv[1]), Path(sys.argv[2])
if dest.exists():
    shutil.rmtree(dest)
shutil.copytree(src, dest)
config = json.loads((src / "config.json").read_text())
size = config.get("text_config", config).get("vocab_size") or config["vocab_size"]
tok = json.loads((src / "tokenizer.json").read_text())
vocab = tok["model"]["vocab"]
used = set(vocab.values()) | {a["id"] for a in tok["added_tokens"]}
for i in range(size):
    if i not in used:
        token = f"Ġ<{i}>"
        assert token not in vocab, token
        vocab[token] = i
assert len(set(vocab.values()) | {a["id"] for a in tok["added_tokens"]}) == size
(dest / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))
print(f"{dest}: tokenizer of {size} ids ({(dest / 'tokenizer.json').stat().st_size} bytes)")
