from __future__ import annotations

import pytest

from compaction.policy import Thresholds
from compaction.utilization import Utilization, is_underutilized

REFERENCE = Thresholds(cpu=40, memory=50, pods=30)


@pytest.mark.parametrize(("usage", "expected"), [
    (Utilization(35, 45, 20), True),     # the reference's qualifying node
    (Utilization(41, 20, 10), False),    # the reference's node that does not qualify
    (Utilization(40, 50, 30), True),     # at the threshold counts as under
    (Utilization(10, 10, 31), False),    # any one resource above is enough to disqualify
    (Utilization(0, 0, 0), True),
])
def test_reference_threshold_example(usage: Utilization, expected: bool) -> None:
    assert is_underutilized(usage, REFERENCE) is expected
