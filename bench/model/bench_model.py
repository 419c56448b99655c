"""The whole Qwen3 model through Emmy's runtime vs transformers (issue 22, item 4), one process on
the GPU machine after run.sh has tuned and exported each shape:

  1. per shape BxS, the export (`emmy export` of the whole model) loaded through the PyTorch op
     (runtime/torch: emmy_torch.load), timed (load) and bound to the weights of transformers'
     Qwen3Model built from the same config.json (random weights, seed 0, bf16, cuda; or the
     model's own from a local model.safetensors, --weights), in place: no copy of a weight;
  2. correctness: the final hidden states of Emmy (emmy_torch.run_qwen3) and of transformers
     eager on the same embeddings, cosine similarity >= --min-cosine (0.999);
  3. time of the full forward from the embeddings (embedding lookup excluded on every side):
     Emmy (the op's whole call: the inputs copied in, its CUDA graph launched on PyTorch's
     current stream, the output copied into a fresh tensor, nothing waited for on the host; also
     with EMMY_CUDA_OVERLAP=0, each kernel launched after the previous one has finished, and the
     call captured into a torch CUDA graph where that works), transformers eager and
     torch.compile, each as a stream launch and as a torch CUDA-graph replay, timed by
     bench/qwen_layer/bench_torch.py's Timer (L2 flushed before each sample, CUDA events, median
     of --samples);
  4. Emmy's and torch.compile's graph replays again, one right after the other in each of
     --rounds rounds (the order swapped every round): the median of the rounds' ratios, which a
     drift of the GPU's clocks between the columns above (timed minutes apart) cannot favour;

-> OUT/model.md (the table) and OUT/model.json (every number, the tune/export/load times).
Exit 1 when a shape misses the cosine or has no export, so that the call's status says so.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "qwen_layer"))
from bench_torch import Timer  # noqa: E402  (one timing method for every benchmark)


def log(msg: str) -> None:
    print(msg, flush=True)


def build_hf(config_path: str, weights: str | None):
    from transformers import Qwen3Config, Qwen3Model
    with open(config_path) as f:
        cfg = Qwen3Config(**json.load(f))
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = Qwen3Model(cfg).to("cuda", torch.bfloat16).eval()
    source = "random (torch.manual_seed(0), transformers' init)"
    if weights:
        files = sorted(glob.glob(os.path.join(weights, "*.safetensors"))) if os.path.isdir(weights) else [weights]
        if not files:
            raise FileNotFoundError(f"--weights {weights}: no .safetensors file there")
        from safetensors.torch import load_file
        state = {}
        for f in files:
            state.update(load_file(f, device="cuda"))
        # Qwen3ForCausalLM checkpoints name the decoder "model.*".
        state = {k[len("model."):] if k.startswith("model.") else k: v for k, v in state.items()}
        missing, _ = model.load_state_dict(state, strict=False)
        if missing:
            raise KeyError(f"--weights {weights}: the checkpoint lacks {missing[:5]}")
        source = ", ".join(os.path.basename(f) for f in files)
    return cfg, model, source


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return torch.nn.functional.cosine_similarity(a.double().flatten(), b.double().flatten(), dim=0).item()


def bench_shape(args, timer, emmy_torch, hf, b: int, s: int, meta: dict) -> dict:
    row = {"batch": b, "seq": s, **meta}
    path = os.path.join(args.exports, f"model-b{b}-s{s}.emmy")
    if not os.path.isdir(path):
        row["error"] = f"no export at {path} (run.sh's tune and export steps)"
        log(f"== B={b} S={s}: {row['error']}")
        return row
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    export = emmy_torch.load(path)
    row["load_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    bound = export.bind_weights(hf.state_dict())
    torch.cuda.synchronize()
    row["bind_s"] = time.perf_counter() - t0
    row["inputs"] = len(export.input_names)
    log(f"== B={b} S={s}: loaded in {row['load_s'] * 1e3:.1f} ms, {len(bound)} weights bound in "
        f"{row['bind_s'] * 1e3:.1f} ms")

    g = torch.Generator(device="cuda").manual_seed(1)
    ids = torch.randint(0, hf.config.vocab_size, (b, s), device="cuda", generator=g)
    with torch.no_grad():
        x = hf.embed_tokens(ids)
        ref = hf(inputs_embeds=x, use_cache=False).last_hidden_state
        got = emmy_torch.run_qwen3(export, hf, hidden_states=x)
    row["cosine"] = cosine(got, ref)
    row["max_abs_error"] = (got.float() - ref.float()).abs().max().item()
    row["pass"] = row["cosine"] >= args.min_cosine
    log(f"   cosine {row['cosine']:.6f} (>= {args.min_cosine}: {'PASS' if row['pass'] else 'FAIL'}), "
        f"max abs error {row['max_abs_error']:.3g}")

    # The same feeds run_qwen3 made, so the timed call is the op's call alone.
    position_ids = torch.arange(s, device="cuda").unsqueeze(0)
    cos, sin = hf.rotary_emb(x, position_ids)
    cos, sin = cos[0].contiguous(), sin[0].contiguous()

    def emmy_call():
        return export(hidden_states=x, cos=cos, sin=sin)

    # The same export loaded again with its kernels launched one after the other (no
    # programmatic overlap of a kernel's start with the previous one's tail): what overlap gains.
    os.environ["EMMY_CUDA_OVERLAP"] = "0"
    try:
        serial = emmy_torch.load(path)
        serial.bind_weights(hf.state_dict())
    finally:
        del os.environ["EMMY_CUDA_OVERLAP"]

    def emmy_serial():
        return serial(hidden_states=x, cos=cos, sin=sin)

    def eager():
        return hf(inputs_embeds=x, use_cache=False).last_hidden_state

    compiled_model = torch.compile(hf, dynamic=False)

    def compiled():
        return compiled_model(inputs_embeds=x, use_cache=False).last_hidden_state

    times, errors = {}, {}

    def attempt(key, into, measure):
        # One way of timing failing (e.g. a transformers version whose forward does not capture
        # into a CUDA graph) leaves that cell empty, named in the JSON, not the whole shape.
        try:
            into[key] = measure()
        except Exception as e:  # noqa: BLE001
            errors[key] = f"{type(e).__name__}: {e}"[:500]
            log(f"   {key}: not measured ({errors[key][:200]})")
            torch.cuda.synchronize()

    def timed(key, how, fn):
        attempt(key, times, lambda: how(fn))

    with torch.no_grad():
        timed("emmy", timer.stream_us, emmy_call)
        timed("emmy_serial", timer.stream_us, emmy_serial)
        timed("emmy_graph", timer.graph_us, emmy_call)
        timed("eager_stream", timer.stream_us, eager)
        timed("eager_graph", timer.graph_us, eager)
        t0 = time.perf_counter()
        timed("compile_first_call", lambda fn: fn(), compiled)  # the compile itself, not a time
        times.pop("compile_first_call", None)
        row["compile_s"] = time.perf_counter() - t0
        if "compile_first_call" not in errors:
            timed("compile_stream", timer.stream_us, compiled)
            timed("compile_graph", timer.graph_us, compiled)
        if "emmy_graph" in times and "compile_graph" in times:
            if args.rounds > 0:
                attempt("alternating", row,
                        lambda: alternating_rounds(timer, args.rounds, emmy_call, compiled))
            if args.interleaved > 0:
                attempt("interleaved", row,
                        lambda: interleaved(timer, args.interleaved, emmy_call, compiled))
    row["us"], row["timing_errors"] = times, errors
    compile_times = [times[k] for k in ("compile_stream", "compile_graph") if k in times]
    emmy_times = [times[k] for k in ("emmy", "emmy_graph") if k in times]
    if emmy_times and compile_times:
        # The faster way of calling each side (a user of either picks it).
        row["emmy_over_compile"] = min(emmy_times) / min(compile_times)
    log("   " + ", ".join(f"{k} {v:.0f} us" for k, v in times.items()) +
        f"; Emmy / best torch.compile = {row.get('emmy_over_compile', float('nan')):.3f} (target <= 0.75)")
    if "alternating" in row:
        a = row["alternating"]
        log(f"   alternating graph replays, {len(a['ratios'])} rounds: Emmy / torch.compile = "
            f"{a['median_ratio']:.3f} (rounds: {', '.join(f'{x:.3f}' for x in a['ratios'])})")
    if "interleaved" in row:
        a = row["interleaved"]
        log(f"   interleaved graph replays, {a['samples']} samples each: Emmy {a['emmy_us']:.0f} us, "
            f"torch.compile {a['compile_us']:.0f} us, Emmy / torch.compile = {a['ratio']:.3f} "
            f"(median of the pairs' ratios {a['median_pair_ratio']:.3f}; Emmy's samples after "
            f"Emmy's {a['emmy_after_emmy_us']:.0f} us, after compile's {a['emmy_after_compile_us']:.0f})")
    del export, serial
    torch.cuda.empty_cache()
    return row


def alternating_rounds(timer, rounds: int, emmy_fn, compiled_fn) -> dict:
    """Emmy's and torch.compile's forward as CUDA-graph replays, timed one right after the other
    in each of `rounds` rounds (the order swapped every round), and the median of the per-round
    ratios: the columns above are timed minutes apart (torch.compile's own compile in between),
    and a drift of the GPU's clocks over that time falls on one side only. Same Timer, same
    samples per measurement."""
    emmy_us, compile_us = [], []
    for r in range(rounds):
        if r % 2 == 0:
            emmy_us.append(timer.graph_us(emmy_fn))
            compile_us.append(timer.graph_us(compiled_fn))
        else:
            compile_us.append(timer.graph_us(compiled_fn))
            emmy_us.append(timer.graph_us(emmy_fn))
    ratios = [e / c for e, c in zip(emmy_us, compile_us)]
    return {"emmy_us": emmy_us, "compile_us": compile_us, "ratios": ratios,
            "median_ratio": statistics.median(ratios)}


def interleaved(timer, samples: int, emmy_fn, compiled_fn) -> dict:
    """Emmy's and torch.compile's forward as CUDA-graph replays interleaved sample by sample,
    ABBA (Emmy then compile, then compile then Emmy, ...), each sample after an L2 flush
    (Timer.interleaved_graph_us): both sides see the same clocks at every moment and each
    follows the other as often as itself. In the rounds above, Emmy's replays that came right
    after Emmy's own were the slow ones (rounds 2 and 4 of every run); here half of each side's
    samples follow the other side, and the split is reported."""
    emmy, comp = timer.interleaved_graph_us([emmy_fn, compiled_fn], samples)
    # The replays run E C, C E, E C, C E, ...: Emmy's sample i follows compile's sample i when i
    # is odd, and Emmy's own sample i - 1 when i is even and > 0.
    after_emmy = [emmy[i] for i in range(2, samples, 2)]
    after_compile = [emmy[i] for i in range(1, samples, 2)]
    pairs = [e / c for e, c in zip(emmy, comp)]
    return {"samples": samples, "emmy_samples_us": emmy, "compile_samples_us": comp,
            "emmy_us": statistics.median(emmy), "compile_us": statistics.median(comp),
            "ratio": statistics.median(emmy) / statistics.median(comp),
            "median_pair_ratio": statistics.median(pairs),
            "emmy_after_emmy_us": statistics.median(after_emmy) if after_emmy else float("nan"),
            "emmy_after_compile_us": statistics.median(after_compile) if after_compile else float("nan")}


def render(rows: list, samples: int, weights: str, name: str = "Qwen3-Embedding-0.6B") -> str:
    out = [f"## {name}, whole model (every layer + the final norm), bf16", "",
           f"Weights: {weights}. Times: median of {samples} samples, µs, L2 flushed before each "
           "(bench_torch.Timer). Emmy: the PyTorch op's whole call (the inputs copied in, its CUDA "
           "graph launched on PyTorch's stream, the output copied out), as a stream launch; "
           "'serial': the same with EMMY_CUDA_OVERLAP=0; 'graph': the call captured into a torch "
           "CUDA graph. Eager and torch.compile as a stream launch and as a replay of a torch CUDA "
           "graph.", "",
           "| B | S | cosine | Emmy | Emmy (serial) | Emmy (graph) | eager | eager (graph) | compile | compile (graph) | Emmy / compile | alternating | interleaved | tune s | export s | load ms |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['batch']} | {r['seq']} | {r['error']} |" + " |" * 13)  # 16 columns
            continue
        t = r["us"]
        cell = [f"{t[k]:.0f}" if k in t else "—" for k in
                ("emmy", "emmy_serial", "emmy_graph", "eager_stream", "eager_graph",
                 "compile_stream", "compile_graph")]
        ratio = f"{r['emmy_over_compile']:.3f}" if "emmy_over_compile" in r else "—"
        alternating = (f"{r['alternating']['median_ratio']:.3f}" if "alternating" in r else "—")
        inter = f"{r['interleaved']['ratio']:.3f}" if "interleaved" in r else "—"
        out.append(
            f"| {r['batch']} | {r['seq']} | {r['cosine']:.5f} | {' | '.join(cell)} | {ratio} | "
            f"{alternating} | {inter} | {r.get('tune_s', '?')} | {r.get('export_s', '?')} | "
            f"{r['load_s'] * 1e3:.0f} |")
    out += ["", "Emmy / compile: the faster of Emmy's stream and graph columns over the faster "
            "of the two torch.compile columns (issue 22's target: <= 0.75). Alternating: both "
            "as graph replays, timed one after the other in each of --rounds rounds (the order "
            "swapped every round), the median of the rounds' ratios. Interleaved: both as graph "
            "replays, sample by sample in ABBA order (--interleaved samples each), the ratio of "
            "the medians. Export + load "
            "target: < 1 s."]
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="1x512,8x512", help="BxS list")
    ap.add_argument("--exports", required=True, help="folder with model-bB-sS.emmy and steps.json")
    ap.add_argument("--config", required=True, help="the model's config.json")
    ap.add_argument("--weights", default="", help="a model.safetensors (or its folder) to use")
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5,
                    help="alternating rounds of Emmy's and torch.compile's graph replays (0: none)")
    ap.add_argument("--interleaved", type=int, default=60,
                    help="samples of Emmy's and torch.compile's graph replays interleaved ABBA, "
                         "sample by sample (0: none)")
    ap.add_argument("--min-cosine", type=float, default=0.999)
    ap.add_argument("--library", default=None, help="libemmy_torch.so (default: beside emmy_torch.py)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    import emmy_torch
    emmy_torch.load_library(args.library)
    import transformers
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"{torch.cuda.get_device_name(0)}; emmy_torch {emmy_torch._loaded}")
    # run.sh's tune/export wall times per shape, for the table.
    steps = {}
    steps_path = os.path.join(args.exports, "steps.json")
    if os.path.exists(steps_path):
        with open(steps_path) as f:
            steps = json.load(f)
    _, hf, source = build_hf(args.config, args.weights or None)
    timer = Timer(args.samples)
    rows = []
    for shape in [v for v in args.shapes.split(",") if v]:
        b, s = (int(v) for v in shape.lower().split("x"))
        rows.append(bench_shape(args, timer, emmy_torch, hf, b, s, steps.get(f"b{b}-s{s}", {})))
    table = render(rows, args.samples, source, os.path.basename(os.path.dirname(os.path.abspath(args.config))))
    log(table)
    with open(os.path.join(args.out, "model.md"), "w") as f:
        f.write(table)
    with open(os.path.join(args.out, "model.json"), "w") as f:
        json.dump({"samples": args.samples, "weights": source, "shapes": rows}, f, indent=1)
    return 0 if rows and all(r.get("pass") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
