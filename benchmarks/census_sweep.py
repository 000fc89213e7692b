"""Census sweep: seamscope's counts against PyTorch's on transformers' model zoo (not in `make test`).

Every base model class of ``transformers`` (``MODEL_MAPPING_NAMES``) is built from its config class
with reduced, coherent sizes, given inputs made by name from its forward signature (the rules are
in ``census_recipes.py``), run eagerly, then compiled with ``backend="eager"`` and called three
times (the second input the first's shape, the third a new one) inside a seamscope session, each
model in a fresh process of its own (forked; a new interpreter with ``--trace``). Per model it
compares seamscope's counts with PyTorch's (``counters``; the compile ids of the compilation
metrics, or with ``--trace`` of a ``TORCH_TRACE`` of the same run; ``explain`` with ``--explain``)
and sorts each break site into a root-cause class. Models that cannot be built or that fail
eagerly are listed as such, grouped by the cause of their error, and not counted.

    OMP_NUM_THREADS=1 nice .venv/bin/python benchmarks/census_sweep.py --sample 60 --explain --json census.json
    .venv/bin/python benchmarks/census_sweep.py --only switch_transformers --explain

The rules compared (docs/capture.md, "Counts agree with PyTorch"):
  compiles+fallbacks = compile ids in the trace; recompiles = ids x/y with y > 0;
  fallbacks = frames total - ok - frames declined as generators (gb0003); graphs = unique_graphs;
  with --explain, explain's break sites (innermost file:line) are among seamscope's.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from typing import Any

# --- the child: one model in a process of its own -----------------------------------------------

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from census_recipes import recipe, reduce_config  # noqa: E402 - next to this script

CLASSES = (  # (root-cause class, pattern on gb code, gb type and reason), first match wins
    ("nonzero / data-dependent shape", r"GB0036|Dynamic shape operator|data-dependent output shape|nonzero"),
    (".item() / data-dependent scalar", r"GB0124|GB0033|Tensor\.item\(\)|Data dependent operator"),
    ("data-dependent branching", r"GB0170|Data-dependent branching|generic_jump"),
    ("copy.deepcopy", r"deepcopy"),
    ("requires_grad mutation", r"requires_grad"),
    ("logging / print", r"logging|\bprint\b|warnings\.warn|Logger"),
    ("skipped call", r"marked as skipped|skip_files|Attempted to call function marked|GB0007|GB0098|disable"),
    ("generator / iterator", r"generator|tp_iternext|GB4347"),
    ("exception in traced code", r"GB0088|Observed exception"),
    ("object without python_type() (a Dynamo gap)", r"GB4841|python_type\(\)"),
)


FAILURES = (  # (why a model was not compared, pattern on its error), first match wins
    ("an optional package is missing", r"ImportError|ModuleNotFoundError"),
    ("no forward of its own (a container class)", r"missing the required \"forward\"|_forward_unimplemented"),
    ("an input no maker gives (sessions, embeddings, masks)", r"missing \d+ required|must specify|have to specify"
     r"|is required|must be a 5D|unexpected keyword"),
    ("a reduced size its own code rejects", r"mat1 and mat2|size of tensor|is invalid for input|normalized_shape"
     r"|channels|divisible|multiple of|too small|out of range|expected|must match|split_with_sizes|unpack"),
    ("its config class is incomplete without a checkpoint", r"has no attribute|NoneType|KeyError|validation error"),
)


def failure_class(error: str) -> str:
    return next((name for name, pat in FAILURES if re.search(pat, error)), "other")


def root_cause(gb_code: str | None, gb_type: str | None, reason: str) -> str:
    text = f"{gb_code or ''} {gb_type or ''} {reason}"
    return next((name for name, pat in CLASSES if re.search(pat, text, re.IGNORECASE)), "other")


def trace_ids(trace_dir: str) -> dict[str, Any]:
    """Compile ids of the compilation metrics in the TORCH_TRACE log (read here, not by seamscope)."""
    ids: dict[str, bool] = {}
    for path in glob.glob(os.path.join(trace_dir, "*.log")):
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if '"compilation_metrics"' not in line or line.startswith("\t"):
                    continue
                rec = json.loads(line[line.index("{"):])
                cid = f"{rec.get('frame_id')}/{rec.get('frame_compile_id')}"
                ids[cid] = ids.get(cid, False) or bool(rec["compilation_metrics"].get("fail_type"))
    return {"ids": len(ids), "failed": sum(ids.values()),
            "recompiles": sum(1 for c in ids if not c.endswith("/0"))}


def metric_ids() -> dict[str, Any]:
    """The same figures from ``get_compilation_metrics()`` (its limit raised before the run)."""
    from torch._dynamo.utils import get_compilation_metrics

    ids: dict[str, bool] = {}
    for m in get_compilation_metrics():
        cid = str(m.compile_id).split("_")[0]
        ids[cid] = ids.get(cid, False) or bool(m.fail_type)
    return {"ids": len(ids), "failed": sum(ids.values()),
            "recompiles": sum(1 for c in ids if not c.endswith("/0"))}


def child(model_type: str, class_name: str, explain: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"model_type": model_type, "class": class_name}
    import torch
    import transformers
    from transformers import AutoConfig

    torch.manual_seed(0)
    try:
        cfg = reduce_config(AutoConfig.for_model(model_type))
        model = getattr(transformers, class_name)(cfg).eval()
    except Exception as e:  # noqa: BLE001 - any failure to build is the result
        return {**out, "status": "not built", "error": f"{type(e).__name__}: {e}".splitlines()[0][:300]}
    out["modality"], calls, error = recipe(model, torch)
    out["inputs"] = sorted(calls[0])
    if error is not None:
        return {**out, "status": "fails eagerly", "error": error}
    return {**out, **compiled_run(model, calls, explain, torch)}


def compiled_run(model: Any, calls: list[dict[str, Any]], explain: bool, torch: Any) -> dict[str, Any]:
    from torch._dynamo.utils import counters

    from seamscope.capture.session import session

    torch._dynamo.utils.set_compilation_metrics_limit(1 << 20)
    torch._dynamo.utils.clear_compilation_metrics()
    counters.clear()
    out: dict[str, Any] = {"status": "compiled"}
    cm = torch.compile(model, backend="eager")
    t0 = time.perf_counter()
    with session() as s, torch.no_grad():
        try:
            for kw in calls:
                cm(**kw)
        except Exception as e:  # noqa: BLE001 - works eagerly, fails compiled: the compiler's
            out.update(status="raised compiled", error=f"{type(e).__name__}: {e}".splitlines()[0][:300])
    out["seconds"] = round(time.perf_counter() - t0, 2)
    sm = s.receipt().summary
    frames, unimpl = dict(counters["frames"]), dict(counters["unimplemented"])
    declined = sum(n for r, n in unimpl.items() if re.search(r"\bgb0003\b", r))
    ours = {"compiles": sm.compile_count, "recompiles": sm.recompile_count, "fallbacks": sm.fallback_count,
            "graphs": sm.graph_count, "break_sites": sm.break_site_count}
    theirs: dict[str, Any] = {"frames_total": frames.get("total", 0), "frames_ok": frames.get("ok", 0),
                              "declined": declined, "unique_graphs": counters["stats"]["unique_graphs"],
                              "graph_break_reasons": len(counters["graph_break"])}
    tr = trace_ids(os.environ["TORCH_TRACE"]) if os.environ.get("TORCH_TRACE") else metric_ids()
    equal = {"fallbacks": ours["fallbacks"] == theirs["frames_total"] - theirs["frames_ok"] - declined,
             "fallbacks_raw": ours["fallbacks"] == theirs["frames_total"] - theirs["frames_ok"],
             "graphs": ours["graphs"] == theirs["unique_graphs"]}
    if tr is not None:
        theirs["compile_ids"] = tr  # from the TORCH_TRACE log with --trace, else the compilation metrics
        equal["compile_ids"] = ours["compiles"] + ours["fallbacks"] == tr["ids"]
        equal["recompiles"] = ours["recompiles"] == tr["recompiles"]
        equal["failed_ids"] = ours["fallbacks"] == tr["failed"]
    sites = [{"file": os.path.basename(b.file), "line": b.line, "gb_code": b.gb_code, "gb_type": b.gb_type,
              "skipped": b.frame_skipped, "class": root_cause(b.gb_code, b.gb_type, b.reason),
              "reason": b.reason[:300]}
             for b in sm.break_sites]
    if explain and out["status"] == "compiled":
        torch._dynamo.reset()
        with torch.no_grad():  # the grad mode of the observed calls: some breaks exist only under grad
            ex = torch._dynamo.explain(model)(**calls[0])
        ex_sites = {(os.path.basename(r.user_stack[-1].filename), r.user_stack[-1].lineno)
                    for r in ex.break_reasons if r.user_stack}
        theirs["explain_sites"] = len(ex_sites)
        equal["explain_sites"] = ex_sites <= {(x["file"], x["line"]) for x in sites}
    return {**out, "ours": ours, "theirs": theirs, "equal": equal, "sites": sites}


# --- the parent: sample, run each in a fresh process, summarise -------------------------------


def models(only: list[str]) -> list[tuple[str, str]]:
    """(model type, class name) of every base model class (of those ``only`` names, when given)."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    pairs = [(t, c) for t, c in MODEL_MAPPING_NAMES.items() if isinstance(c, str)]
    if only:
        pairs = [(t, c) for t, c in pairs if t in only or c in only]
    return sorted((t, c) for t, c in pairs if hasattr(transformers, c))


def run_one(model_type: str, class_name: str, args: argparse.Namespace) -> dict[str, Any]:
    """One model in a fresh process: forked from this one (torch and transformers imported once), or
    with ``--trace`` a new interpreter that writes a ``TORCH_TRACE`` whose compile ids are counted."""
    with tempfile.TemporaryDirectory(prefix="census-") as tmp:
        res_path = os.path.join(tmp, "result.json")
        spawn = args.trace or _FORK_DEATHS[0] >= 3
        status = _forked(model_type, class_name, res_path, args) if not spawn else _spawned(
            model_type, class_name, res_path, tmp, args)
        if not spawn and status is not None and not os.path.exists(res_path):
            # a forked child died without a result: once more in a new interpreter (a library file
            # replaced on disk under this process breaks every fork after it; three in a row: spawn)
            _FORK_DEATHS[0] += 1
            status = _spawned(model_type, class_name, res_path, tmp, args)
        elif not spawn:
            _FORK_DEATHS[0] = 0
        if status is None:
            return {"model_type": model_type, "class": class_name, "status": "timed out"}
        if os.path.exists(res_path):
            with open(res_path, encoding="utf-8") as f:
                result: dict[str, Any] = json.load(f)
                return result
        return {"model_type": model_type, "class": class_name, "status": "crashed", "error": status}


_FORK_DEATHS = [0]  # forked children that died without a result, in a row


def _forked(model_type: str, class_name: str, res_path: str, args: argparse.Namespace) -> str | None:
    pid = os.fork()
    if pid == 0:  # the child: write the result, leave without running the parent's cleanup
        code = 0
        try:
            res = child(model_type, class_name, args.explain)
            with open(res_path, "w", encoding="utf-8") as f:
                json.dump(res, f)
        except BaseException:  # noqa: BLE001 - said on stderr, the parent lists the model as crashed
            import traceback

            traceback.print_exc()
            code = 1
        os._exit(code)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        done, wstatus = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(wstatus)
            return f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        time.sleep(0.2)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return None


def _spawned(model_type: str, class_name: str, res_path: str, tmp: str, args: argparse.Namespace) -> str | None:
    env = {**os.environ, "TORCH_TRACE": os.path.join(tmp, "trace"), "TRANSFORMERS_VERBOSITY": "error"}
    cmd = [sys.executable, __file__, "--child", model_type, class_name, res_path]
    if args.explain:
        cmd.append("--explain")
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return None
    return (p.stderr.strip().splitlines() or ["no output"])[-1][:300]


def summary(results: list[dict[str, Any]], versions: str) -> str:
    by: dict[str, int] = {}
    for r in results:
        by[r["status"]] = by.get(r["status"], 0) + 1
    counted = [r for r in results if "equal" in r]
    keys = sorted({k for r in counted for k in r["equal"]})
    built = len(results) - by.get("not built", 0)
    eager = built - by.get("fails eagerly", 0)
    lines = [f"census sweep: {versions}",
             f"models tried {len(results)}; " + ", ".join(f"{k} {v}" for k, v in sorted(by.items())),
             f"built {built}; ran eagerly {eager}; counts compared on {len(counted)} models (compiled)"]
    kinds: dict[str, int] = {}
    for r in results:
        if r["status"] != "not built" and r.get("modality"):
            kinds[r["modality"]] = kinds.get(r["modality"], 0) + 1
    fails: dict[str, int] = {}
    for r in results:
        if r["status"] in ("not built", "fails eagerly"):
            key = f"{r['status']}: {failure_class(r.get('error', ''))}"
            fails[key] = fails.get(key, 0) + 1
    lines += [f"  {k:<72} {v:>4}" for k, v in sorted(fails.items(), key=lambda kv: -kv[1])]
    lines.append("inputs: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])))
    walls = [r["wall_s"] for r in results if "wall_s" in r]
    if walls:
        lines.append(f"wall time {sum(walls) / 60:.1f} min for the {len(walls)} models that record it "
                     f"({sum(walls) / len(walls):.1f} s each)")
    for k in keys:
        have = [r for r in counted if k in r["equal"]]
        ok = sum(1 for r in have if r["equal"][k])
        lines.append(f"  {k:<14} equal on {ok}/{len(have)}"
                     + ("" if ok == len(have) else ": differ on " + ", ".join(
                         r["model_type"] for r in have if not r["equal"][k])))
    rule = [r for r in counted if all(v for k, v in r["equal"].items() if k != "fallbacks_raw")]
    lines.append(f"  all compared counts equal on {len(rule)}/{len(counted)}")
    broke = [r for r in counted if r["sites"]]
    lines.append(f"models with break sites: {len(broke)}/{len(counted)}")
    classes: dict[str, list[int]] = {}
    for r in broke:
        seen = {s["class"] for s in r["sites"]}
        for s in r["sites"]:
            classes.setdefault(s["class"], [0, 0])[0] += 1
        for c in seen:
            classes[c][1] += 1
    for c, (n_sites, n_models) in sorted(classes.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"  {c:<44} {n_sites:>4} sites in {n_models} models")
    return "\n".join(lines)


_OLD_MODALITY = {"token ids": "text", "encoder-decoder ids": "text (encoder-decoder)", "audio features": "audio"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=0, help="this many model types, drawn with --seed (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", action="append", default=[], help="a model type (repeatable)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per model")
    ap.add_argument("--explain", action="store_true", help="also compare break sites with explain's")
    ap.add_argument("--trace", action="store_true",
                    help="each model in a new interpreter with TORCH_TRACE; its compile ids are compared")
    ap.add_argument("--json", help="write every model's result here")
    ap.add_argument("--skip", metavar="JSON", action="append", default=[],
                    help="leave out the models a --json file of an earlier sweep holds (repeatable)")
    ap.add_argument("--skip-compared", metavar="JSON", action="append", default=[],
                    help="leave out the models whose counts a --json file compared (run the rest again)")
    ap.add_argument("--summarize", metavar="JSON", help="print the summary of --json files (comma-separated) and stop")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.summarize:
        saved: dict[str, Any] = {"results": [], "versions": ""}
        for path in args.summarize.split(","):
            with open(path, encoding="utf-8") as f:
                one = json.load(f)
            saved["results"] += one["results"]
            saved["versions"] = one["versions"]
        last = {r["model_type"]: r for r in saved["results"]}  # a model run again: its last result
        saved["results"] = list(last.values())
        for r in saved["results"]:  # classes and modalities as this version names them
            r["modality"] = _OLD_MODALITY.get(r.get("modality", ""), r.get("modality", ""))
            for site in r.get("sites", []):
                site["class"] = root_cause(site["gb_code"], site["gb_type"], site.get("reason", ""))
        print(summary(saved["results"], saved["versions"]))
        return 0
    if args.child:
        model_type, class_name, res_path = args.child
        res = child(model_type, class_name, args.explain)
        with open(res_path, "w", encoding="utf-8") as f:
            json.dump(res, f)
        return 0
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import torch
    import transformers

    import seamscope.capture.session  # noqa: F401 - imported once, before the forks

    versions = f"torch {torch.__version__}, transformers {transformers.__version__}"
    todo = models(args.only)
    for path in args.skip + args.skip_compared:
        with open(path, encoding="utf-8") as f:
            done = {r["model_type"] for r in json.load(f)["results"] if path in args.skip or "equal" in r}
        todo = [m for m in todo if m[0] not in done]
    if args.sample and not args.only:
        todo = sorted(random.Random(args.seed).sample(todo, min(args.sample, len(todo))))
    results = []
    for i, (model_type, class_name) in enumerate(todo, 1):
        t0 = time.perf_counter()
        r = run_one(model_type, class_name, args)
        r["wall_s"] = round(time.perf_counter() - t0, 1)  # the whole model: fork, build, eager run, compile
        results.append(r)
        diff = [k for k, v in r.get("equal", {}).items() if not v and k != "fallbacks_raw"]
        print(f"[{i}/{len(todo)}] {class_name}: {r['status']}" + (f" ({r['error'][:90]})" if "error" in r else "")
              + (f", {len(r['sites'])} break sites" if "sites" in r else "")
              + (f", DIFFER {diff}" if diff else "") + f" [{time.perf_counter() - t0:.0f} s]", flush=True)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump({"versions": versions, "results": results}, f, indent=1)
    print(summary(results, versions))
    return 0


if __name__ == "__main__":
    sys.exit(main())
