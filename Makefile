.PHONY: run test test-fast docs

# Set up and run the platform (web + worker) on embedded defaults.
run:
	scripts/run.sh

# The documentation site (docs/, mkdocs.yml) into var/docs-site/, served by the platform at /docs/.
docs:
	scripts/venv.sh requirements.txt && .venv/bin/mkdocs build --strict --quiet

# Set up what the tests need and run them all (PostgreSQL + real Docker).
test:
	scripts/test.sh

# The fast tier: PostgreSQL only, sandboxes on the fake backend, in-process tests (under two minutes).
test-fast:
	scripts/test.sh --fast
