"""Search: the space of configurations, the Optuna study and the verdict."""

from tuner.search.answer import Answer, choose
from tuner.search.space import SearchSpace, drafts_by_method, parse_ks
from tuner.search.study import OptimizeSettings, optimize, study_name
from tuner.search.verdict import Verdict, best_from_store, study_verdict

__all__ = ["Answer", "OptimizeSettings", "SearchSpace", "Verdict", "best_from_store", "choose",
           "drafts_by_method", "optimize", "parse_ks", "study_name", "study_verdict"]
