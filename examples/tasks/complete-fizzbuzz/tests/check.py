import sys

sys.path.insert(0, sys.argv[1])
from fizz import fizzbuzz


def expected(n):
    return "FizzBuzz" if n % 15 == 0 else "Fizz" if n % 3 == 0 else "Buzz" if n % 5 == 0 else str(n)


assert [fizzbuzz(n) for n in range(1, 31)] == [expected(n) for n in range(1, 31)]
