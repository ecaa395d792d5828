def fizzbuzz(n: int) -> str:
    """The FizzBuzz word for n."""
    raise NotImplementedError
