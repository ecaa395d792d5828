.PHONY: run test test-fast

# Set up and run the platform (web + worker) on embedded defaults.
run:
	scripts/run.sh

# Set up what the tests need and run them all (PostgreSQL + real Docker).
test:
	scripts/test.sh

# The fast tier: PostgreSQL only, sandboxes on the fake backend, in-process tests (under two minutes).
test-fast:
	scripts/test.sh --fast
