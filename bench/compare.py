#!/usr/bin/env python3
"""Side-by-side table of our bench (ours.json) and the torch peers (peers.json) from the
same run on the same machine: GB/s, % of the measured copy ceiling, ratios, and for the
forward shapes the copy of the same bytes (`copy_at_shape`): `% copy@shape` is ours
against it, and `eager/copy` is the largest speed-up over torch eager that any kernel
moving those bytes at copy speed could show. With OUT_DIR/ours_no_keep_l2.json (the bench
with FLYDSL_KEEP_L2=0) it adds an A/B table of the keep-in-L2 hint.
Usage: python3 compare.py OUT_DIR  -> prints markdown, writes OUT_DIR/table.md"""
import json
import os
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", ".")
ours = json.load(open(os.path.join(out, "ours.json")))["rows"]
peers = json.load(open(os.path.join(out, "peers.json")))["rows"]
copy = max((r["GBps"] for r in peers if r["op"] == "copy"), default=None)


def key(r):
    return (r["op"], r["dtype"], tuple(r["shape"]))


peer = {}
for r in peers:
    peer.setdefault(key(r), {})[r["impl"]] = r
lines = ["copy ceiling (torch, 4 GiB): %s GB/s" % ("%.0f" % copy if copy else "n/a"), "",
         "| op | dtype | shape | ours ms | ours GB/s | % copy | % copy@shape | eager ms "
         "| x eager | eager/copy | compile ms | x compile |",
         "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for r in ours:
    p = peer.get(key(r), {})
    eager = p.get("eager") or p.get("autograd")
    comp = p.get("compile")
    # The same-size copy moves a forward's bytes (read x, write y); not a backward's.
    at = r["op"].endswith("_fwd") and peer.get(
        ("copy_at_shape", r["dtype"], tuple(r["shape"])), {}).get("torch")
    pct = 100.0 * r["GBps"] / copy if copy else float("nan")
    f = lambda v: "%.4f" % v if v else "-"
    x = lambda q: "%.2fx" % (q["median_ms"] / r["median_ms"]) if q else "-"
    at_pct = "%.1f" % (100.0 * at["median_ms"] / r["median_ms"]) if at else "-"
    bound = "%.2fx" % (eager["median_ms"] / at["median_ms"]) if at and eager else "-"
    lines.append("| %s | %s | %s | %.4f | %.0f | %.1f | %s | %s | %s | %s | %s | %s |" % (
        r["op"], r["dtype"], "x".join(map(str, r["shape"])), r["median_ms"], r["GBps"], pct,
        at_pct, f(eager and eager["median_ms"]), x(eager), bound,
        f(comp and comp["median_ms"]), x(comp)))
# A/B of the keep-in-L2 hint: the same bench with FLYDSL_KEEP_L2=0 (run.sh), when present.
ab_path = os.path.join(out, "ours_no_keep_l2.json")
if os.path.exists(ab_path):
    off = {key(r): r for r in json.load(open(ab_path))["rows"]}
    lines += ["", "keep-in-L2 hint A/B (ours as dispatched against FLYDSL_KEEP_L2=0):", "",
              "| op | dtype | shape | ms | ms hint off | off / on |", "|---|---|---|---:|---:|---:|"]
    for r in ours:
        o = off.get(key(r))
        if o:
            lines.append("| %s | %s | %s | %.4f | %.4f | %.3f |" % (
                r["op"], r["dtype"], "x".join(map(str, r["shape"])), r["median_ms"],
                o["median_ms"], o["median_ms"] / r["median_ms"]))
text = "\n".join(lines)
print(text)
open(os.path.join(out, "table.md"), "w").write(text + "\n")
