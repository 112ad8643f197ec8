# The two commands of the README: `make demo` and `make test`. Both set themselves up first.
.PHONY: setup demo test clean

setup:
	bash scripts/bootstrap.sh

demo: setup
	bash scripts/demo.sh

test: setup
	bash scripts/test.sh

clean:
	rm -rf .cache/demo .pytest_cache
