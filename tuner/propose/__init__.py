"""Proposing the next configuration to measure: the guided search (step-cost prediction), TPE
and the grid. Proposers read the study; they store nothing of their own."""
