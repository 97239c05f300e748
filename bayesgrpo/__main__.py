"""``python -m bayesgrpo ...`` runs the ``bayesgrpo`` command (same as the console script)."""

from bayesgrpo.cli import app

if __name__ == "__main__":
    app()
