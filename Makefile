.PHONY: run test

# Set up and run the platform (web + worker) on embedded defaults.
run:
	scripts/run.sh

# Set up what the tests need and run them all (PostgreSQL + real Docker).
test:
	scripts/test.sh
