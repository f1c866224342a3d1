"""The study: the loop over Optuna that measures proposed configs, helper workers joining it,
and the time limit."""
