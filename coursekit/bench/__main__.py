"""``python -m coursekit.bench`` (``make bench``)."""

from coursekit.bench.cli import main

main()
