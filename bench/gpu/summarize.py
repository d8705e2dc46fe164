"""Summarize the GPU run's results: one line per mmrun run, and the throughput comparison."""

import json
import sys
from pathlib import Path

res = Path(sys.argv[1])
rows = {}
for path in sorted(res.glob("*.json")):
    text = path.read_text().strip()
    if not text.startswith("{"):
        continue
    doc = json.loads(text)
    outs = doc["outputs"]
    t = doc["timings"]
    rows[path.stem] = doc
    print(
        f"{path.stem}: outputs={len(outs)} prompt_tokens={[o['prompt_tokens'] for o in outs][:3]} "
        f"completion_tokens={sum(o['completion_tokens'] for o in outs)} "
        f"engine_start={t.get('engine_start_s')} generate={t.get('generate_s')} "
        f"media={t.get('media_s')} prepare={t.get('prepare_s')} vllm={doc['versions']['vllm']}"
    )
for path in sorted(res.glob("raw-*.log")):
    for line in path.read_text().splitlines():
        if line.startswith(("RESULT", "ENGINE_INIT", "WARMUP")):
            print(f"{path.stem}: {line}")
for name, doc in rows.items():
    if not name.startswith("mmrun-batch"):
        continue
    t = doc["timings"]
    outs = doc["outputs"]
    n = len(outs)
    gen = t["generate_s"]
    pt = sum(o["prompt_tokens"] for o in outs)
    ot = sum(o["completion_tokens"] for o in outs)
    print(
        "RESULT_MMRUN "
        + json.dumps(
            {
                "run": name,
                "n_prompts": n,
                "images": len(doc["media"]),
                "batch_wall_s": round(gen, 3),
                "prompts_per_s": round(n / gen, 2),
                "images_per_s": round(len(doc["media"]) / gen, 2),
                "output_tok_per_s": round(ot / gen, 1),
                "total_tok_per_s": round((pt + ot) / gen, 1),
                "engine_start_s": t.get("engine_start_s"),
                "warmup_s": t.get("warmup_s"),
                "media_s": t.get("media_s"),
                "prepare_s": t.get("prepare_s"),
                "total_s": t.get("total_s"),
            }
        )
    )
