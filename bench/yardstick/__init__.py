"""The forecast yardstick (issue 29): every development source, split once into *selection* and a *locked test*.

``data``    the sources, their split (a seeded rule) and the runs each contributes
``store``   the ledgers of each method's forecasts (final-reward draws per run x cutoff)
``score``   source-weighted and per-case scores with source-bootstrap intervals, and the looks at the test
"""
