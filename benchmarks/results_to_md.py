#!/usr/bin/env python
"""Turn one or more benchmarks/bench.py --json files into the Markdown of
benchmarks/RESULTS.md: per file and thread count, a heading with the machine, thread count
and date, then a table (case, pool_grad ms, GB/s, % copy [and, for runs that have it, % copy
from interleaved rounds], torch ms, speed-up), followed by
the extra checks when the run has them.

    python benchmarks/results_to_md.py bench_1t.json bench_2t.json [-o RESULTS.md]
                                       [--one-shot] [--no-checks]
"""
import argparse
import json
import sys


def _f(x, fmt):
    return "–" if x is None else format(x, fmt)


def _ms(x):
    if x is None:
        return "–"
    if x < 0.1:
        return f"{x * 1e3:.1f} µs"
    return f"{x:.3f}" if x < 10 else f"{x:.2f}" if x < 100 else f"{x:.1f}"


def _ms_u(x):
    """A time in ms with its unit, for prose."""
    return "–" if x is None else f"{x * 1e3:.1f} µs" if x < 0.1 else f"{_ms(x)} ms"


def machine_line(m):
    parts = [f"{m.get('cpu', '?')}", f"{m.get('nproc', '?')} CPUs"]
    topo = m.get("topology") or {}
    if topo.get("cores"):
        # (16 vCPUs may be 8 cores of two hardware threads each)
        parts[-1] += (f" ({topo['cores']} cores"
                      + (f", {topo['sockets']} sockets" if topo.get("sockets", 1) > 1 else "")
                      + ")")
    vers = [f"pool_grad {m.get('pool_grad')}"
            + (f" ({m['pool_grad_git']})" if m.get("pool_grad_git") else ""),
            f"numpy {m.get('numpy')}"]
    if m.get("torch"):
        vers.append(f"torch {m['torch']}")
    return ", ".join(parts), ", ".join(vers)


def _ceiling(c):
    """torch out= ms over the traffic bound's ms (older runs: from their fields)."""
    if c.get("ceiling_out"):
        return c["ceiling_out"]
    bd = c.get("bound")
    if c.get("torch_out_ms") and bd and bd.get("best_ms"):
        return c["torch_out_ms"] / bd["best_ms"]
    return None


def run_md(doc, run, one_shot, checks):
    m = doc["machine"]
    mach, vers = machine_line(m)
    n = run["threads"]
    out = [f"### {mach} — {n} thread{'s' if n != 1 else ''} — {m.get('date', '?')}", "",
           f"{vers}; median of repeats after a warm-up; pool_grad = `op.execute(workspace=ws)` "
           f"into a preallocated grad_input; GB/s = (grad_output + grad_input [+ indices]) "
           f"bytes / time; % copy = of the best copy (`np.copyto`, or OpenMP memcpy / "
           f"streaming stores) moving as many bytes"
           + ("; % copy, paired = the same ratio from interleaved rounds of pool_grad and "
              "that copy (median), immune to the machine's drift between the two"
              if any(c.get("pct_copy_paired") is not None for c in run["cases"]) else "")
           + ("; % bound = the time of an OpenMP pass that only reads the case's input "
              "bytes and writes its output bytes (a sample of the real result), over "
              "pool_grad's time, from interleaved rounds: how close the case is to this "
              "machine's limit for its own traffic"
              if any(c.get("pct_bound_paired") is not None for c in run["cases"]) else "")
           + ("; stores = the store form the op kept after timing its forms over its "
              "first calls (stream: streaming stores; cache: ordinary ones"
              + ("; cache rows, stream rows: the row form of planes that could go in strips"
                 if any(" rows" in (c.get("store_form") or "") for c in run["cases"])
                 else "")
              + ("; ... by plane: planes in registers stored one plane after the other"
                 if any(" by plane" in (c.get("store_form") or "") for c in run["cases"])
                 else "")
              + ("; ... plane: small planes in registers instead of as lanes"
                 if any((c.get("store_form") or "").endswith(" plane")
                        and " by plane" not in c["store_form"] for c in run["cases"])
                 else "") + ")"
              if any(c.get("store_form") for c in run["cases"]) else "")
           + "; speed-up = torch ms (its call allocating the result) / pool_grad ms"
           + ("; torch out= ms = torch into a preallocated grad_input (aten's out= "
              "overload), like pool_grad's; speed-up, out= = torch out= ms / pool_grad ms"
              if any(c.get("torch_out_ms") for c in run["cases"]) else "")
           + ("; ceiling, out= = torch out= ms / the % bound pass's ms: the speed-up over "
              "torch out= of a kernel as fast as that pass (under 5×, no kernel moving "
              "these bytes reaches 5×)"
              if any(_ceiling(c) for c in run["cases"]) else "") + ".", ""]
    bg = m.get("max_background_cpus")
    if bg is not None and bg > 0.25:
        out += [f"**Warning:** other processes kept up to {bg:.1f} CPUs busy during this "
                f"run; treat multi-threaded numbers with suspicion.", ""]
    paired = any(c.get("pct_copy_paired") is not None for c in run["cases"])
    bound = any(c.get("pct_bound_paired") is not None for c in run["cases"])
    forms = any(c.get("store_form") for c in run["cases"])
    head = (["case", "pool_grad ms", "GB/s", "% copy"] + (["% copy, paired"] if paired else [])
            + (["% bound"] if bound else []) + (["stores"] if forms else []))
    if one_shot:
        head.append("one-shot ms")
    head += ["torch ms", "speed-up"]
    outs = any(c.get("torch_out_ms") for c in run["cases"])
    if outs:
        head += ["torch out= ms", "speed-up, out="]
    ceil = any(_ceiling(c) for c in run["cases"])
    if ceil:
        head.append("ceiling, out=")
    out.append("| " + " | ".join(head) + " |")
    out.append("| " + " | ".join(["---"] + ["---:"] * (len(head) - 1)) + " |")
    for c in run["cases"]:
        sp = c.get("speedup")
        row = [c["name"], _ms(c["pg_ms"]), _f(c["pg_gbps"], ".1f"), _f(c["pct_copy"], ".0f")]
        if paired:
            row.append(_f(c.get("pct_copy_paired"), ".0f"))
        if bound:
            row.append(_f(c.get("pct_bound_paired"), ".0f"))
        if forms:
            row.append(c.get("store_form") or "–")
        if one_shot:
            row.append(_ms(c.get("oneshot_ms")))
        row += [_ms(c.get("torch_ms")), f"{sp:.2f}×" if sp else "–"]
        if outs:
            so = c.get("speedup_out")
            row += [_ms(c.get("torch_out_ms")), f"{so:.2f}×" if so else "–"]
        if ceil:
            ce = _ceiling(c)
            row.append(f"{ce:.1f}×" if ce else "–")
        out.append("| " + " | ".join(row) + " |")
    out.append("")
    if not checks:
        return out
    mx = [c for c in run["cases"] if c.get("index_check_ms") is not None]
    if mx:
        out.append("Index validation of the max-pool gradient (`count_bad_indices` alone): "
                   + "; ".join(f"{c['name']}: {_ms_u(c['index_check_ms'])} = "
                               f"{100 * c['index_check_share']:.0f}% of execute" for c in mx)
                   + ".")
        out.append("")
    s = run.get("seed_us")
    if s:
        out.append(f"Seed 1×16×4×4 per call: `op.execute(workspace=ws)` "
                   f"{s['execute_ws_us']:.1f} µs, `op.execute()` {s['execute_us']:.1f} µs, "
                   f"one-shot function {s['oneshot_us']:.1f} µs.")
        out.append("")
    av = run.get("auto_vs_one")
    if av:
        bad = [a for a in av if not a["ok"]]
        out.append(f"Auto thread choice vs `n_threads=1` on {len(av)} small calls: "
                   + ("all within 10%." if not bad else
                      f"{len(bad)} slower by more than 10%: "
                      + "; ".join(f"{a['name']} ({a['auto_us']:.0f} vs {a['one_us']:.0f} µs)"
                                  for a in bad) + "."))
        out.append("")
    cc = run.get("concurrency")
    if cc:
        out.append(f"Concurrency ({cc['case']}, n_threads=1 each): two calls in two Python "
                   f"threads take {cc['ratio']:.2f}× one call "
                   f"({cc['two_concurrent_ms']:.1f} vs {cc['one_call_ms']:.1f} ms)"
                   + (f", CPU time / wall {cc['cpu_per_wall']:.2f}"
                      if cc.get("cpu_per_wall") is not None else "")
                   + (f"; inconclusive: other processes kept {cc['bg_cpus']:.1f} CPUs busy."
                      if (cc.get("bg_cpus") or 0) > 0.25 else "."))
        out.append("")
    return out


def sweep_md(doc):
    runs = doc["runs"]
    counts = [r["threads"] for r in runs]
    by = [{c["name"]: c for c in r["cases"]} for r in runs]
    names = [c["name"] for c in runs[0]["cases"]]
    head = ["case"] + [f"pool_grad {t}t ms" for t in counts] + \
           [f"×{t}t" for t in counts[1:]] + [f"torch {t}t ms" for t in counts]
    out = [f"#### Thread scaling ({', '.join(map(str, counts))} threads)", "",
           "| " + " | ".join(head) + " |",
           "| " + " | ".join(["---"] + ["---:"] * (len(head) - 1)) + " |"]
    for n in names:
        row = [n] + [_ms(b[n]["pg_ms"]) for b in by]
        row += [f"{by[0][n]['pg_ms'] / b[n]['pg_ms']:.2f}" for b in by[1:]]
        row += [_ms(b[n].get("torch_ms")) for b in by]
        out.append("| " + " | ".join(row) + " |")
    out.append("")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", help="JSON files written by bench.py --json")
    ap.add_argument("-o", "--output", default=None, help="write here (default stdout)")
    ap.add_argument("--one-shot", action="store_true", help="add a one-shot ms column")
    ap.add_argument("--no-checks", action="store_true", help="tables only")
    args = ap.parse_args(argv)
    lines = []
    for path in args.files:
        with open(path) as f:
            doc = json.load(f)
        for run in doc["runs"]:
            if run["cases"] or not args.no_checks:
                lines += run_md(doc, run, args.one_shot, not args.no_checks)
        if len(doc["runs"]) > 1 and doc["runs"][0]["cases"]:
            lines += sweep_md(doc)
    text = "\n".join(lines)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
