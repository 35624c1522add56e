"""Command-line tools (each runnable as ``python -m broker.cli.<tool>``)."""
