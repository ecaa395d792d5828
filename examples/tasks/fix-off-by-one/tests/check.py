import sys

sys.path.insert(0, sys.argv[1])
from mathutil import total

assert [total(n) for n in (0, 1, 4, 10)] == [0, 1, 10, 55]
