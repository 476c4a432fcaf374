"""A short soak and storm against build/bin/server (serving_soak.py has the driver and what it
checks): MRCNN_SOAK_SECONDS (default 45) of mixed good, bad, slow and vanishing clients on
loopback, then a storm of 200 requests beyond the queue. Every request kind must be answered
as the contract says, the server must not crash, its RSS must stay within 10% after warm-up,
every /ping must answer 200 within 100 ms (unless an idle control server pinged at the same
moment was slow too: the machine's stall, not the server's), and the storm must get 503s and
no hang.
bench/serving/bench_soak.py runs the same for 10 minutes.
"""
import json
import os

from serving_soak import run_soak


def test_soak_and_storm():
    figures = run_soak(duration=float(os.environ.get("MRCNN_SOAK_SECONDS", "45")))
    print(json.dumps({k: v for k, v in figures.items() if k != "counts"}, indent=1, default=str))
    assert not figures["failures"], "\n".join(figures["failures"])
