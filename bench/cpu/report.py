"""The CPU section of docs/performance.md, rendered from one run's results.

Only the text between ``<!-- cpu:begin -->`` and ``<!-- cpu:end -->`` is rewritten; every byte
outside the markers is kept as it is.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

BEGIN = b"<!-- cpu:begin -->"
END = b"<!-- cpu:end -->"

STARTUP_S, STARTUP_MIB = 0.3, 80.0
MEDIA_SPEEDUP, WARM_S = 6.0, 0.050
OVERLAP_COLD, OVERLAP_WARM = 0.9, 1.05
BATCH_SPEEDUP = 5.0
MMRUN_ONE_CALL = 1.5  # mmrun's generate_s within this factor of the one-call figure
CACHE_SHARE = 0.02  # a saving worth a disk cache: at least this share of a whole run
STREAM_RATIO = 0.95  # issue 11: a streamed batch at least this share of one call's throughput


def write(doc: Path, section: str) -> None:
    data = doc.read_bytes()
    if data.count(BEGIN) != 1 or data.count(END) != 1 or data.index(BEGIN) > data.index(END):
        raise RuntimeError(f"{doc} must hold one {BEGIN.decode()} ... {END.decode()} pair")
    head, rest = data.split(BEGIN)
    _, tail = rest.split(END)
    doc.write_bytes(head + BEGIN + b"\n" + section.strip().encode() + b"\n" + END + tail)


def _s(x: float) -> str:
    if x >= 10:
        return f"{x:.1f} s"
    if x >= 1:
        return f"{x:.2f} s"
    return f"{x:.3f} s"


def _ms(x: float) -> str:
    return f"{x * 1000:.0f} ms"


def _x(x: float) -> str:
    return f"{x:.2f}x"


def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}"


FIGURE_NUMBERS = {
    "startup": 1,
    "media": 2,
    "overlap": 3,
    "batching": 4,
    "repeat": 5,
    "loops": 6,
    "stream": 7,
}


def _figures(names: list[str]) -> str:
    numbers = sorted(FIGURE_NUMBERS[n] for n in names)
    text = ", ".join(str(n) for n in numbers[:-1])
    return f"figures {text} and {numbers[-1]}" if text else f"figure {numbers[-1]}"


def _source(src: dict[str, Any], end: dict[str, Any]) -> str:
    state = (
        "with changes to mmrun/ not yet committed"
        if src["mmrun_modified"]
        else "mmrun/ as committed"
    )
    if src["sha256"] == end["sha256"]:
        return f"mmrun: commit {src['commit']}, {state}; mmrun/ did not change during the run."
    changed = sorted(
        k
        for k in set(src["files"]) | set(end["files"])
        if src["files"].get(k) != end["files"].get(k)
    )
    return (
        f"mmrun: commit {src['commit']} at the start, {end['commit']} at the end: "
        f"**mmrun/ changed during the run** ({', '.join(f'`{c}`' for c in changed)}); "
        "runs after the change measured the new code."
    )


def render(r: dict[str, Any]) -> str:
    m = r["machine"]
    loads = [s["load1"] for s in r["load_samples"]]
    updates = r.get("updates", [])
    later = [f for u in updates for f in u["figures"]]
    out: list[str] = []
    add = out.append
    add(f"## CPU: vLLM's CPU build on {m['nproc']} cores ({r['date']})")
    add("")
    add(
        f"Written by `{r['command']}` (`.venv/bin/python -m bench.cpu`, the code in "
        "[bench/cpu](../bench/cpu)) in one run of "
        f"{r['duration_s'] / 60:.1f} minutes, on {m['nproc']} cores ({m['cpu_model']}), "
        f"{m['mem_gib']} GiB, no GPU; {m['vllm']}, torch {m['torch']}, Python {m['python']}. "
        f"Load average (1 min) at the start {r['load_average_start'][0]:.2f}, at the end "
        f"{r['load_average_end'][0]:.2f}, at the start of each figure "
        f"{', '.join(f'{v:.2f}' for v in loads)} (other processes shared the machine: "
        "figures that need CPU time are slower when it is loaded). "
        "Raw numbers: [bench/cpu/results.json](../bench/cpu/results.json). Every number on this "
        "page comes from that run"
        + (f", except {_figures(later)}, measured later (below)" if later else "")
        + "; times are medians, each ratio is between two medians of the same run."
    )
    add("")
    add(_source(r["mmrun_source_start"], r["mmrun_source_end"]))
    add("")
    for u in updates:
        um = u["machine"]
        add(
            f"{_figures(u['figures']).capitalize()}: measured by `{u['command']}` (started "
            f"{u['started_utc']}, {u['duration_s'] / 60:.1f} minutes), which ran only "
            f"{'them' if len(u['figures']) > 1 else 'it'} and put the results into "
            f"results.json; {um['nproc']} cores, {um['vllm']}, torch {um['torch']}, Python "
            f"{um['python']}. Load average (1 min) at its start "
            f"{u['load_average_start'][0]:.2f}, at its end {u['load_average_end'][0]:.2f}. "
            + _source(u["mmrun_source_start"], u["mmrun_source_end"])
            + " `make bench` measures every figure again in one run."
        )
        add("")
    add("### Summary")
    add("")
    add("| figure | mmrun | baseline | ratio | target | met? |")
    add("|---|---|---|---|---|---|")
    rows, notes = _summary(r)
    out += rows
    if "loops" in r:
        out += _loops_summary(r)
    if "stream" in r:
        stream_rows, stream_notes = _stream_summary(r)
        out += stream_rows
        notes += stream_notes
    add("")
    out += _startup(r)
    out += _media(r)
    out += _overlap(r)
    out += _batching(r)
    out += _repeat(r)
    if "loops" in r:
        out += _loops(r)
    if "stream" in r:
        out += _stream(r)
    if notes:
        add("### Targets missed")
        add("")
        out += notes
        add("")
    return "\n".join(out)


def _summary(r: dict[str, Any]) -> tuple[list[str], list[str]]:
    rows: list[str] = []
    notes: list[str] = []
    st = r["startup"]
    base = st["baseline"]
    for command, c in st["commands"].items():
        heavy = [k for k, v in c["heavy_imported"].items() if v]
        ok = c["median_wall_s"] <= STARTUP_S and c["max_maxrss_mib"] <= STARTUP_MIB and not heavy
        rows.append(
            f"| start-up: `mmrun {command}` | {_s(c['median_wall_s'])}, "
            f"{c['max_maxrss_mib']:.0f} MiB, imports {', '.join(heavy) or 'no vllm/torch/transformers'} "
            f"| audio seed `--help`: {_s(base['median_wall_s'])}, {base['median_maxrss_mib']:.0f} MiB "
            f"| {_x(c['median_wall_s'] / base['median_wall_s'])} time | "
            f"≤ {STARTUP_S} s, ≤ {STARTUP_MIB:.0f} MiB, none of the three | {_yes(ok)} |"
        )
        if not ok:
            notes.append(
                f"- `mmrun {command}`: {_s(c['median_wall_s'])} median wall time "
                f"(min {min(c['wall_s']):.3f} s), {c['max_maxrss_mib']:.0f} MiB peak, heavy "
                f"imports: {', '.join(heavy) or 'none'}; its median CPU time was "
                f"{_s(c['median_cpu_s'])}, of which imports {c['import_total_ms']:.0f} ms "
                "(one `-X importtime` run; largest: "
                + ", ".join(f"`{k}` {v:.0f} ms" for k, v in c["largest_imports_ms"].items())
                + ")."
            )
    md = r["media"]
    ok_cold = md["speedup_cold"] >= MEDIA_SPEEDUP
    rows.append(
        f"| media, cold cache: 12 images, {_ms(r['latency_s'])} a request "
        f"| {_s(md['median_cold_s'])} | one after the other (urllib + Pillow): "
        f"{_s(md['median_baseline_s'])} | {md['speedup_cold']:.2f}x faster "
        f"| ≥ {MEDIA_SPEEDUP:.0f}x faster | {_yes(ok_cold)} |"
    )
    first = md["first_in_process"]
    rows.append(
        f"| media, cold, first use in a fresh process (imports included) "
        f"| {_s(first['median_mmrun_s'])} | {_s(first['median_baseline_s'])} "
        f"| {first['speedup']:.2f}x faster | (same) | {_yes(first['speedup'] >= MEDIA_SPEEDUP)} |"
    )
    warm_requests = sum(md["warm_requests"])
    ok_warm = md["median_warm_s"] < WARM_S and warm_requests == 0
    rows.append(
        f"| media, warm cache: 12 images | {_ms(md['median_warm_s'])}, {warm_requests} requests "
        f"| (cold, one after the other: {_s(md['median_baseline_s'])}) "
        f"| {md['median_baseline_s'] / md['median_warm_s']:.0f}x faster "
        f"| < {_ms(WARM_S)}, 0 requests | {_yes(ok_warm)} |"
    )
    if not ok_cold:
        wi = md["what_if"]
        parts = [
            f"- Media, cold ({md['speedup_cold']:.2f}x, target {MEDIA_SPEEDUP:.0f}x): "
            f"{md['download_workers']} download workers; one resolve built "
            f"{md['http_clients_built_per_cold_resolve']} `httpx.Client` object(s)."
        ]
        labels = {
            "shared_client": "with one client built before the workers start",
            "12_workers": "with 12 workers",
            "shared_client_12_workers": "with both",
            "no_fsync": "without the fsync of each downloaded file",
        }
        for name, w in wi.items():
            parts.append(
                f"Measured in the same run, {labels[name]}: {_s(w['median_s'])} "
                f"({w['speedup']:.2f}x)."
            )
        parts.append(
            f"{_ms(r['latency_s'])} of each request is the server's wait; the rest is "
            "CPU time (receiving, writing and decoding 4-5 MB of JPEG) on 2 cores that "
            "other processes shared."
        )
        notes.append(" ".join(parts))
    if not ok_warm:
        b = md["warm_sequential_breakdown_s"]
        notes.append(
            f"- Media, warm ({_ms(md['median_warm_s'])}, target < {_ms(WARM_S)}): no request is "
            f"made; the time is decoding. The same 12 cached files read and hashed one after the "
            f"other take {_ms(b['read_and_sha256'])}, decoded one after the other "
            f"{_ms(b['decode'])} ({b['bytes'] / 1e6:.1f} MB of JPEG, 1-1.5 megapixels each), so "
            f"even a perfect split over {r['machine']['nproc']} cores leaves "
            f"{_ms(b['decode'] / r['machine']['nproc'])} of decoding."
        )
    ov = r["overlap"]
    med = ov["median_wall_s"]
    ok3 = ov["ratio_cold"] <= OVERLAP_COLD
    ok4 = ov["ratio_warm"] <= OVERLAP_WARM
    rows.append(
        f"| overlap, cold media: time to result, 12 images | {_s(med['mmrun_cold'])} "
        f"| seed's order (fetch, then start vLLM): {_s(med['seed_order'])} "
        f"| {_x(ov['ratio_cold'])} | ≤ {OVERLAP_COLD}x | {_yes(ok3)} |"
    )
    rows.append(
        f"| overlap, cached media: time to result | {_s(med['mmrun_warm'])} "
        f"| minimal vLLM script: {_s(med['min_vllm'])} | {_x(ov['ratio_warm'])} "
        f"| ≤ {OVERLAP_WARM}x | {_yes(ok4)} |"
    )
    printed = ov["median_result_s"]
    for kind, base_kind, label, base_label in (
        ("mmrun_cold", "seed_order", "cold media", "seed's order"),
        ("mmrun_warm", "min_vllm", "cached media", "minimal vLLM script"),
    ):
        rows.append(
            f"| overlap, {label}: until the result is printed (exit not counted) "
            f"| {_s(printed[kind])} | {base_label}: {_s(printed[base_kind])} "
            f"| {_x(printed[kind] / printed[base_kind])} | (shown, no target) | |"
        )
    phases = _overlap_phases(ov)
    for ok, kind, base_kind, label, target in (
        (ok3, "mmrun_cold", "seed_order", "cold media", OVERLAP_COLD),
        (ok4, "mmrun_warm", "min_vllm", "cached media", OVERLAP_WARM),
    ):
        if ok:
            continue
        a, b = phases[kind], phases[base_kind]
        notes.append(
            f"- Overlap, {label}: {_x(med[kind] / med[base_kind])} of the baseline's wall time "
            f"(target ≤ {target}x). Medians, mmrun vs baseline: ready to start the engine "
            f"{_s(a['ready'])} vs {_s(b['ready'])}; engine start {_s(a['engine'])} vs "
            f"{_s(b['engine'])}; after it, before the result is printed "
            f"{_s(a['wait'] + a['generate'] + a['other'])} vs "
            f"{_s(b['wait'] + b['generate'] + b['other'])}; result printed at {_s(a['result'])} "
            f"vs {_s(b['result'])}; then exit (engine stop, interpreter exit) {_s(a['exit'])} "
            f"vs {_s(b['exit'])}. Wall times ranged {_spread(walls_of(ov, kind))} s vs "
            f"{_spread(walls_of(ov, base_kind))} s."
        )
    ba = r["batching"]
    ip = ba["in_process"]
    ok5 = ba["speedup"] >= BATCH_SPEEDUP
    rows.append(
        f"| batching: {ba['prompts']} prompts x {ba['images_per_prompt']} images, one "
        f"`generate` call | {_s(ip['batched']['s'])} ({ip['batched']['prompts_per_s']:.0f} prompts/s) "
        f"| {ba['prompts']} calls: {_s(ip['separate']['s'])} "
        f"({ip['separate']['prompts_per_s']:.1f} prompts/s) | {ba['speedup']:.2f}x faster "
        f"| ≥ {BATCH_SPEEDUP:.0f}x | {_yes(ok5)} |"
    )
    gen = ba["mmrun"]["timings"]["generate_s"]
    calls = ba["mmrun"]["llm_calls"]
    sent = sum(c["prompts"] * c.get("times", 1) for c in calls)
    ok6 = gen < ba["one_call_threshold_s"] and sent == ba["prompts"] + _warmup(ba["mmrun"])
    rows.append(
        f"| batching: mmrun `--num-prompts {ba['prompts']}`, its `generate_s` | {_s(gen)}; "
        f"{_calls(calls, ba['mmrun'].get('engine_steps'))} "
        f"| one call: {_s(ip['batched']['s'])}; {ba['prompts']} calls: {_s(ip['separate']['s'])} "
        f"| {_x(ba['mmrun_vs_one_call'])} of one call | one call: nearer the one-call time "
        f"(below {_s(ba['one_call_threshold_s'])}, their geometric mean) | {_yes(ok6)} |"
    )
    if not ok5:
        notes.append(
            f"- Batching: one call is {ba['speedup']:.2f}x faster than "
            f"{ba['prompts']} calls (target {BATCH_SPEEDUP:.0f}x)."
        )
    if not ok6:
        notes.append(
            f"- mmrun's batch: {_s(gen)} vs {_s(ip['batched']['s'])} for one call and "
            f"{_s(ip['separate']['s'])} for {ba['prompts']} calls in the in-process run."
        )
    rp = r["repeat"]
    run_s = med["mmrun_warm"]
    share = rp["saving_s"] / run_s
    rows.append(
        f"| repeat runs: chat-template rendering a cache would skip | {_s(rp['saving_s'])} "
        f"| whole run (cached media): {_s(run_s)} | {share * 100:.2f}% of the run "
        f"| cache if ≥ {CACHE_SHARE * 100:.0f}% | "
        f"{'cache it' if share >= CACHE_SHARE else 'not cached'} |"
    )
    return rows, notes


def _warmup(mm: dict[str, Any]) -> int:
    """mmrun's ``--warmup`` prompts in figure 4 (results written before "warmup_prompts" was
    recorded have it in their command line only)."""
    if "warmup_prompts" in mm:
        return int(mm["warmup_prompts"])
    match = re.search(r"--warmup (\d+)", mm.get("command", ""))
    return int(match.group(1)) if match else 0


def _calls(calls: list[dict[str, Any]], steps: int | None) -> str:
    """``LLM.enqueue`` x34 (1 prompt each), 20 engine steps."""
    parts = [
        f"`LLM.{c['method']}` x{c.get('times', 1)} ({c['prompts']} prompt"
        f"{'s' if c['prompts'] != 1 else ''} each)"
        for c in calls
    ]
    text = ", ".join(parts) or "no `LLM` call"
    if steps is not None:
        text += f", {steps} engine steps"
    return text


def _startup(r: dict[str, Any]) -> list[str]:
    st = r["startup"]
    out = [
        "### 1. Start-up",
        "",
        f"Each command {st['reps']} times (interleaved): wall time from spawn to exit and peak "
        "RSS (`ru_maxrss` from `os.wait4` on the child); imports from one more run under "
        "`python -X importtime`. Baseline: the audio seed script "
        "(`tests/golden/seeds/004_c7a6148f2ec898b4.txt` minus its first line) run with "
        f"`--help`, {st['seed_reps']} time{'s' if st['seed_reps'] > 1 else ''}: it imports vLLM "
        "before parsing its arguments. Each command is spawned from a small launcher "
        "(`bench/cpu/workers/measure.py`): a child's `ru_maxrss` includes the memory of the "
        "process it was forked from.",
        "",
        "| command | median wall | min-max | median CPU time | peak RSS (max) "
        "| vllm / torch / transformers imported | top-level packages imported |",
        "|---|---|---|---|---|---|---|",
    ]
    for command, c in st["commands"].items():
        heavy = " / ".join("yes" if v else "no" for v in c["heavy_imported"].values())
        out.append(
            f"| `mmrun {command}` | {_s(c['median_wall_s'])} | {_spread(c['wall_s'])} s "
            f"| {_s(c['median_cpu_s'])} | {c['max_maxrss_mib']:.0f} MiB | {heavy} "
            f"| {c['modules']} |"
        )
    b = st["baseline"]
    out.append(
        f"| audio seed `--help` (baseline) | {_s(b['median_wall_s'])} "
        f"| {_spread(b['wall_s'])} s | {_s(b['median_cpu_s'])} "
        f"| {max(b['maxrss_mib']):.0f} MiB | yes (vLLM first) | |"
    )
    out.append("")
    return out


def _media(r: dict[str, Any]) -> list[str]:
    md = r["media"]
    images = r["images"]
    total = sum(i["bytes"] for i in images)
    first = md["first_in_process"]
    b = md["warm_sequential_breakdown_s"]
    out = [
        "### 2. Media",
        "",
        f"The 12 default image assets as generated photo-like JPEGs ({len(images)} files, "
        f"{min(i['bytes'] for i in images) // 1000}-{max(i['bytes'] for i in images) // 1000} KB, "
        f"{total / 1e6:.1f} MB in all, {images[0]['width']}x{images[0]['height']} to "
        f"{images[-1]['width']}x{images[-1]['height']}), served from 127.0.0.1 by a server that "
        f"waits {_ms(r['latency_s'])} before each answer (HTTP/1.1, in its own process), "
        "`MMRUN_ASSETS_BASE_URL` pointing at it. mmrun: one `mmrun.media.MediaResolver`, "
        "submit the 12 asset names, wait for all (a fresh `MMRUN_CACHE_DIR` for each cold "
        "run; decoded images are the result). Baseline: fetch each with `urllib.request`, "
        "decode with Pillow, then the next (the seed's order). Cold runs alternate "
        f"baseline and mmrun in one process ({len(md['cold_s'])} each, after one untimed round "
        f"of each); then {len(md['warm_s'])} warm runs on the last cache; then "
        f"{len(first['mmrun_s'])} fresh processes of each, timed from before their imports.",
        "",
        "| run | median | min-max | server requests |",
        "|---|---|---|---|",
        f"| baseline: one after the other, urllib + Pillow | {_s(md['median_baseline_s'])} "
        f"| {_spread(md['baseline_s'])} s | 12 each |",
        f"| mmrun, cold cache ({md['download_workers']} download workers) "
        f"| {_s(md['median_cold_s'])} | {_spread(md['cold_s'])} s "
        f"| {', '.join(str(n) for n in md['cold_requests'])} |",
        f"| mmrun, warm cache | {_ms(md['median_warm_s'])} "
        f"| {min(md['warm_s']) * 1000:.0f}-{max(md['warm_s']) * 1000:.0f} ms "
        f"| {', '.join(str(n) for n in md['warm_requests'])} |",
        f"| baseline, first use in a fresh process | {_s(first['median_baseline_s'])} "
        f"| {_spread(first['baseline_s'])} s | 12 each |",
        f"| mmrun, cold, first use in a fresh process | {_s(first['median_mmrun_s'])} "
        f"| {_spread(first['mmrun_s'])} s | 12 each |",
    ]
    labels = {
        "12_workers": "what-if: 12 download workers",
        "shared_client": "what-if: one HTTP client, built before the workers start",
        "shared_client_12_workers": "what-if: one HTTP client and 12 workers",
        "no_fsync": "what-if: no fsync of each downloaded file",
    }
    for name, w in md["what_if"].items():
        out.append(
            f"| {labels[name]} (not mmrun's code) | {_s(w['median_s'])} "
            f"| {_spread(md['what_if_cold_s'][name])} s | ({w['speedup']:.2f}x faster "
            "than the baseline) |"
        )
    out += [
        "",
        f"One cold resolve builds {md['http_clients_built_per_cold_resolve']} `httpx.Client` "
        "object(s) (counted in the same process); what-if rows appear only where mmrun's "
        "code differs from them. Warm, one after the other in one thread: "
        f"reading and hashing the 12 files {_ms(b['read_and_sha256'])}, decoding them "
        f"{_ms(b['decode'])}.",
        "",
    ]
    return out


def _overlap(r: dict[str, Any]) -> list[str]:
    ov = r["overlap"]
    runs = ov["runs"]
    ea = ov["engine_args"]
    tokens = runs["mmrun_cold"][0]["prompt_tokens"]

    out = [
        "### 3. Overlap: media and start-up vs the engine start",
        "",
        "The tiny random-weight Qwen2.5-VL checkpoint (`mmrun.tiny`, built once for the run), "
        f"{ov['num_images']} default images (vLLM counted {tokens} prompt tokens, "
        f"max_model_len {ea.get('max_model_len')}), `--max-tokens {ov['max_tokens']}`, "
        "`VLLM_CPU_KVCACHE_SPACE=1`, `HF_HUB_OFFLINE=1`, engine arguments "
        f"`{', '.join(f'{k}={v}' for k, v in ea.items() if k != 'model')}`. "
        f"Each kind {ov['reps']} time{'s' if ov['reps'] > 1 else ''}, in rotating order. "
        "Time to result: wall time from spawn to exit; also shown, the moment the result "
        "line reached stdout.",
        "",
        "- mmrun: `mmrun image -m qwen2_5_vl --model <tiny> -n 12 --max-tokens 8 --json "
        "--engine-arg ...`, with a fresh cache (cold, 12 requests to the 100 ms server) or "
        "the cache its dry run filled (warm, 0 requests).",
        "- seed's order (`bench/cpu/workers/seed_order.py`): import vLLM, render the prompt "
        "with the processor, fetch the 12 images one after the other (urllib + Pillow, the "
        "same resize as mmrun), start `vllm.LLM`, generate; the same prompt (checked equal to "
        "mmrun's), engine arguments and sampling.",
        "- minimal vLLM (`bench/cpu/workers/min_vllm.py`): import vLLM, read the 12 cached "
        "files, start `vllm.LLM`, generate with the prompt already rendered.",
        "",
        "| run | wall (min-max) | requests | ready to start the engine | engine start "
        "| waiting after it | generate | other, before printing | result printed at "
        "| exit after it |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    labels = {
        "mmrun_cold": "mmrun, cold cache",
        "seed_order": "seed's order",
        "mmrun_warm": "mmrun, cached media",
        "min_vllm": "minimal vLLM, cached media",
    }
    phases = _overlap_phases(ov)
    for kind in ("mmrun_cold", "seed_order", "mmrun_warm", "min_vllm"):
        walls = [x["wall_s"] for x in runs[kind]]
        p = phases[kind]
        requests = ", ".join(str(x["requests"]) for x in runs[kind])
        out.append(
            f"| {labels[kind]} | {_s(ov['median_wall_s'][kind])} ({_spread(walls)}) "
            f"| {requests} | {_s(p['ready'])} | {_s(p['engine'])} | {_s(p['wait'])} "
            f"| {_s(p['generate'])} | {_s(p['other'])} | {_s(p['result'])} "
            f"| {_s(p['exit'])} |"
        )
    loads = [x["load1"] for kind in runs for x in runs[kind]]
    cold = [x["timings"] for x in runs["mmrun_cold"]]
    # The chat template: rendered in a worker thread during the start (`render_wait_s`, what
    # was left of it after), or after the start (`render_s`), or before it (in `prepare_s`).
    threaded = any("render_wait_s" in t for t in cold)
    after = any("render_s" in t for t in cold)
    render_key = "render_wait_s" if threaded else "render_s" if after else None
    pairs = [
        (
            runs["mmrun_cold"][i]["wall_s"] / runs["seed_order"][i]["wall_s"],
            runs["mmrun_warm"][i]["wall_s"] / runs["min_vllm"][i]["wall_s"],
        )
        for i in range(ov["reps"])
    ]
    out += [
        "",
        "Medians of each phase, from mmrun's own `timings` and the moment its result line "
        'arrived. For mmrun, "ready" is its start-up plus `prepare_s` (its planning before '
        "the engine starts"
        + (
            "; the chat template is rendered in a worker thread while the engine starts"
            if threaded
            else "; the chat template is rendered once the engine has started"
            if after
            else ", rendering the chat template included"
        )
        + '); "waiting after it" is '
        + (f"`{render_key}` + " if render_key else "")
        + "`media_wait_s`, the rendering and what was left of the media once the engine had "
        'started; "other" is the rest of its `total_s` (building the batch, and any '
        "engine stop before printing). Cold, its media took "
        f"`media_s` {_s(med(cold, 'media_s'))} from the first request to the last decoded "
        'image, in worker threads while the engine started. For the scripts, "ready" is '
        'their imports, rendering and fetching. "exit after it" is, for the scripts, '
        "vLLM's own engine stop and the interpreter's exit; for mmrun, killing the engine's "
        "processes and ending the process once exit handlers have run and output is "
        "flushed (no interpreter teardown). Load average during these runs: "
        f"{min(loads):.2f}-{max(loads):.2f}. The same ratios within each round of four "
        "runs (run close together in time): cold "
        + ", ".join(f"{a:.2f}x" for a, _ in pairs)
        + "; cached "
        + ", ".join(f"{b:.2f}x" for _, b in pairs)
        + ".",
        "",
    ]
    return out


def walls_of(ov: dict[str, Any], kind: str) -> list[float]:
    return [x["wall_s"] for x in ov["runs"][kind]]


def med(timings: list[dict[str, float]], key: str) -> float:
    return float(statistics.median(t.get(key, 0.0) for t in timings))


def _overlap_phases(ov: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Median phases of each kind of run, in the same terms for mmrun and the scripts."""
    phases: dict[str, dict[str, float]] = {}
    for kind, runs in ov["runs"].items():
        rows = []
        for x in runs:
            result = x["result_s"]
            if kind.startswith("mmrun"):
                t = x["timings"]
                ready = (result - t["total_s"]) + t["prepare_s"]
                engine = t["engine_start_s"]
                wait = (
                    t.get("render_wait_s", 0.0)
                    + t.get("render_s", 0.0)
                    + t.get("media_wait_s", 0.0)
                )
                generate = t["generate_s"]
                other = t["total_s"] - t["prepare_s"] - engine - wait - generate
            else:
                p = x["phases_s"]
                ready = p.get("fetched", p.get("read", 0.0))
                engine = p["engine_started"] - ready
                generate = p["generated"] - p["engine_started"]
                wait = other = 0.0
            rows.append(
                {
                    "ready": ready,
                    "engine": engine,
                    "wait": wait,
                    "generate": generate,
                    "other": other,
                    "result": result,
                    "exit": x["wall_s"] - result,
                }
            )
        phases[kind] = {k: float(statistics.median(r[k] for r in rows)) for k in rows[0]}
    return phases


def _batching(r: dict[str, Any]) -> list[str]:
    ba = r["batching"]
    ip = ba["in_process"]
    mm = ba["mmrun"]
    ea = ba["engine_args"]

    def row(label: str, part: dict[str, Any], seconds: float) -> str:
        return (
            f"| {label} | {_s(seconds)} | {part['prompts']} | {part['prompts_per_s']:.1f} "
            f"| {part['prompt_tokens']} | {part['prompt_tokens_per_s']:.0f} "
            f"| {part['completion_tokens']} | {part['completion_tokens_per_s']:.0f} |"
        )

    return [
        "### 4. Batching",
        "",
        f"The same tiny checkpoint, {ba['prompts']} prompts of {ba['images_per_prompt']} "
        "distinct 224x224 images each (no image in two prompts), "
        f"`max_tokens={ba['max_tokens']}` with `ignore_eos`, engine arguments "
        f"`{', '.join(f'{k}={v}' for k, v in ea.items() if k != 'model')}` "
        "(max_num_seqs raised from the checkpoint's 2 so a batch can run as one; vLLM's "
        "multimodal processor cache off so no image is processed faster a second time). "
        "In one process, one `vllm.LLM` (`bench/cpu/workers/batch.py`): a 2-prompt warm-up, "
        "one call with 32 prompts, then rounds of 32 calls of one prompt and one call with "
        "32 more prompts (each set of images new); "
        + (
            f"the figures are medians of {len(ip['separate']['all_s'])} rounds (32 calls: "
            + ", ".join(f"{x:.2f}" for x in ip["separate"]["all_s"])
            + " s; one call: "
            + ", ".join(f"{x:.3f}" for x in ip["batched"]["all_s"])
            + " s). "
            if "all_s" in ip["separate"]
            else "one round. "
        )
        + "Token counts are vLLM's own (`len(prompt_token_ids)`, "
        "`len(outputs[0].token_ids)`). Then mmrun in its own process: "
        f"`{mm['command']}`.",
        "",
        "| run | time | prompts | prompts/s | prompt tokens | prompt tok/s | output tokens "
        "| output tok/s |",
        "|---|---|---|---|---|---|---|---|",
        row("one call, first large batch", ip["batched_first"], ip["batched_first"]["s"]),
        row(
            f"{ba['prompts']} calls, one prompt each (median)", ip["separate"], ip["separate"]["s"]
        ),
        row("one call, new images (median; the figure above)", ip["batched"], ip["batched"]["s"]),
        row("mmrun `--num-prompts 32`: its `generate_s`", mm, mm["timings"]["generate_s"]),
        "",
        "What mmrun asked of vLLM's `LLM` (noted by `bench/cpu/workers/count_calls.py`, "
        "which runs the CLI unchanged): "
        + _calls(mm["llm_calls"], mm.get("engine_steps"))
        + f" ({_warmup(mm)} for the `--warmup`, then the batch"
        + (
            ": mmrun submits one prompt at a time and collects results from the engine's own "
            "step loop"
            if any(c["method"].startswith("enqueue") for c in mm["llm_calls"])
            else ""
        )
        + "). Its whole run took "
        f"{_s(mm['wall_s'])} (its timings: "
        + ", ".join(f"{k} {v:.2f}" for k, v in mm["timings"].items())
        + ").",
        "",
    ]


def _repeat(r: dict[str, Any]) -> list[str]:
    rp = r["repeat"]
    run_s = r["overlap"]["median_wall_s"]["mmrun_warm"]
    share = rp["saving_s"] / run_s
    out = [
        "### 5. Repeat runs: what a second run could read from disk",
        "",
        "Per model, mmrun renders the chat template with the model's processor "
        "(`mmrun.templates.HFTemplateRenderer(<tiny>).render(...)`, the 12-image prompt); "
        "`mmrun.support.vllm_info()` reads vLLM's model registry. Each row is a fresh "
        "process (`bench/cpu/workers/render.py`), in turn: mmrun's order (its load and render, "
        "then what `vllm.LLM(...)` does in the main process in any case: import vLLM and load "
        "the same processor through vLLM's helper), and vLLM's part first.",
        "",
        "| process | import transformers | load processor | load again | render "
        "| vllm_info | import vLLM | vLLM loads the processor | all |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, p in enumerate(rp["alone"], 1):
        out.append(
            f"| {i}: mmrun's order | {_s(p['import_transformers_s'])} "
            f"| {_s(p['load_processor_s'])} | {_s(p['load_processor_again_s'])} "
            f"| {_ms(p['render_s'])} | {_ms(p['vllm_info_s'])} | {_s(p['import_vllm_s'])} "
            f"| {_s(p['vllm_loads_processor_s'])} | {_s(p['total_s'])} |"
        )
    for i, p in enumerate(rp["after_vllm"], 1):
        out.append(
            f"| {i}: vLLM's part first | | {_s(p['load_processor_s'])} | "
            f"| {_ms(p['render_s'])} | | {_s(p['import_vllm_s'])} "
            f"| {_s(p['vllm_loads_processor_s'])} | {_s(p['total_s'])} |"
        )
    out += [
        "",
        "The first load's time is imports (torch and the image and video processor modules), "
        "not files: the second process is no faster, a second load in the same process "
        "is quick, and whichever comes first of mmrun's load and vLLM's pays them (the "
        f"totals differ by {rp['order_difference_s']:+.2f} s between the two orders). Once "
        f"vLLM's part is done, mmrun's load and render add {_s(rp['saving_s'])} (median): "
        f"that is what a cached prompt would save, {share * 100:.2f}% of the {_s(run_s)} "
        "run with cached media.",
        "",
    ]
    if share >= CACHE_SHARE:
        out.append(
            f"Conclusion: worth caching: it costs {_s(rp['saving_s'])} of a {_s(run_s)} run."
        )
    else:
        out.append(f"Conclusion: not cached: it costs {_s(rp['saving_s'])} of a {_s(run_s)} run.")
    out.append("")
    return out


LOOP_LABELS = {
    "one_call": "one `LLM.generate` call, all prompts (baseline)",
    "windows": "windows: `LLM.generate` calls of {w} prompts, one after the other",
    "async": "`AsyncLLM`, at most {w} in flight (asyncio)",
    "enqueue": "mmrun's `Engine`: `LLM.enqueue` + `llm_engine.step()`, window {w}",
}


def _loop_label(kind: str, default: int | None = None) -> str:
    kind = kind.removeprefix("varied-")
    if kind == "one_call":
        return LOOP_LABELS[kind]
    name, w = kind.rsplit("_", 1)
    label = LOOP_LABELS[name].format(w=w)
    if default is not None and int(w) == default:
        label += " (default)" if name == "enqueue" else " (2 x max_num_seqs)"
    return label


def _loops_summary(r: dict[str, Any]) -> list[str]:
    lp = r["loops"]
    med_ = lp["median"]
    base = med_["one_call"]
    rows = []
    w = lp["default_window"]
    for name in ("enqueue", "async", "windows"):
        m = med_[f"{name}_{w}"]
        ratio = base["s"] / m["s"]
        target = f"≥ {STREAM_RATIO}x" if name == "enqueue" else "(compared)"
        met = _yes(ratio >= STREAM_RATIO) if name == "enqueue" else ""
        rows.append(
            f"| engine loop, {lp['prompts']} prompts x {lp['images_per_prompt']} images: "
            f"{_loop_label(f'{name}_{w}', w)} | {_s(m['s'])} ({m['prompts_per_s']:.0f} prompts/s), "
            f"first result at {_s(m['first_s'])} | {_s(base['s'])} ({base['prompts_per_s']:.0f} "
            f"prompts/s), every result at the end | {_x(ratio)} the one-call throughput "
            f"| {target} | {met} |"
        )
    return rows


def _stream_summary(r: dict[str, Any]) -> tuple[list[str], list[str]]:
    st = r["stream"]
    one, mm, bad = (_stream_medians(st, k) for k in ("one_call", "mmrun", "mmrun_bad"))
    ratio = st["throughput_ratio"]
    ok = ratio >= STREAM_RATIO
    rows = [
        f"| streamed batch (`--input` + `-o`), {st['prompts']} prompts x "
        f"{st['images_per_prompt']} images: throughput once the engine is up "
        f"| {st['prompts'] / st['mmrun_generate_s']:.0f} prompts/s (last line "
        f"{_s(st['mmrun_generate_s'])} after the engine started) | one `generate` call: "
        f"{st['prompts'] / st['one_call_generate_s']:.0f} prompts/s ({_s(st['one_call_generate_s'])}) "
        f"| {_x(ratio)} (within a round: {_x(st['paired_ratio'])}) | ≥ {STREAM_RATIO}x "
        f"| {_yes(ok)} |",
        f"| streamed batch: CPU seconds from the engine's start to the last result (all "
        f"processes) | {_s(st['mmrun_cpu_s'])} | one call: {_s(st['one_call_cpu_s'])} "
        f"| {_x(st['one_call_cpu_s'] / st['mmrun_cpu_s'])} (within a round: "
        f"{_x(st['cpu_ratio'])}) | (shown: less sensitive to the machine's load) | |",
        f"| streamed batch: first result line | {_s(mm['first_line_s'])} after process start "
        f"({_s(mm['first_after_ready_s'])} after the engine started) | one call: results at "
        f"{_s(one['result_s'])} ({_s(one['generate_s'])} after the engine started) "
        f"| {_x(mm['first_after_ready_s'] / one['generate_s'])} of the call, after the start "
        "| far below the one-call time | (shown) |",
        f"| streamed batch: peak RSS | mmrun's process {mm['frontend_peak_mib']:.0f} MiB, "
        f"engine processes {mm['engine_peak_mib']:.0f} MiB | script: "
        f"{one['frontend_peak_mib']:.0f} MiB, engine processes {one['engine_peak_mib']:.0f} MiB "
        f"| {_x(mm['frontend_peak_mib'] / one['frontend_peak_mib'])} | (shown) | |",
    ]
    bad_runs = st["runs"]["mmrun_bad"]
    finished = all(
        b["output"]["ok"] == st["prompts"] - 1
        and len(b["output"]["errors"]) == 1
        and b["output"]["errors"][0]["id"] == f"p{st['bad_index']:03d}"
        and b["returncode"] == 3
        for b in bad_runs
    )
    rows.append(
        f"| streamed batch: one prompt over max_model_len | {st['bad_item_extra_s'] * 1000:+.0f} ms "
        f"from the engine's start to the last line, {st['bad_item_extra_cpu_s']:+.2f} CPU s; "
        f"{bad['ok']:.0f} done, 1 error line (stage `{bad_runs[0]['output']['errors'][0]['stage']}`), "
        f"exit {bad_runs[0]['returncode']} | the same batch without it | | the others finish "
        f"| {_yes(finished)} |"
    )
    notes = []
    if not ok:
        notes.append(
            f"- Streamed batch: {_x(ratio)} of the one-call throughput (target {STREAM_RATIO}x; "
            f"within a round {_x(st['paired_ratio'])}, in CPU seconds within a round "
            f"{_x(st['cpu_ratio'])}); "
            f"mmrun's own `generate_s` (median) {_s(mm['generate_s'])}, its last line "
            f"{_s(mm['generate_external_s'])} after the engine started, the call "
            f"{_s(one['generate_s'])}."
        )
    return rows, notes


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " ..."


def _short_paths(text: str | None) -> str:
    """A summary line without the run's temporary folder."""
    return re.sub(r"/\S*/(out[-\w]*\.jsonl)", r"\1", text or "")


def _stream_medians(st: dict[str, Any], kind: str) -> dict[str, float]:
    runs = st["runs"][kind]
    keys = [
        "wall_s",
        "engine_ready_s",
        "frontend_peak_mib",
        "engine_peak_mib",
        "frontend_cpu_s",
        "engine_cpu_s",
        *(
            ["result_s", "generate_s"]
            if kind == "one_call"
            else ["first_line_s", "last_line_s", "generate_external_s", "first_after_ready_s"]
        ),
    ]
    out = {k: float(statistics.median(x[k] for x in runs)) for k in keys}
    if kind != "one_call":
        out["generate_s"] = med([x["timings"] for x in runs], "generate_s")
        out["first_result_s"] = med([x["timings"] for x in runs], "first_result_s")
        out["ok"] = float(statistics.median(x["output"]["ok"] for x in runs))
    return out


def _loops(r: dict[str, Any]) -> list[str]:
    lp = r["loops"]
    ea = lp["engine_args"]
    med_ = lp["median"]
    base = med_["one_call"]
    runs = lp["runs"]
    loads = [x["load1"] for k in runs for x in runs[k]]
    out = [
        "### 6. Engine loops for a batch",
        "",
        f"The tiny checkpoint, {lp['prompts']} prompts of {lp['images_per_prompt']} distinct "
        f"224x224 images each, `max_tokens={lp['max_tokens']}` with `ignore_eos`, engine "
        f"arguments from mmrun's own dry run: "
        f"`{', '.join(f'{k}={v}' for k, v in ea.items() if k != 'model')}`. "
        "In one process (`bench/cpu/workers/loops.py`): one `vllm.LLM` and one `AsyncLLM` "
        "(each with its own engine processes), a warm-up of 2 x max_num_seqs prompts "
        f"through each, then {lp['rounds']} round{'s' if lp['rounds'] > 1 else ''}; in each "
        "round every loop runs once (1.5 s after the last, so that the other engine's "
        "worker has stopped polling), in "
        "an order rotated from round to round, on images of its own (vLLM's prefix cache "
        "would serve a repeated image from the KV cache). Each loop gets the same prompts, "
        "rendered and with decoded images, made before its clock starts; its clock stops "
        "at its last result. mmrun's loop is `mmrun.engine.Engine` driven as "
        "`Runner.drive` drives it (fill up to the window, `poll()`, refill), without the "
        "media pipeline. `AsyncLLM` asks for final outputs only, as `LLM` does. Peak RSS: "
        "of this process (frontend) and of the engine's processes (engine core and its "
        "worker, summed), each reset before every loop (`/proc/PID/clear_refs`); CPU time "
        "(user + system) of the same processes during the loop, which other processes on "
        "the machine change less than wall time (though a worker that polls while it "
        "waits uses more of it); the "
        f"frontend held {base['frontend_peak_mib'] - base['frontend_growth_mib']:.0f} MiB "
        "before each loop (two engines' frontends, the loop's decoded images). The rows "
        'marked "output lengths 1-31" run the same loops (at the first window) with each '
        "prompt's `max_tokens` between 1 and 31 instead of 16 (vLLM counted "
        f"{_tokens(runs, 'varied-one_call')} output tokens per loop, against "
        f"{_tokens(runs, 'one_call')}): a window of `generate` calls then waits for its "
        "longest request. "
        f"Load average during the rounds: {min(loads):.2f}-{max(loads):.2f}.",
        "",
        "| loop | most in flight | total (median) | min-max | prompts/s | vs one call "
        "| vs one call, same round | first result | CPU time: frontend / engine "
        "| frontend peak (growth) | engine processes' peak |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    varied = lp.get("varied_prefix", "varied-")
    for kind in lp["kinds"]:
        m = med_[kind]
        times = [x["s"] for x in runs[kind]]
        lengths = ", output lengths 1-31" if kind.startswith(varied) else ""
        out.append(
            f"| {_loop_label(kind, lp['default_window'])}{lengths} | {m['max_in_flight']} "
            f"| {_s(m['s'])} "
            f"| {_spread(times)} s | {m['prompts_per_s']:.0f} | {_x(base['s'] / m['s'])} "
            f"| {_x(m['paired_ratio'])} "
            f"| {_s(m['first_s'])} | {_s(m['frontend_cpu_s'])} / {_s(m['engine_cpu_s'])} "
            f"| {m['frontend_peak_mib']:.0f} MiB "
            f"(+{m['frontend_growth_mib']:.0f}) | {m['engine_peak_mib']:.0f} MiB |"
        )
    ranked = sorted(
        (k for k in lp["kinds"] if not k.startswith(varied)), key=lambda k: med_[k]["s"]
    )
    out += [
        "",
        "Rounds (total time each, in the order run): "
        + "; ".join(
            f"round {i + 1}: "
            + ", ".join(
                f"{k} {x['s']:.2f}"
                for k, x in sorted(
                    ((k, x) for k in runs for x in runs[k] if x["round"] == i),
                    key=lambda kx: kx[1]["position"],
                )
            )
            for i in range(lp["rounds"])
        )
        + " (seconds).",
        "",
        '"vs one call" is the throughput ratio of the medians; "same round" the median, '
        "over the rounds, of the ratio between the two runs of one round (close together in "
        "time, so they shared the machine's load).",
        "",
        f"Fastest (median): {_loop_label(ranked[0], lp['default_window'])}, "
        f"{_s(med_[ranked[0]]['s'])}; slowest: {_loop_label(ranked[-1], lp['default_window'])}, "
        f"{_s(med_[ranked[-1]]['s'])}.",
        "",
    ]
    w = lp["default_window"]

    def both(name: str) -> str:
        plain, mixed = med_[f"{name}_{w}"], med_.get(f"{varied}{name}_{w}")
        text = (
            f"{_s(plain['s'])}, {_x(plain['paired_ratio'])} the one call within a round, "
            f"first result at {_s(plain['first_s'])}, {_s(plain['frontend_cpu_s'])} / "
            f"{_s(plain['engine_cpu_s'])} CPU"
        )
        if mixed is not None:
            text += (
                f"; with output lengths 1-31 {_s(mixed['s'])}, {_x(mixed['paired_ratio'])} "
                "the one call of those lengths"
            )
        return text

    plain = [k for k in lp["kinds"] if not k.startswith(varied)]
    spread = max(max(x["s"] for x in runs[k]) - min(x["s"] for x in runs[k]) for k in plain)
    gap = med_[ranked[-1]]["s"] - med_[ranked[0]]["s"]
    out += [
        f"Wall time: the medians of the loops differ by at most {_s(gap)}; one loop's own "
        f"runs differ by up to {_s(spread)} from round to round. CPU seconds (frontend + "
        "engine, medians): "
        + ", ".join(f"{k} {med_[k]['frontend_cpu_s'] + med_[k]['engine_cpu_s']:.2f}" for k in plain)
        + ".",
        "",
        f"Issue 11's two candidates, at the window of {w} (2 x max_num_seqs), medians: "
        f"(a) `AsyncLLM`: {both('async')}; (b) windows of `LLM.generate`: {both('windows')}. "
        f"The loop mmrun runs (`LLM.enqueue` + `llm_engine.step()`): {both('enqueue')}.",
        "",
    ]
    return out


def _tokens(runs: dict[str, list[dict[str, Any]]], kind: str) -> str:
    counts = sorted({x["completion_tokens"] for x in runs.get(kind, [])})
    return "/".join(str(c) for c in counts) or "no"


def _stream(r: dict[str, Any]) -> list[str]:
    st = r["stream"]
    one, mm, bad = (_stream_medians(st, k) for k in ("one_call", "mmrun", "mmrun_bad"))
    runs = st["runs"]
    loads = [x["load1"] for k in runs for x in runs[k]]
    bad_run = runs["mmrun_bad"][0]
    error = bad_run["output"]["errors"][0]
    calls = runs["mmrun"][0]
    tokens_one = runs["one_call"][0]
    tokens_mm = runs["mmrun"][0]["output"]

    def row(label: str, m: dict[str, float], first: float, last: float, code: str) -> str:
        # medians of each run's own differences
        if "generate_external_s" in m:
            first_after, after = m["first_after_ready_s"], m["generate_external_s"]
        else:
            first_after = after = m["generate_s"]
        return (
            f"| {label} | {_s(m['engine_ready_s'])} | {_s(first)} | {_s(last)} "
            f"| {_s(first_after)} / {_s(after)} | {st['prompts'] / after:.0f} "
            f"| {_s(m['frontend_cpu_s'])} / {_s(m['engine_cpu_s'])} "
            f"| {m['frontend_peak_mib']:.0f} MiB | {m['engine_peak_mib']:.0f} MiB | {code} "
            f"| {_s(m['wall_s'])} |"
        )

    return [
        "### 7. Streamed batch mode vs one call",
        "",
        f"The tiny checkpoint, {st['prompts']} prompts of {st['images_per_prompt']} distinct "
        f"224x224 PNG files each (a JSONL manifest, paths relative to it), "
        f"`max_tokens={st['max_tokens']}` with `ignore_eos`, the engine arguments of figure 6. "
        f"Each run is its own process, {st['rounds']} round{'s' if st['rounds'] > 1 else ''} "
        "in rotating order:",
        "",
        f"- mmrun: `{st['mmrun_command']}`, through `bench/cpu/workers/count_calls.py` (the CLI "
        "unchanged; it notes when `mmrun.engine.start` returned, the calls into vLLM, mmrun's "
        "own timings, and the peak RSS of the process and of the engine's processes before "
        "the engine stops). The benchmark reads the output file every 5 ms and notes when "
        "each line arrived.",
        "- with a bad item: the same manifest, but line "
        f"{st['bad_index'] + 1} asks a question of {st['bad_words']} words, longer than "
        f"max_model_len ({st['engine_args'].get('max_model_len')} tokens).",
        "- one call (`bench/cpu/workers/one_call.py`): import vLLM, decode every image "
        "(Pillow), start `vllm.LLM`, one `generate` call with the 256 prompts (mmrun's "
        "rendered prompt).",
        "",
        "Times from process start (medians). For the one call, its results arrive together "
        "when the call returns, and its CPU seconds are those of the call. CPU seconds are "
        "user + system time of the process and of the engine's processes (engine core and "
        "its worker, summed), from the engine's start to the last result: other processes on "
        "the machine change them less than wall time (a worker that polls while it waits "
        "uses more of them). Peak RSS is each process's VmHWM over its whole life, the "
        "engine's processes summed.",
        "",
        "| run | engine started at | first result | last result "
        "| after the engine started: first / all | prompts/s "
        "| CPU after the engine started: process / engine processes | peak RSS, process "
        "| engine processes | exit | wall |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        row("one `generate` call", one, one["result_s"], one["result_s"], "0"),
        row("mmrun `--input` + `-o`", mm, mm["first_line_s"], mm["last_line_s"], "0"),
        row(
            "mmrun, one bad item",
            bad,
            bad["first_line_s"],
            bad["last_line_s"],
            str(bad_run["returncode"]),
        ),
        "",
        f"Throughput once the engine is up: mmrun {_x(st['throughput_ratio'])} the one call "
        f"({_s(st['mmrun_generate_s'])} from the engine's start to the last line vs "
        f"{_s(st['one_call_generate_s'])} for the call; mmrun's own `generate_s`, from its "
        f"first submission to its last result, {_s(mm['generate_s'])}). mmrun decodes its "
        "media in worker threads while the engine starts and runs; the script decoded them "
        f"before starting the engine (until {_s(runs['one_call'][0]['phases_s']['decoded'])} "
        "in round 1). Tokens: one call "
        f"{tokens_one['prompt_tokens']} prompt / {tokens_one['completion_tokens']} output, "
        f"mmrun {tokens_mm['prompt_tokens']} / {tokens_mm['completion_tokens']}. mmrun "
        f"asked vLLM: {_calls(calls['calls'], calls['steps'])}.",
        "",
        f"The bad item: its line says `{json.dumps({'stage': error['stage'], 'message': _cut(error['message'], 160)})}`; "
        f"mmrun's summary: `{_short_paths(bad_run['summary_line'])}`. It cost "
        f"{st['bad_item_extra_s'] * 1000:+.0f} ms from the engine's start to the last line "
        "(medians, bad vs good run; within each round, bad minus good: "
        + ", ".join(
            f"{c['generate_external_s'] - a['generate_external_s']:+.2f} s"
            for a, c in zip(runs["mmrun"], runs["mmrun_bad"], strict=True)
        )
        + "; whole-process times differ by as much as the engine start varies). "
        f"Load average (1 min) at the start of these runs: {min(loads):.2f}-{max(loads):.2f}. "
        "Per round, from the engine's start to the last result (mmrun / mmrun with the bad "
        "item / one call), and the CPU seconds of all the processes in that time: "
        + "; ".join(
            f"round {a['round'] + 1}: {a['generate_external_s']:.2f} / "
            f"{c['generate_external_s']:.2f} / {b['generate_s']:.2f} s, "
            f"{a['frontend_cpu_s'] + a['engine_cpu_s']:.1f} / "
            f"{c['frontend_cpu_s'] + c['engine_cpu_s']:.1f} / "
            f"{b['frontend_cpu_s'] + b['engine_cpu_s']:.1f} CPU s"
            for a, c, b in zip(runs["mmrun"], runs["mmrun_bad"], runs["one_call"], strict=True)
        )
        + ".",
        "",
    ]
