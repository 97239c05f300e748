"""bayesgrpo's benchmarks and research (not shipped): scripts that write ``bench/results``."""
