"""From a results table to every table the report needs (stage 10); it never imports the report.

``pipeline`` runs the analyses of a study (:func:`analyze`); ``task`` is one task's steps; ``arms`` the tables
across arms; ``result`` the :class:`Analysis` and its folder on disk; ``summary`` what ``freezestats analyze``
prints.
"""

from freezestats.analysis.pipeline import MODELS, RESPONSES, analyze, load_results, load_study_record
from freezestats.analysis.result import RESULTS_FILE, STUDY_FILE, Analysis, read_analysis, write_analysis
from freezestats.analysis.summary import summary_lines

__all__ = [
    "MODELS",
    "RESPONSES",
    "RESULTS_FILE",
    "STUDY_FILE",
    "Analysis",
    "analyze",
    "load_results",
    "load_study_record",
    "read_analysis",
    "summary_lines",
    "write_analysis",
]
