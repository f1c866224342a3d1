"""Search: the space of configurations, the Optuna study and the answer."""

from tuner.search.answer import Answer, best_per_model_workload, choose
from tuner.search.space import SearchSpace, drafts_by_method, parse_ks
from tuner.search.study import OptimizeSettings, optimize, study_name

__all__ = ["Answer", "OptimizeSettings", "SearchSpace", "best_per_model_workload", "choose",
           "drafts_by_method", "optimize", "parse_ks", "study_name"]
