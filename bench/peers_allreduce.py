#!/usr/bin/env python3
"""NCCL all-reduce peer for fly-comm's bench: torch.distributed with the NCCL backend, one
process per GPU (torch.multiprocessing), bf16, the same sizes as
fly-comm/examples/allreduce_bench.rs (4 KiB .. --max-mib MiB, doubling), eager and
CUDA-graph-captured. Prints a table and writes $OUT/peers_allreduce.json (or --out).

    python3 bench/peers_allreduce.py [--max-mib 256] [--iters 50] [--ws N]
"""
import argparse
import json
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def timed(fn, iters):
    fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / iters


def worker(rank, ws, args, port, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=ws, device_id=torch.device("cuda", rank))
    rows = []
    nbytes = 4096
    while nbytes <= args.max_mib << 20:
        n = nbytes // 2
        x = torch.full((n,), float(rank + 1), dtype=torch.bfloat16, device="cuda")
        dist.all_reduce(x)
        ok = bool(torch.all(x == sum(range(1, ws + 1))).item())
        eager = timed(lambda: dist.all_reduce(x), args.iters)
        per_graph = 10
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            dist.all_reduce(x)  # warm-up on the capture stream
            torch.cuda.synchronize()
            with torch.cuda.graph(g, stream=s):
                for _ in range(per_graph):
                    dist.all_reduce(x)
        graph = timed(g.replay, max(1, args.iters // per_graph)) / per_graph
        t = torch.tensor([eager, graph], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        rows.append({"bytes": nbytes, "ok": ok, "nccl_us": t[0].item(), "nccl_graph_us": t[1].item()})
        nbytes *= 2
    if rank == 0:
        q.put(rows)
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--max-mib", type=int, default=256)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--ws", type=int, default=torch.cuda.device_count())
    p.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "peers_allreduce.json"))
    args = p.parse_args()
    if args.ws < 2:
        raise SystemExit("peers_allreduce: NCCL needs at least 2 GPUs (one process each)")
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    procs = [ctx.Process(target=worker, args=(r, args.ws, args, 29517, q)) for r in range(args.ws)]
    for pr in procs:
        pr.start()
    rows = q.get()
    for pr in procs:
        pr.join()
    print(f"{'bytes':>10} {'nccl us':>10} {'nccl graph':>11}  check")
    for r in rows:
        print(f"{r['bytes']:>10} {r['nccl_us']:>10.2f} {r['nccl_graph_us']:>11.2f}  {'ok' if r['ok'] else 'WRONG'}")
    with open(args.out, "w") as f:
        json.dump({"world_size": args.ws, "dtype": "bf16", "rows": rows}, f, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
