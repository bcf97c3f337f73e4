"""``python -m kvplan ARGS`` runs ``kvplan ARGS``."""

from optimizer.cli.main import run

if __name__ == "__main__":
    run()
