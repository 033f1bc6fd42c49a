"""Command-line interface (``kvlab ...``)."""
