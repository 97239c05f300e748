"""``python -m bayesgrpo`` runs the ``bayesgrpo`` command line."""

from bayesgrpo.cli import app

if __name__ == "__main__":
    app(prog_name="bayesgrpo")
