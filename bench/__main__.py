"""Benchmark and quality suite: ``python -m bench all|quality|throughput|registry|... --size small``.

This module parses the command line only; the shared harness (sizes, the generated crawls, result
files) and the quality and throughput commands are in ``bench.harness``, each other command in its
own module, none of which imports this one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench.harness import SIZES, cmd_quality, peer_process


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("all", "quality"):
        p = sub.add_parser(name)
        p.add_argument("--size", choices=list(SIZES), default="small")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--peers", help="comma-separated peers (default: all that import)")
        p.add_argument(
            "--corpus", choices=("eval", "sample"), default="eval",
            help="eval: the evaluation news corpora (published numbers); sample: the shipped sample corpus, other texts",
        )
        p.add_argument(
            "--edits", choices=("crawl", "harsh"), default="crawl",
            help="crawl: 1-3 edits per near copy, typos at 0.3-2.5%% of characters (published numbers); "
            "harsh: 2-4 edits, typos at 1-5%%, a robustness check no threshold is read on",
        )
        p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                       help="a DedupConfig field for our run (JSON value), e.g. registry_signature_bits=8")  # fmt: skip
        p.add_argument("--out", help="result name under bench/results (default quality-<size>)")
        p.add_argument("--compact-between", action="store_true",
                       help="compact the registry before every hour: earlier hours are main-tier documents")  # fmt: skip
    p = sub.add_parser("throughput", help="whole processes at 20k, 60k and 200k docs, ours and the peers alternating")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p = sub.add_parser("registry", help="100k-doc batch against a registry of 10M documents (PostgreSQL)")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p = sub.add_parser("seen", help="`seen` URLs/s against a registry of 10M URLs (PostgreSQL)")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p = sub.add_parser("rerun-commit", help="a 20k-doc hour's commit, then its rerun's commit (embedded and local server)")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p = sub.add_parser("pairs", help="embedders on the labeled pair sets (semantic layer)")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p = sub.add_parser("semantic", help="L4 on the synthetic crawl: share embedded, docs/s, extra duplicates, false drops")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p = sub.add_parser("spark", help="the Spark engine (local, 1 and 2 cores) beside the single-node cascade, 20k and 200k docs")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p = sub.add_parser("_peer_process")
    p.add_argument("name")
    p.add_argument("source", type=Path)
    p.add_argument("out", type=Path)
    # The pass-through commands parse their own options: argparse's REMAINDER after a subcommand does
    # not reliably take options that start with "--", so hand the rest of the line over untouched.
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in ("throughput", "registry", "seen", "rerun-commit", "pairs", "semantic", "spark"):
        args = argparse.Namespace(command=argv[0], rest=argv[1:])
    else:
        args = parser.parse_args(argv)

    # The product's process setting (the CLI and the Airflow tasks make it too).
    from dedup_tasks.runtime import process_settings

    process_settings()
    if args.command == "_peer_process":
        peer_process(args.name, args.source, args.out)
        return 0
    if args.command == "registry":
        from bench.registry_bench import main as registry_main

        return registry_main(args.rest)
    if args.command == "seen":
        from bench.seen_bench import main as seen_main

        return seen_main(args.rest)
    if args.command == "rerun-commit":
        from bench.rerun_commit import main as rerun_commit_main

        return rerun_commit_main(args.rest)
    if args.command == "pairs":
        from bench.pairs import main as pairs_main

        return pairs_main(args.rest)
    if args.command == "spark":
        from bench.spark_bench import main as spark_main

        return spark_main(args.rest)
    if args.command == "semantic":
        from bench.semantic import main as semantic_main

        return semantic_main(args.rest)
    if args.command == "throughput":
        from bench.throughput import main as throughput_main

        return throughput_main(args.rest)
    # "--peers none": ours only.
    peers = [p for p in args.peers.split(",") if p != "none"] if args.peers else None
    started = time.perf_counter()
    overrides = {k: json.loads(v) for k, v in (item.split("=", 1) for item in args.set)}
    cmd_quality(args.size, args.seed, peers, args.corpus, overrides, args.out, args.edits, args.compact_between)
    if args.command == "all":
        from bench.throughput import cmd_throughput

        cmd_throughput(SIZES[args.size]["throughput_sizes"], args.seed)
    print(f"bench {args.command} --size {args.size}: {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
