"""The CPU section of docs/performance.md, rendered from one run's results.

Only the text between ``<!-- cpu:begin -->`` and ``<!-- cpu:end -->`` is rewritten; every byte
outside the markers is kept as it is.
"""

from __future__ import annotations

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
CACHE_SHARE = 0.02  # a saving worth a disk cache: at least this share of a whole run
STREAM_RATIO = 0.95  # a streamed batch: at least this share of one call's throughput
SERVED_RATIO = 0.9  # --server: at least this share of the in-process rate
SERVED_FIRST_S = 3.0  # --server: the first result of a call against a running server


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


FIGURE_NAMES = {
    "startup": "start-up",
    "media": "media",
    "overlap": "overlap",
    "batching": "batching",
    "repeat": "repeat runs",
    "loops": "engine loops",
    "stream": "streamed batch",
    "served": "`--server`",
}


def _figures(names: list[str]) -> str:
    """The figures' names, in the order of the page: "the engine loops and streamed batch
    figures"."""
    ordered = [FIGURE_NAMES[n] for n in FIGURE_NAMES if n in names]
    text = ", ".join(ordered[:-1])
    joined = f"{text} and {ordered[-1]}" if text else ordered[-1]
    return f"the {joined} figure{'s' if len(ordered) > 1 else ''}"


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
    add(f"### The run ({r['date']})")
    add("")
    add(
        f"`{r['command']}` ({r['duration_s'] / 60:.1f} minutes) on {m['nproc']} cores "
        f"({m['cpu_model']}), {m['mem_gib']} GiB, no GPU; {m['vllm']}, torch {m['torch']}, "
        f"Python {m['python']}. Load average (1 min): {r['load_average_start'][0]:.2f} at the "
        f"start, {r['load_average_end'][0]:.2f} at the end, "
        f"{min(loads):.2f}-{max(loads):.2f} at the start of each figure (figures that need CPU "
        "time are slower on a loaded machine). Raw numbers: "
        "[bench/cpu/results.json](../bench/cpu/results.json). Every number below comes from "
        "that run"
        + (f", except {_figures(later)}, measured later (below)" if later else "")
        + "; times are medians, and each ratio is between two medians of the same run."
    )
    add("")
    add(_source(r["mmrun_source_start"], r["mmrun_source_end"]))
    for u in updates:
        um = u["machine"]
        add("")
        add(
            f"{_figures(u['figures']).capitalize()}: `{u['command']}` (started "
            f"{u['started_utc']}, {u['duration_s'] / 60:.1f} minutes); {um['nproc']} cores, "
            f"{um['vllm']}, torch {um['torch']}, Python {um['python']}; load average "
            f"{u['load_average_start'][0]:.2f} at its start, {u['load_average_end'][0]:.2f} "
            "at its end. " + _source(u["mmrun_source_start"], u["mmrun_source_end"])
        )
    add("")
    add("### The figures")
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
    if "served" in r:
        served_rows, served_notes = _served_summary(r)
        out += served_rows
        notes += served_notes
    add("")
    if notes:
        add("Targets missed:")
        add("")
        out += notes
        add("")
    add("### How each figure is measured")
    add("")
    out += [f"- {text}" for text in METHODS.values()]
    return "\n".join(out)


# One line per figure: what runs against what (the code is in bench/cpu/<figure>.py).
METHODS = {
    "startup": "Start-up (`startup.py`): each command spawned 7 times, wall time to exit and "
    "peak RSS of the child; imports from one more run under `python -X importtime`. Baseline: "
    "vLLM's audio example script with `--help`, which imports vLLM before it parses its "
    "arguments.",
    "media": "Media (`media.py`): the 12 default images (4.5 MB of JPEG) from a local server "
    "that waits 100 ms before each answer; `mmrun.media.MediaResolver` against fetching each "
    "with urllib and decoding it with Pillow, one after the other; cold and warm cache, and "
    "the first use in a fresh process.",
    "overlap": "Overlap (`overlap.py`): the tiny random-weight Qwen2.5-VL checkpoint, 12 "
    "images, 8 tokens; mmrun's time to result against the example's order (fetch, then start "
    "vLLM) with cold media, and against a minimal vLLM script with cached media.",
    "batching": "Batching (`batching.py`): 32 prompts of 2 images in one `generate` call "
    "against 32 calls of one prompt, in one process; then mmrun `--num-prompts 32` and the "
    "calls it makes into vLLM.",
    "repeat": "Repeat runs (`repeat.py`): what rendering the chat template costs once vLLM has "
    "loaded the same processor: the most a cache of rendered prompts could save.",
    "loops": "Engine loops (`loops.py`): 256 prompts of 2 images in one process: one "
    "`generate` call, windows of `generate` calls, `AsyncLLM` with a bounded number in "
    "flight, and mmrun's `LLM.enqueue` + engine steps.",
    "stream": "Streamed batch (`stream.py`): mmrun `--input manifest.jsonl -o out.jsonl` on "
    "256 prompts of 2 images against one `generate` call on the same prompts: throughput "
    "once the engine is up, the first result line, peak RSS, and one prompt longer than "
    "`max_model_len` among them.",
    "served": "`--server` (`served.py`): one `mmrun serve` of the tiny checkpoint started "
    "first and left running; then 1,024 prompts of one picture, 32 tokens, in mmrun's own engine "
    "and against the server, in alternating order, each round with pictures of its own (a "
    "server left running gets new ones each call), both engines with `max_num_seqs` 16 and "
    "vLLM's multimodal processor cache off: each run's rate from its engine's start (its "
    "connection) to the last line, its first result line from spawn, the prompt tokens the "
    "engine counted and the greedy texts.",
}


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
            f"| vLLM's audio example `--help`: {_s(base['median_wall_s'])}, {base['median_maxrss_mib']:.0f} MiB "
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
        f"| the example's order (fetch, then start vLLM): {_s(med['seed_order'])} "
        f"| {_x(ov['ratio_cold'])} | ≤ {OVERLAP_COLD}x | {_yes(ok3)} |"
    )
    rows.append(
        f"| overlap, cached media: time to result | {_s(med['mmrun_warm'])} "
        f"| minimal vLLM script: {_s(med['min_vllm'])} | {_x(ov['ratio_warm'])} "
        f"| ≤ {OVERLAP_WARM}x | {_yes(ok4)} |"
    )
    printed = ov["median_result_s"]
    for kind, base_kind, label, base_label in (
        ("mmrun_cold", "seed_order", "cold media", "the example's order"),
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
    """mmrun's ``--warmup`` prompts in the batching figure (results written before "warmup_prompts" was
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


def _range(values: list[int]) -> str:
    """ "1019-1023", or one value where all are equal."""
    if not values:
        return "-"
    low, high = min(values), max(values)
    return str(low) if low == high else f"{low}-{high}"


def _served_summary(r: dict[str, Any]) -> tuple[list[str], list[str]]:
    sv = r["served"]
    ratio, first = sv["paired_ratio"], sv["server_first_line_s"]
    server_same = [x["texts_identical"] for x in sv["runs"]["server"]]
    rows = [
        f"| `--server`, {sv['prompts']} prompts x 1 picture, {sv['rounds']} rounds: rate after "
        f"the engine start (the connection) | {sv['server_per_s']:.1f} prompts/s "
        f"({_spread([x['prompts_per_s'] for x in sv['runs']['server']])}) | in-process "
        f"{sv['in_process_per_s']:.1f} prompts/s "
        f"({_spread([x['prompts_per_s'] for x in sv['runs']['in_process']])}) "
        f"| {_x(ratio)} within a round (median; {', '.join(_x(x) for x in sv['paired_ratios'])}) "
        f"| ≥ {SERVED_RATIO}x | {_yes(ratio >= SERVED_RATIO)} |",
        f"| `--server`: first result line, the server already up | {_s(first)} from spawn "
        f"(the first call, which loads the processor to render its prompts: "
        f"{_s(sv['server_first_call_first_line_s'])}) | in-process, its engine start included: "
        f"{_s(sv['in_process_first_line_s'])} | {_x(first / sv['in_process_first_line_s'])} "
        f"| ≤ {SERVED_FIRST_S:.0f} s | {_yes(first <= SERVED_FIRST_S)} |",
        f"| `--server`: the same requests | prompt tokens "
        f"{'equal in every run' if sv['prompt_tokens_equal'] else '**not equal**'}; greedy texts "
        f"identical to the in-process run's of the same pictures: {_range(server_same)} of "
        f"{sv['prompts']} | in-process, the same pictures | | the same prompt tokens "
        f"| {_yes(sv['prompt_tokens_equal'])} |",
    ]
    notes = []
    if ratio < SERVED_RATIO:
        notes.append(
            f"- `--server`: {_x(ratio)} of the in-process rate within a round (target "
            f"{SERVED_RATIO}x). On 2 cores vLLM's API server and mmrun's client share the "
            "cores with the engine core and its worker, which wait on each other by polling."
        )
    if first > SERVED_FIRST_S:
        notes.append(
            f"- `--server`: first result line {_s(first)} after spawn (target ≤ {SERVED_FIRST_S:.0f} s)."
        )
    return rows, notes
