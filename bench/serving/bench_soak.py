#!/usr/bin/env python3
"""The 10-minute soak and storm of build/bin/server (test/serving/serving_soak.py; CI runs a
short one, test_server_soak.py): prints the figures bench/RESULTS.md records (RSS start, after
warm-up, end, drift; ping p50/p99/max; each request kind's outcomes; the storm's) and exits
non-zero when a check failed. Not a speed comparison, so no peer.

  .venv/bin/python bench/serving/bench_soak.py [--duration 600] [--json FILE]
      [--model-dir DIR]  (a real model instead of the statistics predictor: use fewer
                          --clients, each request takes seconds on a CPU)
"""
import argparse
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "test" / "serving"))
import serving_soak  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=600.0)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--model-dir", type=pathlib.Path)
    parser.add_argument("--json", type=pathlib.Path)
    args = parser.parse_args()
    figures = serving_soak.run_soak(args.duration, args.clients, model_dir=args.model_dir)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=str))
    rss = figures.get("rss_kib", {})
    mib = {k: (v / 1024 if isinstance(v, (int, float)) else v) for k, v in rss.items()}
    print(f"machine: {os.uname().nodename}, {len(os.sched_getaffinity(0))} usable CPUs, load average "
          f"{os.getloadavg()[0]:.1f} at the end; {args.duration:.0f} s, {args.clients} client threads")
    if mib:
        print(f"RSS MiB: start {mib['start']:.1f}, after warm-up {mib['after_warmup']:.1f}, end {mib['end']:.1f} "
              f"(drift {figures['rss_drift_end_pct']:+.1f}%, spread ±{figures['rss_spread_pct']:.1f}% after warm-up, "
              f"range {mib['min_after_warmup']:.1f}..{mib['max_after_warmup']:.1f}), after the storm "
              f"{mib['after_storm']:.1f}")
    ping = figures.get("ping", {})
    if ping:
        control = figures["control_ping"]
        print(f"/ping: {ping['count']} probes, {ping['failures']} failed, p50 {ping['p50_ms']:.1f} ms, "
              f"p99 {ping['p99_ms']:.1f} ms, max {ping['max_ms']:.1f} ms, {ping['over_bound']} over 100 ms "
              f"({ping['over_bound_control_fast']} of them while the control's was under 50 ms); idle control "
              f"server at the same moments: p50 {control['p50_ms']:.1f} ms, p99 {control['p99_ms']:.1f} ms, "
              f"max {control['max_ms']:.1f} ms, {control['over_bound']} over 100 ms")
    print("| kind | outcomes |\n|---|---|")
    for kind, outcomes in figures["counts"].items():
        print(f"| {kind} | {', '.join(f'{k}: {v}' for k, v in sorted(outcomes.items(), key=str))} |")
    storm = figures["storm"]
    print(f"storm: {storm['connections']} requests at once -> {storm['outcomes']} in "
          f"{storm['seconds_to_last_answer']:.2f} s; afterwards {storm['after_storm']}")
    print("failures: " + ("none" if not figures["failures"] else "\n  " + "\n  ".join(figures["failures"])))
    raise SystemExit(1 if figures["failures"] else 0)


if __name__ == "__main__":
    main()
