"""What a run leaves behind (stage 7): the trial record, the exported table, the per-item predictions.

``record`` is the one definition of what a trial stores and exports; ``export`` turns a study into the tidy
table (one row per run); ``item_predictions`` reads the per-example predictions stored as Optuna artifacts.
"""

from freezestats.results.export import RESULT_COLUMNS, STATUS_COLUMNS, cell_status, export_results, results_table

__all__ = ["RESULT_COLUMNS", "STATUS_COLUMNS", "cell_status", "export_results", "results_table"]
