"""Compares the answers the candidate phase wrote (tests/candidate.sh) with 1 + 2 + ... + n: it imports nothing of the agent's."""

import json
import sys

with open(sys.argv[1]) as answers:
    assert json.load(answers) == [0, 1, 10, 55]
