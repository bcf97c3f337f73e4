"""``python -m kvplan``: the same command line as the ``kvplan`` script (``optimizer.cli``).

The packages are ``optimizer``, ``simulator``, ``hardware`` and ``slo``; this one only gives the
distribution's name to ``python -m``.
"""
