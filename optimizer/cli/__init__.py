"""The ``kvplan`` command line (typer): ``main.py`` wires one module per subcommand
(``optimize``, ``report``, ``simulate``, ``replay``, ``analyze``, ``validate``, ``calibrate``,
``convert``, ``hardware``, ``models``, ``profiles``, ``slo``). Every user error is an ``InputError``
printed as one line with exit status 2. Imports of the heavy libraries are local to the
commands that need them, so start-up stays fast (the one place function-local imports are
allowed, ``tests/test_layering.py``).
"""
