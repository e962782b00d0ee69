"""The cards' facts the models use on a CPU (cuda/device.CARDS) against what the cards reported in
the suite records they ran (one source per fact: a record's `memory.l2_bytes` is the device's
CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, its copy rate measured beside the suite)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gemm_ladder.cuda.device import CARDS

RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
NAME = re.compile(r"\d{4}-\d\d-\d\d_h\d00_suite_all_[0-9a-f]+\.json$")  # kernel-path suites, one per commit
SUITES = sorted(p for p in RESULTS.glob("*_suite_all_*.json") if NAME.match(p.name))


@pytest.mark.parametrize("token", sorted(CARDS))
def test_the_l2_fact_is_what_the_card_reported(token):
    reported = {json.loads(p.read_text())["memory"].get("l2_bytes") for p in SUITES if f"_{token}_" in p.name}
    reported.discard(None)
    assert reported, f"no {token} suite record reports its L2"
    assert reported == {CARDS[token].l2_bytes}, (token, reported)
