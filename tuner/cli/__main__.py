"""`python -m tuner.cli`: how tuner processes start other tuner processes (tuner/study/child_process.py)."""

from tuner.cli import main

main()
