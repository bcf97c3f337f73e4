"""The measured-benchmark CSV format, read into checked rows (module docs: ``rows``, ``disagg``,
``read``)."""
