"""Compares the answers the candidate phase wrote (tests/candidate.sh) with FizzBuzz's: it imports nothing of the agent's."""

import json
import sys


def expected(n):
    return "FizzBuzz" if n % 15 == 0 else "Fizz" if n % 3 == 0 else "Buzz" if n % 5 == 0 else str(n)


with open(sys.argv[1]) as answers:
    assert json.load(answers) == [expected(n) for n in range(1, 31)]
