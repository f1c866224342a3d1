"""Deciding: pure functions over stored rows and a study's rules (the answer per load, one config
over several, the k-by-batch-size schedule, the verdict), with the statistics and the marks
they rest on. Nothing here measures, proposes or starts anything."""
